// Package docsync keeps generated sections of the documentation (README.md and the files
// of docs/) equal to what tests compute from the code, so a documented table cannot drift
// from what it documents. A section sits between two marker comments, in the file that the
// test names:
//
//	<!-- generated:NAME:begin -->
//	...
//	<!-- generated:NAME:end -->
//
// Check fails the test when the section differs; with HOOKPROXY_UPDATE_DOCS=1 it rewrites
// the section instead (then review the diff and commit it).
//
// Its own tests also keep the code map (docs/design/code-map.md) naming every package of
// the module, every relative link and anchor of README.md and docs/ resolving, every file
// of docs/ reachable from README.md, and README.md short.
package docsync
