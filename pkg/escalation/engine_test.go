package escalation_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"lazaret.dev/pkg/config"
	"lazaret.dev/pkg/escalation"
	"lazaret.dev/pkg/escalation/escalationtest"
	"lazaret.dev/pkg/ids"
	"lazaret.dev/pkg/mailbox"
	"lazaret.dev/pkg/protocol"
)

// fakePrompter answers prompts with decide.
type fakePrompter struct {
	calls   atomic.Int32
	mu      sync.Mutex
	prompts []protocol.TerminalPrompt
	decide  func(ctx context.Context, p protocol.TerminalPrompt) (protocol.SignedProtocolRecord, error)
}

func (p *fakePrompter) Prompt(ctx context.Context, tp protocol.TerminalPrompt) (protocol.SignedProtocolRecord, error) {
	p.calls.Add(1)
	p.mu.Lock()
	p.prompts = append(p.prompts, tp)
	p.mu.Unlock()
	return p.decide(ctx, tp)
}

type discard struct {
	name   mailbox.Name
	reason error
}

type harness struct {
	f        *escalationtest.Fixture
	e        *escalation.Engine
	prompter *fakePrompter
	bin      string // directory of test executables
	work     string // the host workspace

	mu     sync.Mutex
	events []escalation.Event
	output []byte

	discards chan discard
}

func newHarness(t testing.TB, rules func(bin string) []config.AutoApprovalRule, adjust func(*escalation.Config)) *harness {
	t.Helper()
	h := &harness{
		f:        escalationtest.New(t),
		prompter: &fakePrompter{},
		bin:      t.TempDir(),
		work:     t.TempDir(),
		discards: make(chan discard, 64),
	}
	h.prompter.decide = func(ctx context.Context, p protocol.TerminalPrompt) (protocol.SignedProtocolRecord, error) {
		return h.f.Decision(p, nil)
	}
	cfg := escalation.Config{
		Verifier:       h.f.Verifier,
		CoordinatorKey: h.f.CoordinatorKey,
		Sessions:       h.f.Sessions,
		Prompter:       h.prompter,
		Outbox:         h.f.Outbox,
		Inbox:          h.f.Inbox,
		Workspace:      h.work,
		UID:            os.Getuid(),
		Timeouts:       escalation.Timeouts{Approval: 10 * time.Second, Execution: 20 * time.Second, Ack: 5 * time.Second},
		Rescan:         50 * time.Millisecond,
		OnEvent: func(ev escalation.Event) {
			h.mu.Lock()
			h.events = append(h.events, ev)
			h.mu.Unlock()
		},
		OnOutput: func(_ ids.SessionID, _ ids.RequestID, _ protocol.ResultStream, b []byte) {
			h.mu.Lock()
			h.output = append(h.output, b...)
			h.mu.Unlock()
		},
		OnDiscard: func(n mailbox.Name, reason error) { h.discards <- discard{n, reason} },
	}
	if rules != nil {
		cfg.Rules = rules(h.bin)
	}
	if adjust != nil {
		adjust(&cfg)
	}
	e, err := escalation.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.e = e
	t.Cleanup(func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		checkModel(t, h.events)
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		e.Serve(ctx)
		close(done)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		e.Close()
	})
	return h
}

// exe writes a test executable into the harness's bin directory.
func (h *harness) exe(t *testing.T, name, body string) string {
	return escalationtest.Executable(t, h.bin, name, body)
}

func (h *harness) guest(t testing.TB, argv ...string) *escalationtest.Guest {
	t.Helper()
	signed, req := h.f.Request(t, argv...)
	return &escalationtest.Guest{F: h.f, Signed: signed, Request: req}
}

// run sends a request and waits for its verified result.
func (h *harness) run(t testing.TB, argv ...string) escalationtest.Result {
	t.Helper()
	g := h.guest(t, argv...)
	if err := g.Send(); err != nil {
		t.Fatal(err)
	}
	return wait(t, g)
}

func wait(t testing.TB, g *escalationtest.Guest) escalationtest.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := g.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// eventsOf returns the events of one request so far.
func (h *harness) eventsOf(id ids.RequestID) []escalation.Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []escalation.Event
	for _, ev := range h.events {
		if ev.Request == id {
			out = append(out, ev)
		}
	}
	return out
}

