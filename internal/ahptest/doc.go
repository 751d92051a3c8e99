// Package ahptest is test support for everything that speaks AHP: it finds the shared protocol
// folder (../shared/ahp beside the repository), compiles the draft JSON Schemas from there and
// validates documents against them, and reads the golden-fixture manifest.
//
// The schemas are never copied into the repository: they are data owned by the protocol, and a
// copy would silently drift from the fixtures they belong to. Tests therefore read them from the
// shared folder at run time.
package ahptest
