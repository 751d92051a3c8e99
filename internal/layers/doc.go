// Package layers declares which package of the module may import which, and its test
// checks the module's real import graph (as `go list` reports it) against that table.
// The floors run from the leaf helpers and test kits up to the assembly (app) and the
// command line; a package imports only its own floor and the floors below it that the
// table names, so no import runs from a lower package back up. docs/design/code-map.md mirrors
// the table (a generated section the test keeps equal). A second test holds the module's
// non-test files and functions under size ceilings (codesize_test.go).
//
// The package has no non-test code; this file only documents it.
package layers