// waitPhase waits until the request reached phase and returns that event.
func (h *harness) waitPhase(t testing.TB, id ids.RequestID, phase escalation.Phase) escalation.Event {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		for _, ev := range h.eventsOf(id) {
			if ev.Phase == phase {
				return ev
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("request %x never reached %s; events %+v", id, phase, h.eventsOf(id))
	return escalation.Event{}
}

func (h *harness) waitDiscard(t *testing.T) discard {
	t.Helper()
	select {
	case d := <-h.discards:
		return d
	case <-time.After(10 * time.Second):
		t.Fatal("no record was discarded")
	}
	return discard{}
}

func outcome(t *testing.T, res escalationtest.Result, want protocol.EscalationOutcome, code int) {
	t.Helper()
	if res.Result.Outcome != want {
		t.Fatalf("outcome %v, want %v (stderr %q)", res.Result.Outcome, want, res.Stderr)
	}
	if code >= 0 && (res.Result.ExitCode == nil || int(*res.Result.ExitCode) != code) {
		t.Fatalf("exit code %v, want %d", res.Result.ExitCode, code)
	}
}

func TestAutoApproveExactMatch(t *testing.T) {
	t.Setenv("LAZARET_TEST_SECRET", "must-not-leak")
	var exe string
	h := newHarness(t, func(bin string) []config.AutoApprovalRule {
		exe = escalationtest.Executable(t, bin, "tool", `echo "out:$1"; pwd; env | sort; echo err >&2; exit 3`)
		return []config.AutoApprovalRule{{CanonicalExecutable: exe, Args: []string{"a"}}}
	}, nil)
	g := h.guest(t, exe, "a")
	if err := g.Send(); err != nil {
		t.Fatal(err)
	}
	res := wait(t, g)
	outcome(t, res, protocol.OutcomeCompleted, 3)
	if n := h.prompter.calls.Load(); n != 0 {
		t.Errorf("prompter called %d times for an auto-approved command", n)
	}
	lines := strings.Split(string(res.Stdout), "\n")
	if lines[0] != "out:a" || lines[1] != h.work {
		t.Errorf("stdout starts %q, want out:a and the workspace %q", lines[:2], h.work)
	}
	if !bytes.Contains(res.Stdout, []byte("\nPATH=/usr/bin:/bin\n")) || bytes.Contains(res.Stdout, []byte("LAZARET_TEST_SECRET")) {
		t.Errorf("host environment is not scrubbed:\n%s", res.Stdout)
	}
	if string(res.Stderr) != "err\n" {
		t.Errorf("stderr %q, want %q", res.Stderr, "err\n")
	}
	ev := h.waitPhase(t, g.Request.RequestID, escalation.PhaseCompleted)
	if ev.Source != escalation.SourceAutoRule || ev.Rule != 0 {
		t.Errorf("completed event %+v, want source AutoRule rule 0", ev)
	}
	h.waitPhase(t, g.Request.RequestID, escalation.PhaseExecuting)
	if _, _, active := h.e.Active(h.f.Binding.SessionID); active {
		t.Error("session still has an active request after delivery")
	}
	h.mu.Lock()
	shown := len(h.output)
	h.mu.Unlock()
	if shown != len(res.Stdout)+len(res.Stderr) {
		t.Errorf("OnOutput saw %d bytes, the guest %d", shown, len(res.Stdout)+len(res.Stderr))
	}
}

func TestExtraArgs(t *testing.T) {
	tests := []struct {
		name   string
		extra  bool
		argv   []string
		auto   bool
		output string
	}{
		{"exact rule admits the exact argv", false, []string{"x"}, true, "x\n"},
		{"exact rule refuses extra args", false, []string{"x", "y"}, false, ""},
		{"prefix rule admits extra args", true, []string{"x", "y"}, true, "x y\n"},
		{"prefix rule refuses a different first arg", true, []string{"y", "x"}, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var exe string
			h := newHarness(t, func(bin string) []config.AutoApprovalRule {
				exe = escalationtest.Executable(t, bin, "echoer", `echo "$@"`)
				return []config.AutoApprovalRule{{CanonicalExecutable: exe, Args: []string{"x"}, AllowExtraArgs: tt.extra}}
			}, nil)
			res := h.run(t, append([]string{exe}, tt.argv...)...)
			if tt.auto {
				outcome(t, res, protocol.OutcomeCompleted, 0)
				if string(res.Stdout) != tt.output || h.prompter.calls.Load() != 0 {
					t.Errorf("stdout %q, prompts %d; want %q without a prompt", res.Stdout, h.prompter.calls.Load(), tt.output)
				}
				return
			}
			outcome(t, res, protocol.OutcomeDenied, -1)
			if h.prompter.calls.Load() != 1 {
				t.Errorf("prompts %d, want 1", h.prompter.calls.Load())
			}
		})
	}
}

func TestShellFormNeverAutoApproved(t *testing.T) {
	tests := []struct {
		name string
		argv func(exe string) []string
	}{
		{"non-canonical argv0 equal to the rule", func(exe string) []string {
			return []string{filepath.Dir(exe) + "/../" + filepath.Base(filepath.Dir(exe)) + "/tool"}
		}},
		{"command string in argv0 equal to the rule", func(exe string) []string { return []string{exe + " -x"} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var argv []string
			h := newHarness(t, func(bin string) []config.AutoApprovalRule {
				argv = tt.argv(escalationtest.Executable(t, bin, "tool", "touch ran"))
				return []config.AutoApprovalRule{{CanonicalExecutable: argv[0]}}
			}, nil)
			g := h.guest(t, argv...)
			if err := g.Send(); err != nil {
				t.Fatal(err)
			}
			res := wait(t, g)
			outcome(t, res, protocol.OutcomeDenied, -1)
			if h.prompter.calls.Load() != 1 {
				t.Fatalf("prompts %d, want 1", h.prompter.calls.Load())
			}
			ev := h.waitPhase(t, g.Request.RequestID, escalation.PhaseAwaitingApproval)
			if !errors.Is(ev.Err, escalation.ErrShellForm) {
				t.Errorf("prompt reason %v, want ErrShellForm", ev.Err)
			}
			if _, err := os.Stat(filepath.Join(h.work, "ran")); err == nil {
				t.Error("the command ran")
			}
		})
	}
}

func TestPrompt(t *testing.T) {
	tests := []struct {
		name     string
		approved func(req []string) []string
		want     protocol.EscalationOutcome
		stdout   string
	}{
		{"approve", func(req []string) []string { return req }, protocol.OutcomeCompleted, "asked\n"},
		{"deny", func([]string) []string { return nil }, protocol.OutcomeDenied, ""},
		{"edit", func(req []string) []string { return []string{req[0], "edited", "twice"} }, protocol.OutcomeCompleted, "edited twice\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, nil, nil)
			exe := h.exe(t, "say", `echo "$@"`)
			h.prompter.decide = func(ctx context.Context, p protocol.TerminalPrompt) (protocol.SignedProtocolRecord, error) {
				if id, phase, _ := h.e.Active(p.SessionID); id != p.RequestID || phase != escalation.PhaseAwaitingApproval {
					t.Errorf("prompt shown in phase %s of %x", phase, id)
				}
				return h.f.Decision(p, tt.approved(p.CommandArgv))
			}
			g := h.guest(t, exe, "asked")
			if err := g.Send(); err != nil {
				t.Fatal(err)
			}
			res := wait(t, g)
			outcome(t, res, tt.want, -1)
			if string(res.Stdout) != tt.stdout {
				t.Errorf("stdout %q, want %q", res.Stdout, tt.stdout)
			}
			p := h.prompter.prompts[0]
			if p.AgentProfile != "claude" || p.Justification != "test" || strings.Join(p.CommandArgv, " ") != exe+" asked" ||
				p.RequestSHA256 != protocol.RequestSHA256(&g.Signed) || p.SessionID != h.f.Binding.SessionID {
				t.Errorf("prompt %+v does not describe the request", p)
			}
			var sawPrompting bool
			for _, ev := range h.eventsOf(g.Request.RequestID) {
				sawPrompting = sawPrompting || ev.SessionPhase == escalation.SessionPrompting
			}
			if !sawPrompting {
				t.Error("the session never entered Prompting")
			}
			if tt.want == protocol.OutcomeCompleted {
				ev := h.waitPhase(t, g.Request.RequestID, escalation.PhaseCompleted)
				if ev.Source != escalation.SourceDeveloper || strings.Join(ev.Argv, " ") != strings.Join(tt.approved(p.CommandArgv), " ") {
					t.Errorf("completed event %+v, want source Developer and the approved argv", ev)
				}
			}
		})
	}
}

