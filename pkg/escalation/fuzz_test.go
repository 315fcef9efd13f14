package escalation_test

import (
	"context"
	"testing"
	"time"

	"lazaret.dev/pkg/escalation"
	"lazaret.dev/pkg/escalation/escalationtest"
	"lazaret.dev/pkg/ids"
	"lazaret.dev/pkg/mailbox"
	"lazaret.dev/pkg/protocol"
)

// FuzzHandle feeds arbitrary outbox files to the engine's record intake.
// It must never panic, and no request other than the seeded, correctly
// signed one may ever become active: nothing forged gets past
// verification.
func FuzzHandle(f *testing.F) {
	fx := escalationtest.New(f)
	denier := promptFunc(func(_ context.Context, p protocol.TerminalPrompt) (protocol.SignedProtocolRecord, error) {
		return fx.Decision(p, nil)
	})
	e, err := escalation.New(escalation.Config{
		Verifier: fx.Verifier, CoordinatorKey: fx.CoordinatorKey, Sessions: fx.Sessions, Prompter: denier,
		Outbox: fx.Outbox, Inbox: fx.Inbox, Workspace: f.TempDir(),
		Timeouts: escalation.Timeouts{Ack: 10 * time.Millisecond},
	})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(e.Close)
	signed, req := fx.Request(f, "/usr/bin/true")
	seed, _ := protocol.Encode(&signed)
	f.Add(uint8(mailbox.KindRequest), seed)
	cancel := protocol.MailboxCancellation{SessionBinding: fx.Binding, RequestID: req.RequestID, SessionCapability: fx.Capability, SandboxCredentialID: fx.Sandbox.CredentialID}
	sc, _ := protocol.Sign(fx.SandboxKey, &cancel)
	cb, _ := protocol.Encode(&sc)
	f.Add(uint8(mailbox.KindCancellation), cb)
	f.Add(uint8(mailbox.KindAck), []byte{0x02, 0x01, 0x00})
	f.Fuzz(func(t *testing.T, kind uint8, raw []byte) {
		n := mailbox.Name{RequestID: req.RequestID, Kind: mailbox.Kind(kind%5 + 1)}
		rec, err := mailbox.ParseRecord(n, raw)
		if err != nil {
			return
		}
		e.Handle(mailbox.Entry{Name: n, Raw: raw, Record: rec})
		if id, _, ok := e.Active(fx.Binding.SessionID); ok && id != req.RequestID {
			t.Fatalf("request %v became active without a valid signature", id)
		}
		var zero ids.SessionID
		if _, _, ok := e.Active(zero); ok {
			t.Fatal("a request of the zero session became active")
		}
	})
}

type promptFunc func(context.Context, protocol.TerminalPrompt) (protocol.SignedProtocolRecord, error)

func (p promptFunc) Prompt(ctx context.Context, tp protocol.TerminalPrompt) (protocol.SignedProtocolRecord, error) {
	return p(ctx, tp)
}
