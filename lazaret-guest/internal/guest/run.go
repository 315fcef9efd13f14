package guest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"lazaret.dev/pkg/ids"
	"lazaret.dev/pkg/mailbox"
	"lazaret.dev/pkg/protocol"
)

// maxBundleBytes bounds the credential bundle file.
const maxBundleBytes = 256 << 10

// The wait for the host's files. Inside gVisor a file the host writes
// into the mailbox raises no inotify event (docs/ESCALATION.md, "What is
// event-driven and what remains polling"), so the guest looks for its
// next file by exact name:
// every fastPoll for fastFor after the request and after each file it
// takes (the answer to a short command comes within that window), then
// backing off to maxPoll for a long one. Where inotify works (outside a
// sandbox), an event ends each wait early.
const (
	fastPoll = 200 * time.Microsecond
	fastFor  = 100 * time.Millisecond
	maxPoll  = 50 * time.Millisecond
)

// backoff is the guest's wait schedule.
type backoff struct {
	since time.Time     // the request, or the last file taken
	next  time.Duration // the next wait once past fastFor
}

// reset restarts the fast window at now.
func (b *backoff) reset(now time.Time) { *b = backoff{since: now, next: fastPoll} }

// wait returns how long to wait at now.
func (b *backoff) wait(now time.Time) time.Duration {
	if now.Sub(b.since) < fastFor {
		return fastPoll
	}
	d := b.next
	b.next = min(2*b.next, maxPoll)
	return d
}

// RunOptions is what Run needs.
type RunOptions struct {
	// Argv is the host argv: element 0 an absolute path.
	Argv []string
	// Justification is shown to the developer with the prompt.
	Justification string
	// BundlePath is the SandboxCredentialBundle file.
	BundlePath string
	// Capability is the EnvCapability value.
	Capability string
	// Mailbox is the mailbox root.
	Mailbox string
	// Stdout and Stderr receive the host command's output.
	Stdout, Stderr io.Writer
	// Interrupt delivers SIGINT: the first sends a cancellation and keeps
	// waiting for the host's answer, the second stops waiting.
	Interrupt <-chan os.Signal
}

// Error is a guest-side failure; it exits with ExitGuestError.
type Error struct{ Err error }

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

func guestError(format string, args ...any) error {
	return &Error{Err: fmt.Errorf(format, args...)}
}

// client is one request in flight.
type client struct {
	o        RunOptions
	bundle   protocol.SandboxCredentialBundle
	verifier *protocol.Verifier
	cap      protocol.SessionRequestCapability
	out, in  *mailbox.Dir
	id       ids.RequestID
	pending  protocol.PendingRequest
	acks     uint32
}

// LoadBundle reads and verifies the credential bundle at path.
func LoadBundle(path string) (protocol.SandboxCredentialBundle, *protocol.Verifier, error) {
	var b protocol.SandboxCredentialBundle
	f, err := os.OpenFile(path, os.O_RDONLY|syscallNoFollow, 0)
	if err != nil {
		return b, nil, guestError("opening credential bundle %q (set %s): %w", path, mailbox.EnvCredentialBundle, err)
	}
	defer f.Close()
	raw, err := io.ReadAll(io.LimitReader(f, maxBundleBytes+1))
	if err != nil {
		return b, nil, guestError("reading credential bundle %q: %w", path, err)
	}
	if len(raw) > maxBundleBytes {
		return b, nil, guestError("credential bundle %q exceeds %d bytes", path, maxBundleBytes)
	}
	if err := protocol.Decode(raw, &b); err != nil {
		return b, nil, guestError("decoding credential bundle %q: %w", path, err)
	}
	v, err := b.Verifier(b.TrustManifest.Digest())
	if err != nil {
		return b, nil, guestError("verifying credential bundle %q: %w", path, err)
	}
	return b, v, nil
}

// Run sends one request and waits for its verified result, copying the
// host command's output as it arrives. It returns the exit status for the
// process; a non-nil error is a guest-side failure (ExitGuestError).
func Run(ctx context.Context, o RunOptions) (int, error) {
	c := &client{o: o}
	var err error
	if c.bundle, c.verifier, err = LoadBundle(o.BundlePath); err != nil {
		return ExitGuestError, err
	}
	if o.Capability == "" {
		return ExitGuestError, guestError("%s is not set: run lazaret-guest inside a Lazaret session", mailbox.EnvCapability)
	}
	if c.cap, err = mailbox.DecodeCapability(o.Capability); err != nil {
		return ExitGuestError, &Error{Err: err}
	}
	coord, sandbox := c.verifier.Coordinator(), c.verifier.Sandbox()
	if err := protocol.VerifyCapability(&c.cap, &coord, &sandbox); err != nil {
		return ExitGuestError, guestError("verifying %s: %w", mailbox.EnvCapability, err)
	}
	if c.out, err = mailbox.OpenDir(o.Mailbox, mailbox.Outbox, nil); err != nil {
		return ExitGuestError, guestError("opening the mailbox (set %s): %w", mailbox.EnvMailbox, err)
	}
	defer c.out.Close()
	if c.in, err = mailbox.OpenDir(o.Mailbox, mailbox.Inbox, nil); err != nil {
		return ExitGuestError, guestError("opening the mailbox (set %s): %w", mailbox.EnvMailbox, err)
	}
	defer c.in.Close()

	c.id = ids.RequestID(ids.New())
	req := protocol.MailboxRequest{
		SessionBinding:      c.cap.SessionBinding,
		RequestID:           c.id,
		SessionCapability:   c.cap,
		SandboxCredentialID: sandbox.CredentialID,
		CommandArgv:         o.Argv,
		Justification:       o.Justification,
	}
	signed, err := protocol.Sign(c.bundle.SandboxPrivateKey, &req)
	if err != nil {
		return ExitGuestError, guestError("making the request: %w", err)
	}
	c.pending = protocol.NewPendingRequest(&signed, &req)
	if err := c.out.Write(mailbox.Name{RequestID: c.id, Kind: mailbox.KindRequest}, &signed); err != nil {
		return ExitGuestError, guestError("sending the request: %w", err)
	}
	return c.wait(ctx)
}