func TestPromptFailures(t *testing.T) {
	tests := []struct {
		name   string
		decide func(h *harness) func(context.Context, protocol.TerminalPrompt) (protocol.SignedProtocolRecord, error)
		want   protocol.EscalationOutcome
		err    error
	}{
		{"decision signed by another key waits out the timeout", func(h *harness) func(context.Context, protocol.TerminalPrompt) (protocol.SignedProtocolRecord, error) {
			return func(_ context.Context, p protocol.TerminalPrompt) (protocol.SignedProtocolRecord, error) {
				d := protocol.DeveloperDecision{SessionBinding: h.f.Binding, RequestID: p.RequestID, RequestSHA256: p.RequestSHA256,
					Decision: protocol.DecisionApprove, ApprovedCommandArgv: p.CommandArgv}
				return protocol.Sign(h.f.SandboxKey, &d)
			}
		}, protocol.OutcomeTimedOut, escalation.ErrTimedOut},
		{"decision for another request digest", func(h *harness) func(context.Context, protocol.TerminalPrompt) (protocol.SignedProtocolRecord, error) {
			return func(_ context.Context, p protocol.TerminalPrompt) (protocol.SignedProtocolRecord, error) {
				p.RequestSHA256[0] ^= 1
				return h.f.Decision(p, p.CommandArgv)
			}
		}, protocol.OutcomeTimedOut, escalation.ErrTimedOut},
		{"no answer times out", func(h *harness) func(context.Context, protocol.TerminalPrompt) (protocol.SignedProtocolRecord, error) {
			return func(ctx context.Context, _ protocol.TerminalPrompt) (protocol.SignedProtocolRecord, error) {
				<-ctx.Done()
				return protocol.SignedProtocolRecord{}, ctx.Err()
			}
		}, protocol.OutcomeTimedOut, escalation.ErrTimedOut},
		{"prompter failure cancels", func(h *harness) func(context.Context, protocol.TerminalPrompt) (protocol.SignedProtocolRecord, error) {
			return func(context.Context, protocol.TerminalPrompt) (protocol.SignedProtocolRecord, error) {
				return protocol.SignedProtocolRecord{}, errors.New("terminal disconnected")
			}
		}, protocol.OutcomeCancelled, escalation.ErrPrompt},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, nil, func(c *escalation.Config) { c.Timeouts.Approval = 300 * time.Millisecond })
			h.prompter.decide = tt.decide(h)
			exe := h.exe(t, "tool", "touch ran")
			g := h.guest(t, exe)
			if err := g.Send(); err != nil {
				t.Fatal(err)
			}
			outcome(t, wait(t, g), tt.want, -1)
			pending := map[protocol.EscalationOutcome]escalation.Phase{
				protocol.OutcomeTimedOut: escalation.PhaseTimeoutPending, protocol.OutcomeCancelled: escalation.PhaseCancellationPending,
			}[tt.want]
			if ev := h.waitPhase(t, g.Request.RequestID, pending); !errors.Is(ev.Err, tt.err) {
				t.Errorf("reason %v, want %v", ev.Err, tt.err)
			}
			if _, err := os.Stat(filepath.Join(h.work, "ran")); err == nil {
				t.Error("the command ran")
			}
		})
	}
}

