// Package view is the FUSE filesystem of the workspace view: one tree whose
// every path is served either from the host workspace or from the Domain's
// isolated root, as the frozen routing decides.
//
// What belongs here: the routing rule (route.go: a pure function of the
// frozen classification, the repositories frozen at start and the view
// path), the allowlist of what the sandbox may write in a repository's
// administrative area (admin.go: a pure planner, table-tested), the
// confined access to the two backing roots (backing.go: openat2 beneath a
// retained O_PATH root, never following a symbolic link, a magic link or a
// mount crossing), the FUSE node operations (node.go), and the pruning
// that keeps the node table to what the kernel uses (prune.go). What does not:
// mounting, the control channel and the process lifecycle
// (internal/daemon), and git's ignore semantics (lazaret.dev/pkg/gitignore).
//
// docs/WORKSPACE.md states the rules this package enforces.
package view
