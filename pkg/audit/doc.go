// Package audit is the append-only escalation audit log of a Domain: one
// line per transition of every host escalation request (the events of
// escalation.Config.OnEvent), saying what was asked, who or which rule
// decided, how it ended and with which exit code.
//
// What belongs here: the record and its line format, the file's place next
// to the Domain Store (Path), the hash chain that makes edits evident, the
// Writer the Host Coordinator appends with, and the strict Reader. What does
// not: deciding or running anything (package escalation), and showing the
// log (lazaret-cli log).
//
// # Format
//
// The file <storage root>/domains/<domain id>.audit holds one JSON object
// per line, each line ending in "\n", in this field order:
//
//	time           RFC 3339 in UTC with exactly nine fractional digits
//	generation     generation ID, 32 lowercase hex digits
//	session        session ID, 32 lowercase hex digits
//	request        request ID, 32 lowercase hex digits
//	phase          the request's phase (escalation.Phase: a model phase, or Refused)
//	session_phase  the session's phase after the transition: Attached, Prompting, HostExecuting
//	source         who approved: AutoRule, Developer, or none (yet)
//	rule           index of the admitting rule; present exactly when source is AutoRule
//	argv           the requested argv until approval, then the approved argv
//	outcome        Completed, Denied, TimedOut, Cancelled or Failed; present exactly
//	               from the pending phases on (and for Refused, which is Failed)
//	exit_code      0-255; present exactly when outcome is Completed
//	reason         why, when the transition has a reason (a refusal, failure,
//	               timeout, a prompt, a delivery without acknowledgment)
//	prev           64 lowercase hex digits: SHA-256 of the previous line's bytes
//	               without its newline; 64 zeros on the first line
//
// A line is the canonical encoding of its record (encoding/json, HTML
// characters not escaped, absent optional fields omitted): the reader
// decodes each line, rejects unknown and missing fields, checks every rule
// above, re-encodes the record and requires the same bytes. The outcome of
// a phase is fixed by the model (CompletionPending and Completed are
// Completed; Refused, FailurePending and Failed are Failed; and so on).
//
// # Chain
//
// Every record names the SHA-256 of the line before it, so an edited,
// removed or inserted line breaks the chain at the next line, and a final
// line without its newline (a write cut short) is reported, not dropped.
// The reader returns the records before the first bad line and an error
// naming the file and that line. The chain makes accidental damage and
// careless edits evident; it cannot stop someone with write access from
// rewriting the whole file with a fresh chain, and nothing after the last
// line vouches for it.
//
// # Files and locking
//
// The Writer opens the file O_WRONLY|O_APPEND|O_CREAT|O_NOFOLLOW|O_CLOEXEC
// (with O_NOCTTY, and O_NONBLOCK so that a FIFO in its place cannot block
// the open), mode 0600, and refuses anything but a regular file owned by the effective user
// and not writable by group or others. It verifies the existing chain before
// the first append and refuses a broken one; it never rewrites or truncates
// the file. Each record is one write(2), made at once so that it survives
// the death of the coordinator; Commit makes every record written so far
// durable with one fsync(2), and Append is a Write and a Commit. The
// escalation engine marks the transitions that must be durable before it
// acts on them (escalation.Event.Durable), so a request costs an fsync per
// durable point, not per record. A failed or short write or a failed fsync
// stops the Writer for good, since the chain after it could not be
// trusted.
//
// Open file description locks (F_OFD_SETLK) keep processes apart: a Writer
// holds a write lock on one byte far past any real offset for its whole
// life, so a second Writer on the same file is refused (ErrInUse), and it
// write-locks the data range around each append while Read read-locks it,
// so a reader never sees half a line that is still being written.
package audit