func TestDiscardedRecords(t *testing.T) {
	tests := []struct {
		name  string
		write func(t *testing.T, h *harness, exe string) // writes one record
		err   error
	}{
		{"tampered payload", func(t *testing.T, h *harness, exe string) {
			g := h.guest(t, exe)
			g.Signed.PayloadBytes[len(g.Signed.PayloadBytes)-1] ^= 1
			g.Send()
		}, protocol.ErrSignature},
		{"signed by another key", func(t *testing.T, h *harness, exe string) {
			_, req := h.f.Request(t, exe)
			signed, _ := protocol.Sign(h.f.AnchorKey, &req)
			h.f.Outbox.Write(mailbox.Name{RequestID: req.RequestID, Kind: mailbox.KindRequest}, &signed)
		}, protocol.ErrSignature},
		{"unregistered session", func(t *testing.T, h *harness, exe string) {
			b := h.f.NewBinding(h.f.AnchorKey)
			c, err := h.f.IssueCapability(b)
			if err != nil {
				t.Fatal(err)
			}
			_, req := h.f.Request(t, exe)
			req.SessionBinding, req.SessionCapability = b, c
			signed, _ := protocol.Sign(h.f.SandboxKey, &req)
			h.f.Outbox.Write(mailbox.Name{RequestID: req.RequestID, Kind: mailbox.KindRequest}, &signed)
		}, protocol.ErrBinding},
		{"capability of another session", func(t *testing.T, h *harness, exe string) {
			c, err := h.f.IssueCapability(h.f.NewBinding(h.f.AnchorKey))
			if err != nil {
				t.Fatal(err)
			}
			_, req := h.f.Request(t, exe)
			req.SessionCapability = c
			signed, _ := protocol.Sign(h.f.SandboxKey, &req)
			h.f.Outbox.Write(mailbox.Name{RequestID: req.RequestID, Kind: mailbox.KindRequest}, &signed)
		}, protocol.ErrCapability},
		{"file name of another request", func(t *testing.T, h *harness, exe string) {
			g := h.guest(t, exe)
			other := g.Request.RequestID
			other[0] ^= 1
			h.f.Outbox.Write(mailbox.Name{RequestID: other, Kind: mailbox.KindRequest}, &g.Signed)
		}, escalation.ErrNameMismatch},
		{"cancellation of no request", func(t *testing.T, h *harness, exe string) {
			h.guest(t, exe).Cancel()
		}, escalation.ErrNoRequest},
		{"acknowledgment of no request", func(t *testing.T, h *harness, exe string) {
			g := h.guest(t, exe)
			pending := protocol.NewPendingRequest(&g.Signed, &g.Request)
			a := protocol.MailboxResultAck{SessionBinding: h.f.Binding, RequestID: g.Request.RequestID, RequestSHA256: pending.RequestSHA256,
				SessionCapability: h.f.Capability, SandboxCredentialID: h.f.Sandbox.CredentialID}
			signed, _ := protocol.Sign(h.f.SandboxKey, &a)
			h.f.Outbox.Write(mailbox.Name{RequestID: g.Request.RequestID, Kind: mailbox.KindAck}, &signed)
		}, escalation.ErrNoRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var exe string
			h := newHarness(t, func(bin string) []config.AutoApprovalRule {
				exe = escalationtest.Executable(t, bin, "tool", "touch ran")
				return []config.AutoApprovalRule{{CanonicalExecutable: exe}}
			}, nil)
			tt.write(t, h, exe)
			d := h.waitDiscard(t)
			if !errors.Is(d.reason, tt.err) {
				t.Errorf("discarded %s because %v, want %v", d.name, d.reason, tt.err)
			}
			if _, err := os.Stat(filepath.Join(h.work, "ran")); err == nil {
				t.Error("the command ran")
			}
		})
	}
}

