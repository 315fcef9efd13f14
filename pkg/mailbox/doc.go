// Package mailbox is the file protocol between the Agent Sandbox and the Host
// Coordinator: a directory shared into the sandbox at /run/lazaret/mailbox
// with two subdirectories.
//
//   - outbox/ carries sandbox-signed records from the guest to the host:
//     requests, cancellations and result acknowledgments.
//   - inbox/ carries coordinator-signed records from the host to the guest:
//     result chunks and results.
//
// Each file holds exactly one encoded protocol.SignedProtocolRecord and is
// named
//
//	<request ID, 32 lowercase hex digits>.<kind>.<sequence, 8 lowercase hex digits>
//
// where kind is request, cancellation, ack, chunk or result (see Kind). A
// writer creates the record under a temporary name beginning with ".tmp."
// and renames it into place without replacing anything, so a reader sees
// either no file or the complete record. A reader opens entries relative to
// a retained directory descriptor with O_NOFOLLOW, accepts only regular
// files of at most MaxFileBytes, reads them, and removes them. The outbox
// is bounded (MaxEntries, MaxBytes: a write past them is refused with
// ErrFull), and its reader removes every entry that is not a mailbox file
// once, whatever it is (bounds.go). One pass of the outbox (Drain) hands
// acknowledgments on before requests and requests before cancellations,
// the order in which one guest after another sends them.
//
// What belongs here: names, the directory descriptors, bounded reads and
// atomic writes, and the watcher that notices new files (inotify with a
// periodic rescan). What does not: signature verification and every
// decision about a record's meaning; this package hands raw bytes, and the
// undecoded envelope, to the caller, which verifies before it decodes the
// payload. The package is used by the host and by lazaret-guest alike, so
// it depends only on pkg/protocol, pkg/ids and golang.org/x/sys/unix.
package mailbox
