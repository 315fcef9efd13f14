// Package control is the Host Coordinator's control channel: the unix socket
// that lazaret-cli reaches to enroll, register sessions and run commands in
// the sandbox, its publication in the runtime root, and the client that
// drives it.
//
// What belongs here: the socket's framing (a length-prefixed deterministic
// CBOR envelope around one Postcard record of pkg/protocol), the SO_PEERCRED
// check, the TLS 1.3 session over the socket, the request flows and their
// authorization (Server), the CLI side of the same flows (Client), and
// publishing and withdrawing the socket and the identity file by staging and
// renaming. What does not: the records themselves and their cryptography
// (pkg/protocol), the sandbox that runs the commands (the Sessions interface
// is implemented by the coordinator), the Domain Store, and the terminal
// handling of the CLI.
//
// # Connections
//
// A connection is admitted only when the kernel reports a peer with the
// server's own UID; then TLS 1.3 runs with the generation CA. A client that
// presents no certificate may only Enroll; a client whose certificate names a
// CLI ID may Register sessions bound to that CLI ID and run commands in them.
// Requests on one connection run one after another; an interactive session
// takes its connection until the session exits. Any error frame ends the
// connection.
//
// docs/CONTROL.md is the reference for the wire format, the file layout and
// the limits.
package control