func TestReplayedRequestDiscarded(t *testing.T) {
	var exe string
	h := newHarness(t, func(bin string) []config.AutoApprovalRule {
		exe = escalationtest.Executable(t, bin, "tool", `echo run >> ran`)
		return []config.AutoApprovalRule{{CanonicalExecutable: exe}}
	}, nil)
	g := h.guest(t, exe)
	if err := g.Send(); err != nil {
		t.Fatal(err)
	}
	outcome(t, wait(t, g), protocol.OutcomeCompleted, 0)
	h.waitPhase(t, g.Request.RequestID, escalation.PhaseCompleted)
	if err := g.Send(); err != nil {
		t.Fatal(err)
	}
	if d := h.waitDiscard(t); !errors.Is(d.reason, protocol.ErrReplay) {
		t.Errorf("replay discarded because %v, want ErrReplay", d.reason)
	}
	if b, _ := os.ReadFile(filepath.Join(h.work, "ran")); string(b) != "run\n" {
		t.Errorf("the command ran %d times, want once", strings.Count(string(b), "run"))
	}
}

func TestSecondRequestRefused(t *testing.T) {
	h := newHarness(t, nil, nil)
	release := make(chan struct{})
	h.prompter.decide = func(ctx context.Context, p protocol.TerminalPrompt) (protocol.SignedProtocolRecord, error) {
		<-release
		return h.f.Decision(p, p.CommandArgv)
	}
	exe := h.exe(t, "say", `echo "$@"`)
	first := h.guest(t, exe, "first")
	if err := first.Send(); err != nil {
		t.Fatal(err)
	}
	h.waitPhase(t, first.Request.RequestID, escalation.PhaseAwaitingApproval)
	second := h.guest(t, exe, "second")
	if err := second.Send(); err != nil {
		t.Fatal(err)
	}
	outcome(t, wait(t, second), protocol.OutcomeFailed, -1)
	if ev := h.waitPhase(t, second.Request.RequestID, escalation.PhaseRefused); !errors.Is(ev.Err, escalation.ErrBusy) {
		t.Errorf("refusal reason %v, want ErrBusy", ev.Err)
	}
	close(release)
	res := wait(t, first)
	outcome(t, res, protocol.OutcomeCompleted, 0)
	if string(res.Stdout) != "first\n" {
		t.Errorf("stdout %q", res.Stdout)
	}
}

