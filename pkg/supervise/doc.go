// Package supervise is the generation channel between the Host Coordinator
// and a Runtime Supervisor (lazaret-supervisor), and the coordinator's side
// of it.
//
// What belongs here: the closed set of messages in each direction with their
// strict Postcard encodings (message.go), the packet transport over the
// inherited SOCK_SEQPACKET socketpair (conn.go), and Launch, which starts a
// supervisor, drives the staged/committed ownership barriers of the
// supervisor and of its child through the coordinator's durable hooks, and
// returns a Handle (launch.go).
//
// What does not: the supervisor's own state machine, the causal edge and the
// gate live in lazaret-supervisor/internal/supervisor; identities, slots and
// barriers are package hostid; durable recording of ownership belongs to the
// caller's Hooks.
//
// The channel is authenticated by construction: the coordinator creates the
// socketpair with SOCK_CLOEXEC, hands one end to the supervisor as fd 3 and
// keeps the other, so no third process holds either end. One packet carries
// exactly one message of at most MaxMessageSize bytes; anything that does
// not decode strictly, carries ancillary data or was truncated is rejected.
package supervise
