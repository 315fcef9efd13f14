package session

import (
	"context"
	"crypto/rand"
	"errors"
	"io"
	"os"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"lazaret.dev/pkg/ids"
	"lazaret.dev/pkg/protocol"
)

func openPty(t *testing.T) (ptm, tty *os.File) {
	t.Helper()
	ptm, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no pseudo-terminal available: %v", err)
	}
	t.Cleanup(func() { ptm.Close(); tty.Close() })
	return ptm, tty
}

func termios(t *testing.T, f *os.File) unix.Termios {
	t.Helper()
	tio, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	return *tio
}

func TestRawModeRestored(t *testing.T) {
	tests := []struct {
		name string
		run  func(term *Terminal)
	}{
		{"return", func(term *Terminal) { defer term.Restore() }},
		{"panic", func(term *Terminal) {
			defer func() { _ = recover() }()
			defer term.Restore()
			panic("boom")
		}},
		{"twice", func(term *Terminal) { term.Restore(); term.Restore() }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, tty := openPty(t)
			before := termios(t, tty)
			term, err := MakeRaw(int(tty.Fd()))
			if err != nil {
				t.Fatal(err)
			}
			raw := termios(t, tty)
			if raw.Lflag&(unix.ECHO|unix.ICANON|unix.ISIG) != 0 || raw.Oflag&unix.OPOST != 0 || raw.Iflag&unix.ICRNL != 0 {
				t.Fatalf("not raw: %+v", raw)
			}
			tt.run(term)
			if after := termios(t, tty); !reflect.DeepEqual(before, after) {
				t.Fatalf("mode not restored:\nbefore %+v\nafter  %+v", before, after)
			}
		})
	}
}

func TestMakeRawNeedsTerminal(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if IsTerminal(int(r.Fd())) {
		t.Fatal("a pipe is a terminal")
	}
	if _, err := MakeRaw(int(r.Fd())); err == nil {
		t.Fatal("MakeRaw accepted a pipe")
	}
}

// fakeChannel is a session that echoes input as output until it reads
// "exit N", then exits with N; a hang-up ends it as Terminated.
type fakeChannel struct {
	id      ids.SessionID
	batches chan protocol.InteractiveSessionBatch
	mu      sync.Mutex
	input   []byte
	resizes [][2]uint16
	hangups int
	decided []protocol.SignedProtocolRecord
}

func newFakeChannel() *fakeChannel {
	return &fakeChannel{id: ids.SessionID{7}, batches: make(chan protocol.InteractiveSessionBatch, 16)}
}

func (f *fakeChannel) output(b string) {
	f.batches <- protocol.InteractiveSessionBatch{SessionID: f.id, Messages: []protocol.InteractiveSessionMessage{{
		Kind: protocol.InteractiveMessageTerminal, Terminal: &protocol.SessionTerminalMessage{Kind: protocol.MessageOutput, Output: &protocol.TerminalOutput{SessionID: f.id, Bytes: []byte(b)}},
	}}}
}

func (f *fakeChannel) exit(outcome protocol.SessionExitOutcome, code *uint8) {
	f.batches <- protocol.InteractiveSessionBatch{SessionID: f.id, Messages: []protocol.InteractiveSessionMessage{{
		Kind: protocol.InteractiveMessageTerminal, Terminal: &protocol.SessionTerminalMessage{Kind: protocol.MessageExit, Exit: &protocol.SessionExit{SessionID: f.id, Outcome: outcome, ExitCode: code}},
	}}}
}

func (f *fakeChannel) Input(p []byte) error {
	f.mu.Lock()
	f.input = append(f.input, p...)
	in := string(f.input)
	f.mu.Unlock()
	f.output(string(p))
	if strings.Contains(in, "exit 5") {
		five := uint8(5)
		f.exit(protocol.ExitExited, &five)
	}
	return nil
}

func (f *fakeChannel) Resize(r, c, _, _ uint16) error {
	f.mu.Lock()
	f.resizes = append(f.resizes, [2]uint16{r, c})
	f.mu.Unlock()
	return nil
}

func (f *fakeChannel) Hangup() error {
	f.mu.Lock()
	f.hangups++
	f.mu.Unlock()
	f.exit(protocol.ExitTerminated, nil)
	return nil
}

func (f *fakeChannel) Decide(d protocol.SignedProtocolRecord) error {
	f.mu.Lock()
	f.decided = append(f.decided, d)
	f.mu.Unlock()
	return nil
}

