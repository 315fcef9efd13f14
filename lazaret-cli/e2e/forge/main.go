//go:build e2e

// Command forge plays a compromised agent inside a Lazaret sandbox: with
// the session's own credential bundle, capability and mailbox (the
// environment lazaret-guest uses), it writes records the coordinator must
// discard, and one valid request it then replays. For each record it
// prints "sent CASE REQUEST-ID". The end-to-end suite copies it into a
// workspace and runs it in an interactive session.
package main

import (
	"crypto/rand"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"lazaret.dev/pkg/cmdmain"
	"lazaret.dev/pkg/ids"
	"lazaret.dev/pkg/mailbox"
	"lazaret.dev/pkg/protocol"
)

func main() { cmdmain.Main("forge", run) }

func run() error {
	raw, err := os.ReadFile(envOr(mailbox.EnvCredentialBundle, mailbox.DefaultCredentialBundle))
	if err != nil {
		return fmt.Errorf("reading the credential bundle: %w", err)
	}
	var bundle protocol.SandboxCredentialBundle
	if err := protocol.Decode(raw, &bundle); err != nil {
		return fmt.Errorf("decoding the credential bundle: %w", err)
	}
	v, err := bundle.Verifier(bundle.TrustManifest.Digest())
	if err != nil {
		return err
	}
	capability, err := mailbox.DecodeCapability(os.Getenv(mailbox.EnvCapability))
	if err != nil {
		return err
	}
	root := envOr(mailbox.EnvMailbox, mailbox.SandboxPath)
	out, err := mailbox.OpenDir(root, mailbox.Outbox, nil)
	if err != nil {
		return err
	}
	defer out.Close()
	in, err := mailbox.OpenDir(root, mailbox.Inbox, nil)
	if err != nil {
		return err
	}
	defer in.Close()

	request := func(edit func(*protocol.MailboxRequest)) protocol.MailboxRequest {
		r := protocol.MailboxRequest{
			SessionBinding: capability.SessionBinding, RequestID: ids.RequestID(ids.New()),
			SessionCapability: capability, SandboxCredentialID: v.Sandbox().CredentialID,
			CommandArgv: []string{"/usr/bin/echo", "approved"},
		}
		if edit != nil {
			edit(&r)
		}
		return r
	}
	send := func(name string, r protocol.MailboxRequest, signed protocol.SignedProtocolRecord) error {
		if err := out.Write(mailbox.Name{RequestID: r.RequestID, Kind: mailbox.KindRequest}, &signed); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		fmt.Printf("sent %s %s\n", name, r.RequestID)
		return nil
	}
	sign := func(key protocol.PrivateKey, r *protocol.MailboxRequest) protocol.SignedProtocolRecord {
		s, err := protocol.Sign(key, r)
		if err != nil {
			panic(err)
		}
		return s
	}

	// Signed by a key that is not the sandbox credential.
	stranger, err := protocol.GenerateKey(rand.Reader)
	if err != nil {
		return err
	}
	r := request(nil)
	if err := send("forged", r, sign(stranger, &r)); err != nil {
		return err
	}
	// Validly signed, then one payload byte changed.
	r = request(nil)
	s := sign(bundle.SandboxPrivateKey, &r)
	s.PayloadBytes = append([]byte(nil), s.PayloadBytes...)
	s.PayloadBytes[len(s.PayloadBytes)-1] ^= 0x01
	if err := send("tampered", r, s); err != nil {
		return err
	}
	// Validly signed for a session this capability does not name.
	r = request(func(r *protocol.MailboxRequest) { r.SessionBinding.SessionID = ids.SessionID(ids.New()) })
	if err := send("wrong-session", r, sign(bundle.SandboxPrivateKey, &r)); err != nil {
		return err
	}
	// Validly signed for another generation of the Domain.
	r = request(func(r *protocol.MailboxRequest) {
		r.SessionBinding.GenerationIdentity.GenerationID = ids.GenerationID(ids.New())
	})
	if err := send("wrong-generation", r, sign(bundle.SandboxPrivateKey, &r)); err != nil {
		return err
	}
	// A valid request, auto-approved; once its result is in the inbox,
	// the same record again.
	r = request(nil)
	s = sign(bundle.SandboxPrivateKey, &r)
	if err := send("valid", r, s); err != nil {
		return err
	}
	if err := waitResult(in, r.RequestID); err != nil {
		return err
	}
	return send("replayed", r, s)
}

// waitResult polls the inbox (the host's writes raise no inotify events
// inside gVisor) until the result of id is there, and leaves it.
func waitResult(in *mailbox.Dir, id ids.RequestID) error {
	deadline := time.Now().Add(60 * time.Second)
	prefix := id.String() + "." + mailbox.KindResult.String() + "."
	for time.Now().Before(deadline) {
		d, err := os.Open(in.Path())
		if err != nil {
			return err
		}
		names, err := d.Readdirnames(-1)
		d.Close()
		if err != nil && err != io.EOF {
			return err
		}
		for _, n := range names {
			if strings.HasPrefix(n, prefix) {
				return nil
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("no result for %s in %s within 60 s", id, in.Path())
}

// envOr is the variable's value, or def where it is unset or empty, as
// lazaret-guest reads it.
func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
