// Package docsync keeps generated sections of README.md equal to what tests compute from
// the code, so a documented table cannot drift from what it documents. A section sits
// between two marker comments:
//
//	<!-- generated:NAME:begin -->
//	...
//	<!-- generated:NAME:end -->
//
// Check fails the test when the section differs; with HOOKPROXY_UPDATE_DOCS=1 it rewrites
// the section instead (then review the diff and commit it).
//
// Its own test also keeps the README's Code map naming every package of the module.
package docsync
