// Package escalationtest builds a complete generation of protocol material
// (keys, manifest, credentials, a registered session and its capability)
// over a real mailbox directory, and plays the guest's side of a request,
// for the tests of pkg/escalation and lazaret-guest.
package escalationtest

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"lazaret.dev/pkg/ids"
	"lazaret.dev/pkg/mailbox"
	"lazaret.dev/pkg/protocol"
)

// Fixture is one generation with one registered session.
type Fixture struct {
	Root           string // mailbox root
	Outbox, Inbox  *mailbox.Dir
	Generation     protocol.GenerationIdentity
	Manifest       protocol.TrustManifest
	CoordinatorKey protocol.PrivateKey
	SandboxKey     protocol.PrivateKey
	AnchorKey      protocol.PrivateKey
	Coordinator    protocol.ProtocolCredential
	Sandbox        protocol.ProtocolCredential
	Binding        protocol.SessionBinding
	Capability     protocol.SessionRequestCapability
	Verifier       *protocol.Verifier
	Bundle         protocol.SandboxCredentialBundle
	BundlePath     string
	CapabilityEnv  string

	cleanup   func(func())
	watchOnce sync.Once
	watch     *inboxWatch
}

// inboxWatch is the fixture's one inbox watcher: a goroutine that waits
// on one inotify instance for the fixture's life and wakes every waiting
// guest side when the inbox changes (and at least every pollEvery, for
// file systems without inotify). One instance per fixture, not one per
// request: creating and closing an inotify instance costs several
// milliseconds, which a benchmark would otherwise count as the engine's.
type inboxWatch struct {
	mu sync.Mutex
	ch chan struct{} // closed and replaced at every wake
}

// pollEvery bounds a guest side's wait when no inotify event arrives.
const pollEvery = 20 * time.Millisecond

// changed returns a channel that is closed at the next wake. Take it
// before looking at the inbox, so that no change between the look and
// the wait is missed.
func (w *inboxWatch) changed() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ch
}

func (w *inboxWatch) wake() {
	w.mu.Lock()
	close(w.ch)
	w.ch = make(chan struct{})
	w.mu.Unlock()
}

// inboxWatcher starts the fixture's watcher on first use; t's cleanup
// stops it.
func (f *Fixture) inboxWatcher() *inboxWatch {
	f.watchOnce.Do(func() {
		w := &inboxWatch{ch: make(chan struct{})}
		n := f.Inbox.Notify()
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			for n.Wait(ctx, pollEvery) == nil {
				w.wake()
			}
		}()
		f.cleanup(func() {
			cancel()
			<-done
			n.Close()
		})
		f.watch = w
	})
	return f.watch
}