// wait collects chunks in sequence, acknowledges them, and ends with the
// verified result.
func (c *client) wait(ctx context.Context) (int, error) {
	collector := protocol.NewResultCollector(c.pending)
	n := c.in.Notify()
	defer n.Close()
	var poll backoff
	poll.reset(time.Now())
	cancelled := false
	unacked := false
	for {
		select {
		case <-c.o.Interrupt:
			if cancelled {
				return ExitCancelled, nil
			}
			cancelled = true
			if err := c.cancel(); err != nil {
				return ExitGuestError, err
			}
		default:
		}
		if ctx.Err() != nil {
			if !cancelled {
				c.cancel()
			}
			return ExitCancelled, nil
		}
		got, err := c.nextChunk(collector)
		if err != nil {
			return ExitGuestError, err
		}
		if got {
			unacked = true
			poll.reset(time.Now())
			continue
		}
		if unacked {
			if err := c.ack(collector); err != nil {
				return ExitGuestError, err
			}
			unacked = false
		}
		res, ok, err := c.result(collector)
		if err != nil {
			return ExitGuestError, err
		}
		if ok {
			if err := c.ack(collector); err != nil {
				return ExitGuestError, err
			}
			if msg := outcomeMessage(&res, c.o.Argv[0]); msg != "" {
				fmt.Fprintf(c.o.Stderr, "lazaret-guest: %s\n", msg)
			}
			return ExitCode(&res), nil
		}
		n.Wait(ctx, poll.wait(time.Now()))
	}
}

// nextChunk takes, verifies and prints the next chunk if it is there.
func (c *client) nextChunk(collector *protocol.ResultCollector) (bool, error) {
	name := mailbox.Name{RequestID: c.id, Kind: mailbox.KindChunk, Sequence: uint32(collector.Count())}
	e, err := c.in.Take(name)
	if errors.Is(err, mailbox.ErrMissing) {
		return false, nil
	}
	if err != nil {
		return false, guestError("receiving output: %w", err)
	}
	chunk, err := c.verifier.VerifyResultChunk(&e.Record, &c.pending)
	if err != nil {
		return false, guestError("verifying %s: %w", name, err)
	}
	if err := collector.Add(&chunk); err != nil {
		return false, guestError("verifying %s: %w", name, err)
	}
	w := c.o.Stdout
	if chunk.Stream == protocol.StreamStderr {
		w = c.o.Stderr
	}
	if _, err := w.Write(chunk.Bytes); err != nil && !errors.Is(err, os.ErrClosed) {
		return true, guestError("writing output: %w", err)
	}
	return true, nil
}

// result takes and checks the result if it is there.
func (c *client) result(collector *protocol.ResultCollector) (protocol.MailboxResult, bool, error) {
	name := mailbox.Name{RequestID: c.id, Kind: mailbox.KindResult}
	e, err := c.in.Take(name)
	if errors.Is(err, mailbox.ErrMissing) {
		return protocol.MailboxResult{}, false, nil
	}
	if err != nil {
		return protocol.MailboxResult{}, false, guestError("receiving the result: %w", err)
	}
	res, err := c.verifier.VerifyResult(&e.Record, &c.pending)
	if err != nil {
		return res, false, guestError("verifying the result: %w", err)
	}
	// The host publishes every chunk before the result: take and print
	// the ones that arrived since the last look.
	for collector.Count() < uint64(res.ChunkCount) {
		got, err := c.nextChunk(collector)
		if err != nil {
			return res, false, err
		}
		if !got {
			break
		}
	}
	if err := collector.Check(&res); err != nil {
		return res, false, guestError("verifying the result: %w", err)
	}
	return res, true, nil
}

func (c *client) ack(collector *protocol.ResultCollector) error {
	a := protocol.MailboxResultAck{
		SessionBinding:            c.cap.SessionBinding,
		RequestID:                 c.id,
		RequestSHA256:             c.pending.RequestSHA256,
		SessionCapability:         c.cap,
		SandboxCredentialID:       c.verifier.Sandbox().CredentialID,
		HighestContiguousSequence: collector.HighestContiguous(),
	}
	signed, err := protocol.Sign(c.bundle.SandboxPrivateKey, &a)
	if err != nil {
		return guestError("making an acknowledgment: %w", err)
	}
	name := mailbox.Name{RequestID: c.id, Kind: mailbox.KindAck, Sequence: c.acks}
	c.acks++
	if err := c.out.Write(name, &signed); err != nil {
		return guestError("sending an acknowledgment: %w", err)
	}
	return nil
}

func (c *client) cancel() error {
	m := protocol.MailboxCancellation{
		SessionBinding:      c.cap.SessionBinding,
		RequestID:           c.id,
		SessionCapability:   c.cap,
		SandboxCredentialID: c.verifier.Sandbox().CredentialID,
	}
	signed, err := protocol.Sign(c.bundle.SandboxPrivateKey, &m)
	if err != nil {
		return guestError("making a cancellation: %w", err)
	}
	if err := c.out.Write(mailbox.Name{RequestID: c.id, Kind: mailbox.KindCancellation}, &signed); err != nil {
		return guestError("sending a cancellation: %w", err)
	}
	return nil
}
