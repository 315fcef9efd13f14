// Package guest is lazaret-guest's logic inside the Agent Sandbox: the
// escalation client (Run), the wrappers that route a command name through
// it (InstallShims), and the container's init process (Init).
//
// What belongs here: reading the credential bundle and the session
// capability, signing requests, cancellations and acknowledgments, and
// verifying what the host sends back. What does not: anything the host
// decides (pkg/escalation), and anything that would grow the binary beyond
// its dependency budget (bbolt, nftables, CBOR, a TLS server).
package guest
