// Package daemon is the lifecycle of lazaret-gitroute: it retains the two
// backing roots, freezes the classification, mounts and serves the view,
// reports Ready on the control channel, and unmounts on Release, on the
// coordinator's loss, or on SIGTERM.
//
// What belongs here: the order of those steps, the mount (through
// fusermount3 with auto_unmount, or a direct mount(2) by root), and the
// control loop. What does not: the filesystem (internal/view), the
// classification (lazaret.dev/pkg/gitignore) and the wire messages
// (lazaret.dev/pkg/gitroute).
package daemon
