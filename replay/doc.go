// Package replay re-settles captured boundaries through a candidate chain and reports
// where its settlement differs from the recorded live one (`hookproxy replay`), and runs
// policy test cases, written as small YAML files, against a configuration
// (`hookproxy test`).
//
// A replay is deterministic: each event is re-settled exactly as captured, with its
// recorded ids and with the capabilities and extensions the host offered, one at a time
// in capture order, through the candidate's real backends (HTTP, stdio, in-process).
package replay