// pids reads the process IDs a test command wrote, one per line, waiting
// until n are there.
func pids(t *testing.T, path string, n int) []int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		b, _ := os.ReadFile(path)
		f := strings.Fields(string(b))
		if len(f) >= n {
			var out []int
			for _, s := range f {
				p, err := strconv.Atoi(s)
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, p)
			}
			return out
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("%s never listed %d processes", path, n)
	return nil
}

// gone reports whether pid no longer runs (absent, or a zombie awaiting
// its reaper).
func gone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	i := bytes.LastIndexByte(b, ')')
	return i > 0 && i+2 < len(b) && (b[i+2] == 'Z' || b[i+2] == 'X')
}

func waitGone(t *testing.T, ps []int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for _, p := range ps {
		for !gone(p) {
			if time.Now().After(deadline) {
				t.Fatalf("process %d of the host command still runs", p)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}

const sleeper = `echo $$ > "$1.tmp"; sleep 60 & echo $! >> "$1.tmp"; mv "$1.tmp" "$1"; wait`

func TestExecutionTimeout(t *testing.T) {
	var exe string
	h := newHarness(t, func(bin string) []config.AutoApprovalRule {
		exe = escalationtest.Executable(t, bin, "sleeper", sleeper)
		return []config.AutoApprovalRule{{CanonicalExecutable: exe, Args: []string{"pids"}}}
	}, func(c *escalation.Config) { c.Timeouts.Execution = 2 * time.Second })
	start := time.Now()
	res := h.run(t, exe, "pids")
	outcome(t, res, protocol.OutcomeTimedOut, -1)
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("timeout took %v", d)
	}
	waitGone(t, pids(t, filepath.Join(h.work, "pids"), 2))
}

func TestCancel(t *testing.T) {
	tests := []struct {
		name   string
		cancel func(h *harness, g *escalationtest.Guest) error
	}{
		{"guest cancellation", func(_ *harness, g *escalationtest.Guest) error { return g.Cancel() }},
		{"session went away", func(h *harness, _ *escalationtest.Guest) error {
			if !h.e.CancelSession(h.f.Binding.SessionID) {
				return errors.New("no active request to cancel")
			}
			return nil
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var exe string
			h := newHarness(t, func(bin string) []config.AutoApprovalRule {
				exe = escalationtest.Executable(t, bin, "sleeper", sleeper)
				return []config.AutoApprovalRule{{CanonicalExecutable: exe, Args: []string{"pids"}}}
			}, nil)
			g := h.guest(t, exe, "pids")
			if err := g.Send(); err != nil {
				t.Fatal(err)
			}
			ps := pids(t, filepath.Join(h.work, "pids"), 2)
			if err := tt.cancel(h, g); err != nil {
				t.Fatal(err)
			}
			outcome(t, wait(t, g), protocol.OutcomeCancelled, -1)
			waitGone(t, ps)
			h.waitPhase(t, g.Request.RequestID, escalation.PhaseCancelled)
		})
	}
}

func TestCancelWhilePrompting(t *testing.T) {
	h := newHarness(t, nil, nil)
	promptEnded := make(chan struct{})
	h.prompter.decide = func(ctx context.Context, _ protocol.TerminalPrompt) (protocol.SignedProtocolRecord, error) {
		<-ctx.Done()
		close(promptEnded)
		return protocol.SignedProtocolRecord{}, ctx.Err()
	}
	g := h.guest(t, h.exe(t, "tool", "touch ran"))
	if err := g.Send(); err != nil {
		t.Fatal(err)
	}
	h.waitPhase(t, g.Request.RequestID, escalation.PhaseAwaitingApproval)
	if err := g.Cancel(); err != nil {
		t.Fatal(err)
	}
	outcome(t, wait(t, g), protocol.OutcomeCancelled, -1)
	select {
	case <-promptEnded:
	case <-time.After(10 * time.Second):
		t.Fatal("the prompt was not taken down")
	}
}

func TestExecutableChangedBeforeExecution(t *testing.T) {
	tests := []struct {
		name   string
		change func(t *testing.T, exe string)
	}{
		{"second hard link", func(t *testing.T, exe string) {
			if err := os.Link(exe, exe+".link"); err != nil {
				t.Fatal(err)
			}
		}},
		{"group writable", func(t *testing.T, exe string) {
			if err := os.Chmod(exe, 0o775); err != nil {
				t.Fatal(err)
			}
		}},
		{"other writable", func(t *testing.T, exe string) {
			if err := os.Chmod(exe, 0o757); err != nil {
				t.Fatal(err)
			}
		}},
		{"not executable", func(t *testing.T, exe string) {
			if err := os.Chmod(exe, 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{"replaced by a symbolic link", func(t *testing.T, exe string) {
			other := escalationtest.Executable(t, filepath.Dir(exe), "other", "touch ran")
			if err := os.Remove(exe); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(other, exe); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, nil, nil)
			exe := h.exe(t, "tool", "touch ran")
			h.prompter.decide = func(_ context.Context, p protocol.TerminalPrompt) (protocol.SignedProtocolRecord, error) {
				tt.change(t, exe)
				return h.f.Decision(p, p.CommandArgv)
			}
			g := h.guest(t, exe)
			if err := g.Send(); err != nil {
				t.Fatal(err)
			}
			outcome(t, wait(t, g), protocol.OutcomeFailed, -1)
			if ev := h.waitPhase(t, g.Request.RequestID, escalation.PhaseFailurePending); !errors.Is(ev.Err, escalation.ErrExecutable) {
				t.Errorf("failure reason %v, want ErrExecutable", ev.Err)
			}
			if _, err := os.Stat(filepath.Join(h.work, "ran")); err == nil {
				t.Error("the command ran")
			}
		})
	}
}

func TestSignaledCommandFails(t *testing.T) {
	var exe string
	h := newHarness(t, func(bin string) []config.AutoApprovalRule {
		exe = escalationtest.Executable(t, bin, "tool", `echo before; kill -9 $$`)
		return []config.AutoApprovalRule{{CanonicalExecutable: exe}}
	}, nil)
	g := h.guest(t, exe)
	g.Send()
	res := wait(t, g)
	outcome(t, res, protocol.OutcomeFailed, -1)
	if string(res.Stdout) != "before\n" {
		t.Errorf("stdout %q, want the output before the signal", res.Stdout)
	}
	if ev := h.waitPhase(t, g.Request.RequestID, escalation.PhaseFailurePending); !errors.Is(ev.Err, escalation.ErrSignaled) {
		t.Errorf("reason %v, want ErrSignaled", ev.Err)
	}
}

func TestLargeOutputStreamsInChunks(t *testing.T) {
	data := make([]byte, 3<<20/2+12345)
	rand.Read(data)
	var exe string
	h := newHarness(t, func(bin string) []config.AutoApprovalRule {
		exe = escalationtest.Executable(t, bin, "cat", `cat "$1"; echo done >&2`)
		return []config.AutoApprovalRule{{CanonicalExecutable: exe, Args: []string{"data"}}}
	}, func(c *escalation.Config) { c.Window = 4 })
	if err := os.WriteFile(filepath.Join(h.work, "data"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	g := h.guest(t, exe, "data")
	var maxChunk int
	g.OnChunk = func(c protocol.MailboxResultChunk) { maxChunk = max(maxChunk, len(c.Bytes)) }
	g.Send()
	res := wait(t, g)
	outcome(t, res, protocol.OutcomeCompleted, 0)
	if !bytes.Equal(res.Stdout, data) || string(res.Stderr) != "done\n" {
		t.Fatalf("received %d stdout bytes and stderr %q, want %d bytes and done", len(res.Stdout), res.Stderr, len(data))
	}
	if min := len(data) / protocol.MaxChunkBytes; res.Chunks < min || maxChunk > protocol.MaxChunkBytes {
		t.Errorf("%d chunks of at most %d bytes, want at least %d of at most %d", res.Chunks, maxChunk, min, protocol.MaxChunkBytes)
	}
	if int(res.Result.ChunkCount) != res.Chunks {
		t.Errorf("chunk_count %d, received %d", res.Result.ChunkCount, res.Chunks)
	}
}

func TestUnacknowledgedResultIsDelivered(t *testing.T) {
	var exe string
	h := newHarness(t, func(bin string) []config.AutoApprovalRule {
		exe = escalationtest.Executable(t, bin, "tool", `echo hi`)
		return []config.AutoApprovalRule{{CanonicalExecutable: exe}}
	}, func(c *escalation.Config) { c.Timeouts.Ack = 200 * time.Millisecond })
	g := h.guest(t, exe)
	g.Send()
	ev := h.waitPhase(t, g.Request.RequestID, escalation.PhaseCompleted)
	if !errors.Is(ev.Err, escalation.ErrUnacknowledged) {
		t.Errorf("delivery reason %v, want ErrUnacknowledged", ev.Err)
	}
	if _, _, active := h.e.Active(h.f.Binding.SessionID); active {
		t.Error("the session still has an active request")
	}
	res := wait(t, g)
	outcome(t, res, protocol.OutcomeCompleted, 0)
}

func TestNewRefusesIncompleteConfig(t *testing.T) {
	f := escalationtest.New(t)
	full := escalation.Config{Verifier: f.Verifier, CoordinatorKey: f.CoordinatorKey, Sessions: f.Sessions,
		Prompter: &fakePrompter{}, Outbox: f.Outbox, Inbox: f.Inbox, Workspace: t.TempDir()}
	tests := []struct {
		name  string
		spoil func(*escalation.Config)
	}{
		{"no verifier", func(c *escalation.Config) { c.Verifier = nil }},
		{"wrong coordinator key", func(c *escalation.Config) { c.CoordinatorKey = f.SandboxKey }},
		{"no sessions", func(c *escalation.Config) { c.Sessions = nil }},
		{"no prompter", func(c *escalation.Config) { c.Prompter = nil }},
		{"inbox as outbox", func(c *escalation.Config) { c.Outbox = f.Inbox }},
		{"no workspace", func(c *escalation.Config) { c.Workspace = "" }},
	}
	if _, err := escalation.New(full); err != nil {
		t.Fatalf("complete config refused: %v", err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := full
			tt.spoil(&c)
			if _, err := escalation.New(c); !errors.Is(err, escalation.ErrConfig) {
				t.Errorf("New = %v, want ErrConfig", err)
			}
		})
	}
}
