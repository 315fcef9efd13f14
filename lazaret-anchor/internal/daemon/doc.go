// Package daemon is the State Anchor process: it reads the control channel
// from the Host Coordinator, assembles the overlay root filesystem inside the
// private mount namespace it was started in, reports the identities, and
// unmounts on Release, on SIGTERM or when the channel closes.
//
// The wire format and the Host Coordinator's client are in lazaret.dev/pkg/anchor.
// This package holds the anchor's side only: the control loop (serve.go)
// and the mount operations it executes (overlay_linux.go), each of which
// re-checks the directory it was told about before using it.
package daemon
