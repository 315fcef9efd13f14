// Package gitroute is the Host Coordinator's side of the Git routing
// participant: it starts lazaret-gitroute, which serves the /workspace view
// (host workspace, with git-ignored paths routed to a per-Domain isolated
// root), learns the view's mount identity, and releases or cleans it up.
//
// What belongs here: the closed set of control messages and their strict
// Postcard encodings (message.go), the packet transport over the inherited
// SOCK_SEQPACKET socketpair (conn.go), unmounting a view and checking that
// a recorded mount is gone (mount.go), and Start, which launches the daemon
// with CLONE_PIDFD (lazaret.dev/pkg/spawn), directly or through the
// caller's Spec.Command inside other namespaces, and returns a Daemon with
// its pidfs identity and mount identity (client.go). It is the only
// client of the daemon. What does not: the filesystem itself, the classification of
// paths and the mounting (lazaret-gitroute and lazaret.dev/pkg/gitignore),
// and durable recording in the Domain Store (the coordinator).
//
// The channel is authenticated by construction: the coordinator creates the
// socketpair with SOCK_CLOEXEC and hands one end to the daemon as fd 3.
// docs/WORKSPACE.md describes the protocol and the failure behaviour.
package gitroute