// WaitInbox waits until the inbox may have changed since changed was
// taken from InboxChanged, or ctx ends.
func (f *Fixture) WaitInbox(ctx context.Context, changed <-chan struct{}) error {
	select {
	case <-changed:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// InboxChanged returns a channel the fixture's inbox watcher closes at
// its next wake; take it before looking at the inbox.
func (f *Fixture) InboxChanged() <-chan struct{} { return f.inboxWatcher().changed() }

func key(t testing.TB) protocol.PrivateKey {
	t.Helper()
	k, err := protocol.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// New builds a fixture with fresh keys and IDs and a mailbox in a
// temporary directory.
func New(t testing.TB) *Fixture {
	t.Helper()
	f := &Fixture{
		cleanup: t.Cleanup,
		Generation: protocol.GenerationIdentity{
			AgentProfile:             "claude",
			DomainID:                 ids.DomainID(sha(ids.New())),
			GenerationID:             ids.GenerationID(ids.New()),
			ConfigurationFingerprint: ids.Digest(sha(ids.New())),
			CoordinatorID:            ids.CoordinatorID(ids.New()),
			SandboxID:                ids.SandboxID(ids.New()),
		},
		CoordinatorKey: key(t),
		SandboxKey:     key(t),
		AnchorKey:      key(t),
	}
	issuer := key(t)
	var err error
	if f.Manifest, err = protocol.NewTrustManifest(f.Generation, []byte{0x30, 0x03, 0x02, 0x01, 0x01}, issuer); err != nil {
		t.Fatal(err)
	}
	if f.Coordinator, err = protocol.IssueProtocolCredential(issuer, f.Generation, protocol.RoleSessionCoordinator, f.CoordinatorKey.Public()); err != nil {
		t.Fatal(err)
	}
	if f.Bundle, err = protocol.NewSandboxCredentialBundle(issuer, f.Manifest, f.Coordinator, f.SandboxKey); err != nil {
		t.Fatal(err)
	}
	f.Sandbox = f.Bundle.SandboxProtocolCredential
	if f.Verifier, err = protocol.NewVerifier(f.Manifest, f.Manifest.Digest(), f.Coordinator, f.Sandbox); err != nil {
		t.Fatal(err)
	}
	f.Binding = f.NewBinding(f.AnchorKey)
	if f.Capability, err = f.IssueCapability(f.Binding); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	f.Root = filepath.Join(dir, "mailbox")
	if err := mailbox.Create(f.Root, 0o755); err != nil {
		t.Fatal(err)
	}
	if f.Outbox, err = mailbox.OpenDir(f.Root, mailbox.Outbox, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Outbox.Close() })
	if f.Inbox, err = mailbox.OpenDir(f.Root, mailbox.Inbox, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Inbox.Close() })
	b, err := protocol.Encode(&f.Bundle)
	if err != nil {
		t.Fatal(err)
	}
	f.BundlePath = filepath.Join(dir, "credentials")
	if err := os.WriteFile(f.BundlePath, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if f.CapabilityEnv, err = mailbox.EncodeCapability(&f.Capability); err != nil {
		t.Fatal(err)
	}
	return f
}

func sha(id ids.ID) [32]byte {
	var d [32]byte
	copy(d[:], id[:])
	copy(d[16:], id[:])
	return d
}

// NewBinding is a binding of a fresh session of the fixture's generation.
func (f *Fixture) NewBinding(anchor protocol.PrivateKey) protocol.SessionBinding {
	return protocol.SessionBinding{
		GenerationIdentity:     f.Generation,
		CLIID:                  ids.CLIID(ids.New()),
		SessionID:              ids.SessionID(ids.New()),
		SessionAnchorPublicKey: anchor.Public(),
	}
}

// IssueCapability issues a capability for binding.
func (f *Fixture) IssueCapability(b protocol.SessionBinding) (protocol.SessionRequestCapability, error) {
	return protocol.IssueSessionCapability(f.CoordinatorKey, &f.Coordinator, &f.Sandbox, b)
}

// Sessions is the registry: only the fixture's session is registered.
func (f *Fixture) Sessions(id ids.SessionID) (protocol.SessionBinding, bool) {
	if id == f.Binding.SessionID {
		return f.Binding, true
	}
	return protocol.SessionBinding{}, false
}

// Request builds and signs a request of the fixture's session.
func (f *Fixture) Request(t testing.TB, argv ...string) (protocol.SignedProtocolRecord, protocol.MailboxRequest) {
	t.Helper()
	return f.RequestWithID(t, ids.RequestID(ids.New()), argv...)
}

// RequestWithID is Request with the request ID chosen by the caller.
func (f *Fixture) RequestWithID(t testing.TB, id ids.RequestID, argv ...string) (protocol.SignedProtocolRecord, protocol.MailboxRequest) {
	t.Helper()
	req := protocol.MailboxRequest{
		SessionBinding:      f.Binding,
		RequestID:           id,
		SessionCapability:   f.Capability,
		SandboxCredentialID: f.Sandbox.CredentialID,
		CommandArgv:         argv,
		Justification:       "test",
	}
	signed, err := protocol.Sign(f.SandboxKey, &req)
	if err != nil {
		t.Fatal(err)
	}
	return signed, req
}

// Decision signs a developer decision for a prompt with the anchor key.
// approved is nil for a denial.
func (f *Fixture) Decision(p protocol.TerminalPrompt, approved []string) (protocol.SignedProtocolRecord, error) {
	d := protocol.DeveloperDecision{
		SessionBinding:      f.Binding,
		RequestID:           p.RequestID,
		RequestSHA256:       p.RequestSHA256,
		Decision:            protocol.DecisionApprove,
		ApprovedCommandArgv: approved,
	}
	if approved == nil {
		d.Decision = protocol.DecisionDeny
	}
	return protocol.Sign(f.AnchorKey, &d)
}

// Result is what the guest side received.
type Result struct {
	Result         protocol.MailboxResult
	Stdout, Stderr []byte
	Chunks         int
}

// Guest plays the guest's side of one request already written to the
// outbox: it takes the request's chunks in sequence from the inbox,
// verifies them, acknowledges each batch, and returns at the verified
// result. cancelAfter, if positive, sends a cancellation after that delay.
type Guest struct {
	F         *Fixture
	Signed    protocol.SignedProtocolRecord
	Request   protocol.MailboxRequest
	OnChunk   func(protocol.MailboxResultChunk)
	acks      uint32
	collector *protocol.ResultCollector
}

// Send writes the request to the outbox.
func (g *Guest) Send() error {
	return g.F.Outbox.Write(mailbox.Name{RequestID: g.Request.RequestID, Kind: mailbox.KindRequest}, &g.Signed)
}

// Cancel writes a cancellation.
func (g *Guest) Cancel() error {
	c := protocol.MailboxCancellation{
		SessionBinding: g.Request.SessionBinding, RequestID: g.Request.RequestID,
		SessionCapability: g.Request.SessionCapability, SandboxCredentialID: g.Request.SandboxCredentialID,
	}
	signed, err := protocol.Sign(g.F.SandboxKey, &c)
	if err != nil {
		return err
	}
	return g.F.Outbox.Write(mailbox.Name{RequestID: g.Request.RequestID, Kind: mailbox.KindCancellation}, &signed)
}

func (g *Guest) ack() error {
	pending := protocol.NewPendingRequest(&g.Signed, &g.Request)
	a := protocol.MailboxResultAck{
		SessionBinding: g.Request.SessionBinding, RequestID: g.Request.RequestID,
		RequestSHA256: pending.RequestSHA256, SessionCapability: g.Request.SessionCapability,
		SandboxCredentialID: g.Request.SandboxCredentialID, HighestContiguousSequence: g.collector.HighestContiguous(),
	}
	signed, err := protocol.Sign(g.F.SandboxKey, &a)
	if err != nil {
		return err
	}
	n := mailbox.Name{RequestID: g.Request.RequestID, Kind: mailbox.KindAck, Sequence: g.acks}
	g.acks++
	return g.F.Outbox.Write(n, &signed)
}

// Wait collects the result.
func (g *Guest) Wait(ctx context.Context) (Result, error) {
	pending := protocol.NewPendingRequest(&g.Signed, &g.Request)
	g.collector = protocol.NewResultCollector(pending)
	var out Result
	// takeChunks takes chunks in sequence while they are there.
	takeChunks := func() (bool, error) {
		progressed := false
		for {
			name := mailbox.Name{RequestID: g.Request.RequestID, Kind: mailbox.KindChunk, Sequence: uint32(g.collector.Count())}
			e, err := g.F.Inbox.Take(name)
			if errors.Is(err, mailbox.ErrMissing) {
				return progressed, nil
			}
			if err != nil {
				return progressed, err
			}
			c, err := g.F.Verifier.VerifyResultChunk(&e.Record, &pending)
			if err != nil {
				return progressed, err
			}
			if err := g.collector.Add(&c); err != nil {
				return progressed, err
			}
			if g.OnChunk != nil {
				g.OnChunk(c)
			}
			if c.Stream == protocol.StreamStdout {
				out.Stdout = append(out.Stdout, c.Bytes...)
			} else {
				out.Stderr = append(out.Stderr, c.Bytes...)
			}
			out.Chunks++
			progressed = true
		}
	}
	for {
		changed := g.F.InboxChanged()
		progressed, err := takeChunks()
		if err != nil {
			return out, err
		}
		if progressed {
			if err := g.ack(); err != nil {
				return out, err
			}
		}
		e, err := g.F.Inbox.Take(mailbox.Name{RequestID: g.Request.RequestID, Kind: mailbox.KindResult})
		if err == nil {
			res, err := g.F.Verifier.VerifyResult(&e.Record, &pending)
			if err != nil {
				return out, err
			}
			// Every chunk was published before the result: take the ones
			// that arrived since the last look.
			if _, err := takeChunks(); err != nil {
				return out, err
			}
			if err := g.collector.Check(&res); err != nil {
				return out, err
			}
			out.Result = res
			return out, g.ack()
		}
		if !errors.Is(err, mailbox.ErrMissing) {
			return out, err
		}
		if err := g.F.WaitInbox(ctx, changed); err != nil {
			return out, fmt.Errorf("waiting for the result of %v: %w", g.Request.RequestID, err)
		}
	}
}

// Executable writes a shell script into dir (mode 0755) and returns its
// canonical path. The script runs /bin/sh with body.
func Executable(t testing.TB, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, 0o755); err != nil {
		t.Fatal(err)
	}
	c, err := filepath.EvalSymlinks(p)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
