// Package startup is the contract between lazaret-cli and a coordinator
// it starts: the `lazaret-coordinator serve` command line and descriptors
// (Serve, through package handoff), and the start report the coordinator
// writes back on one of them (Writer, Read).
//
// The start report is newline-terminated UTF-8 lines: `step NAME` when a
// step begins and `done NAME` when it ends (steps may overlap); `kept
// "PATH"` for each host path kept isolated only because an earlier
// generation isolated it (a Go string literal of ASCII, as
// strconv.QuoteToASCII writes it) and `kept-more N` for those it does not
// name; then exactly one of `ready` or `error SENTENCE`; then end of file.
// No line is longer than MaxLine bytes, newline included.
//
// What does not belong here: what the coordinator does between the lines
// (package coordinator of lazaret-coordinator) and how the CLI shows them.
package startup
