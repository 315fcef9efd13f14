// Package hosttools knows which workspace files tools on the host execute
// or obey when the developer runs them (make, npm, direnv, editors, agent
// hooks, ...), and compares their state with a recorded baseline, so that
// `lazaret-cli workspace review` can show what a sandbox changed among
// them.
//
// Rules (rules.go) is the one list of those files; Match and Plan are pure
// and table-tested; Scan is the only part that reads the workspace.
package hosttools
