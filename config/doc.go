// Package config holds hookproxy's configuration file model (YAML, JSON accepted), its
// defaults and the embedded default configuration used when no file is given.
//
// Design: config is data and its validation; nothing here opens a file other than the
// configuration itself or starts anything (app does).
package config
