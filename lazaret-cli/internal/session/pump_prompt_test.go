package session

import (
	"context"
	"crypto/rand"
	"os"
	"strings"
	"testing"
	"time"

	"lazaret.dev/pkg/ids"
	"lazaret.dev/pkg/protocol"
)

// earlyInputPrompter types on the terminal while the prompt opens, before
// it is drawn: a reply to a query with a y in it and a y and Enter. Then,
// later, it types n and Enter, as the developer.
type earlyInputPrompter struct {
	ptm   *os.File
	inner TerminalPrompter
}

func (e earlyInputPrompter) Decide(p protocol.TerminalPrompt, in *PromptInput) (protocol.DeveloperDecision, error) {
	e.ptm.Write([]byte("\x1b[?2004;2$yy\r"))
	time.Sleep(100 * time.Millisecond) // the pump reads it
	go func() {
		time.Sleep(300 * time.Millisecond)
		e.ptm.Write([]byte("n"))
		time.Sleep(50 * time.Millisecond)
		e.ptm.Write([]byte("\r"))
	}()
	return e.inner.Decide(p, in)
}

// TestPumpPromptTakesOnlyKeysAfterItIsDrawn runs a prompt through the
// pump on a pseudo-terminal: input that arrived before the prompt was
// drawn neither decides nor reaches the session, and the developer's
// later n and Enter deny.
func TestPumpPromptTakesOnlyKeysAfterItIsDrawn(t *testing.T) {
	ptm, tty := openPty(t)
	term, err := MakeRaw(int(tty.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	defer term.Restore()
	ch := newFakeChannel()
	var out syncBuffer
	key, err := protocol.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s := &Session{Binding: protocol.SessionBinding{SessionID: ch.id, CLIID: ids.CLIID{1}, SessionAnchorPublicKey: key.Public(), GenerationIdentity: protocol.GenerationIdentity{AgentProfile: "dev", DomainID: ids.DomainID{1}, GenerationID: ids.GenerationID{2}, ConfigurationFingerprint: ids.Digest{3}, CoordinatorID: ids.CoordinatorID{4}, SandboxID: ids.SandboxID{5}}}, anchor: key}
	p := &Pump{Channel: ch, In: tty, Out: &out, SizeFd: -1, Signals: make(chan os.Signal), Sign: s.Sign,
		Prompter: earlyInputPrompter{ptm: ptm, inner: TerminalPrompter{W: &out}}}
	ch.output("\x1b[?2004h$ ")
	ch.batches <- protocol.InteractiveSessionBatch{SessionID: ch.id, Messages: []protocol.InteractiveSessionMessage{{
		Kind: protocol.InteractiveMessagePrompt, Prompt: &protocol.TerminalPrompt{SessionID: ch.id, RequestID: ids.RequestID{3}, RequestSHA256: ids.Digest{4}, AgentProfile: "dev", CommandArgv: []string{"/usr/bin/true"}},
	}}}
	zero := uint8(0)
	ch.exit(protocol.ExitExited, &zero)
	if _, err := p.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(ch.decided) != 1 {
		t.Fatalf("decisions %+v", ch.decided)
	}
	var d protocol.DeveloperDecision
	if err := protocol.Decode(ch.decided[0].PayloadBytes, &d); err != nil || d.Decision != protocol.DecisionDeny {
		t.Fatalf("decision %+v, %v; output %q", d, err, out.String())
	}
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if len(ch.input) != 0 {
		t.Errorf("input meant for the prompt reached the session: %q", ch.input)
	}
	o := out.String()
	i := strings.Index(o, "show the mark ")
	if i < 0 || !strings.Contains(o, "--- mark "+o[i+len("show the mark "):i+len("show the mark ")+9]+" ---") {
		t.Errorf("the prompt does not show the mark printed at the start: %q", o)
	}
	// The sandbox had bracketed paste on: the prompt leaves it on.
	if strings.Contains(o, pasteOff) {
		t.Errorf("the prompt turned the sandbox's bracketed paste off: %q", o)
	}
}
