// Package seqpacket carries messages over connected AF_UNIX SOCK_SEQPACKET
// sockets: one packet is one message, optionally with descriptors passed
// as SCM_RIGHTS.
//
// Every transport of the project (the State Anchor's, the Runtime
// Supervisor's, the workspace view's and the network sidecar's control
// channels, and the descriptor fusermount3 hands back) receives through
// the one policy here:
//
//   - a message larger than the caller's buffer is ErrTruncated, naming
//     its size, and is never returned in part;
//   - a message with more descriptors than the caller accepts is
//     ErrControlTruncated, and every descriptor that did arrive is closed;
//   - an interrupted call is retried (package sys);
//   - a closed peer is io.EOF.
//
// A rejected message is consumed whole, so the next Recv sees the next
// message.
//
// What belongs here: socketpair creation, the send and receive of one
// message, the socket type check, and Conn, which adds deadlines through
// the runtime poller. What does not: message encodings, which each
// transport keeps in its own package on top of this one.
package seqpacket