func (f *fakeChannel) Recv() (protocol.InteractiveSessionBatch, error) {
	b, ok := <-f.batches
	if !ok {
		return b, io.EOF
	}
	return b, nil
}

func TestPumpTypesAndExits(t *testing.T) {
	ptm, tty := openPty(t)
	ch := newFakeChannel()
	sigs := make(chan os.Signal, 1)
	var out syncBuffer
	p := &Pump{Channel: ch, In: tty, Out: &out, SizeFd: int(tty.Fd()), Signals: sigs, Sign: func(protocol.DeveloperDecision) (protocol.SignedProtocolRecord, error) {
		return protocol.SignedProtocolRecord{}, errors.New("unused")
	}}
	term, err := MakeRaw(int(tty.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	defer term.Restore()
	if err := pty.Setsize(tty, &pty.Winsize{Rows: 40, Cols: 120}); err != nil {
		t.Fatal(err)
	}
	sigs <- syscall.SIGWINCH
	go func() {
		time.Sleep(50 * time.Millisecond)
		ptm.Write([]byte("echo \x03hi\rexit 5\r"))
	}()
	exit, err := p.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if code, _ := ExitCode(exit); code != 5 {
		t.Fatalf("exit %+v", exit)
	}
	ch.mu.Lock()
	defer ch.mu.Unlock()
	// ^C and CR reach the session untranslated.
	if !strings.Contains(string(ch.input), "echo \x03hi\rexit 5\r") {
		t.Errorf("input %q", ch.input)
	}
	if !strings.Contains(out.String(), "echo \x03hi") {
		t.Errorf("output %q", out.String())
	}
	if len(ch.resizes) == 0 || ch.resizes[0] != [2]uint16{40, 120} {
		t.Errorf("resizes %v", ch.resizes)
	}
}

func TestPumpSignalHangsUp(t *testing.T) {
	_, tty := openPty(t)
	ch := newFakeChannel()
	sigs := make(chan os.Signal, 1)
	p := &Pump{Channel: ch, In: tty, Out: io.Discard, SizeFd: -1, Signals: sigs}
	sigs <- syscall.SIGHUP
	_, err := p.Run(context.Background())
	var se *SignalError
	if !errors.As(err, &se) || se.Signal != syscall.SIGHUP {
		t.Fatalf("err = %v, want SignalError SIGHUP", err)
	}
	if ch.hangups != 1 {
		t.Fatalf("%d hang-ups", ch.hangups)
	}
}

func TestPumpDeniesPrompts(t *testing.T) {
	_, tty := openPty(t)
	ch := newFakeChannel()
	var out syncBuffer
	key, err := protocol.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s := &Session{Binding: protocol.SessionBinding{SessionID: ch.id, CLIID: ids.CLIID{1}, SessionAnchorPublicKey: key.Public(), GenerationIdentity: protocol.GenerationIdentity{AgentProfile: "dev", DomainID: ids.DomainID{1}, GenerationID: ids.GenerationID{2}, ConfigurationFingerprint: ids.Digest{3}, CoordinatorID: ids.CoordinatorID{4}, SandboxID: ids.SandboxID{5}}}, anchor: key}
	p := &Pump{Channel: ch, In: tty, Out: &out, SizeFd: -1, Signals: make(chan os.Signal), Sign: s.Sign}
	ch.batches <- protocol.InteractiveSessionBatch{SessionID: ch.id, Messages: []protocol.InteractiveSessionMessage{{
		Kind: protocol.InteractiveMessagePrompt, Prompt: &protocol.TerminalPrompt{SessionID: ch.id, RequestID: ids.RequestID{3}, RequestSHA256: ids.Digest{4}, AgentProfile: "dev", CommandArgv: []string{"/usr/bin/git", "push\x1b[2J"}},
	}}}
	zero := uint8(0)
	ch.exit(protocol.ExitExited, &zero)
	if _, err := p.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "does not show escalation prompts") || strings.Contains(out.String(), "\x1b") {
		t.Errorf("notice %q", out.String())
	}
	if len(ch.decided) != 1 || ch.decided[0].Kind != protocol.RecordDeveloperDecision {
		t.Fatalf("decisions %+v", ch.decided)
	}
	var d protocol.DeveloperDecision
	if err := protocol.Decode(ch.decided[0].PayloadBytes, &d); err != nil || d.Decision != protocol.DecisionDeny || d.RequestID != (ids.RequestID{3}) {
		t.Fatalf("decision %+v, %v", d, err)
	}
}
