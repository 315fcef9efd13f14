// Package anchor is the Host Coordinator's side of the State Anchor
// (lazaret-anchor): the messages of the control channel between them, the
// choice of the user-namespace ID map, the checks on the overlay
// directories, and the client that starts an anchor, reads its identities,
// releases it, and starts commands inside its namespaces.
//
// The anchor process itself lives in lazaret-anchor/internal; this package
// holds only what both sides share (the wire format) and what the Host
// Coordinator runs.
//
// Control channel. The anchor inherits one end of an AF_UNIX SOCK_SEQPACKET
// socketpair as descriptor 3. Every datagram is exactly one Message in the
// strict Postcard encoding (see Encode and Decode): a variant index, then the
// variant's fields in declared order. The exchange is
//
//	HC -> anchor  IDMapWritten   only when the map was written by newuidmap
//	HC -> anchor  Setup          paths and their expected device and inode
//	anchor -> HC  Ready          daemon, namespace and overlay identities
//	HC -> anchor  Release
//	anchor -> HC  Released       StateAnchorReleaseEvidence
//
// and the anchor answers any failure with Failure (the step, the path, the
// errno) and exits. When the channel closes without Release the anchor
// unmounts and exits: an anchor never outlives its coordinator's channel.
//
// Namespaces. The anchor is created by clone(2) with CLONE_NEWUSER and
// CLONE_NEWNS, so it is the first process of a fresh user namespace and owns
// a private mount namespace; the overlay exists only there, and the kernel
// takes it down with the namespace when the last process in it exits, even
// after SIGKILL.
package anchor
