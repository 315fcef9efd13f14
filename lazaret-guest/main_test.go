package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"debug/elf"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"lazaret.dev/pkg/config"
	"lazaret.dev/pkg/escalation"
	"lazaret.dev/pkg/escalation/escalationtest"
	"lazaret.dev/pkg/mailbox"
	"lazaret.dev/pkg/protocol"
)

var (
	buildOnce sync.Once
	guestBin  string
	buildErr  error
	buildDir  string
)

// guestBinary builds lazaret-guest as a release would: static, trimmed.
func guestBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "lazaret-guest-test")
		if buildErr != nil {
			return
		}
		guestBin = filepath.Join(buildDir, "lazaret-guest")
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", guestBin, ".")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		out, err := cmd.CombinedOutput()
		if err != nil {
			buildErr = errors.New("building lazaret-guest: " + err.Error() + "\n" + string(out))
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return guestBin
}

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

type prompter func(context.Context, protocol.TerminalPrompt) (protocol.SignedProtocolRecord, error)

func (p prompter) Prompt(ctx context.Context, tp protocol.TerminalPrompt) (protocol.SignedProtocolRecord, error) {
	return p(ctx, tp)
}

// host runs the escalation engine over a real mailbox directory, standing
// in for the Host Coordinator; the guest binary runs as a host process
// against the same directory, standing in for the sandbox side.
type host struct {
	f    *escalationtest.Fixture
	bin  string
	work string
}

func newHost(t *testing.T, decide prompter, rules func(bin string) []config.AutoApprovalRule, timeouts escalation.Timeouts) *host {
	t.Helper()
	h := &host{f: escalationtest.New(t), bin: t.TempDir(), work: t.TempDir()}
	if decide == nil {
		decide = func(_ context.Context, p protocol.TerminalPrompt) (protocol.SignedProtocolRecord, error) {
			return h.f.Decision(p, nil)
		}
	}
	cfg := escalation.Config{
		Verifier: h.f.Verifier, CoordinatorKey: h.f.CoordinatorKey, Sessions: h.f.Sessions, Prompter: decide,
		Outbox: h.f.Outbox, Inbox: h.f.Inbox, Workspace: h.work, UID: os.Getuid(), Timeouts: timeouts,
		Rescan: 50 * time.Millisecond,
	}
	if rules != nil {
		cfg.Rules = rules(h.bin)
	}
	e, err := escalation.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { e.Serve(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done; e.Close() })
	return h
}

func (h *host) command(t testing.TB, args ...string) *exec.Cmd {
	cmd := exec.Command(guestBinary(t), args...)
	cmd.Env = []string{
		mailbox.EnvCredentialBundle + "=" + h.f.BundlePath,
		mailbox.EnvCapability + "=" + h.f.CapabilityEnv,
		mailbox.EnvMailbox + "=" + h.f.Root,
	}
	return cmd
}

func runGuest(t *testing.T, cmd *exec.Cmd) (stdout, stderr string, code int) {
	t.Helper()
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	return o.String(), e.String(), cmd.ProcessState.ExitCode()
}

func TestGuestEndToEnd(t *testing.T) {
	big := make([]byte, 700_000)
	rand.Read(big)
	tests := []struct {
		name     string
		decide   func(h *host) prompter
		timeouts escalation.Timeouts
		args     func(tool string) []string
		code     int
		stdout   string
		stderr   string // substring
	}{
		{"auto-approved, exit status passes through", nil, escalation.Timeouts{},
			func(tool string) []string { return []string{tool, "auto", "x y"} }, 7, "auto|x y|\n", "to stderr\n"},
		{"prompted and approved", func(h *host) prompter {
			return func(_ context.Context, p protocol.TerminalPrompt) (protocol.SignedProtocolRecord, error) {
				return h.f.Decision(p, p.CommandArgv)
			}
		}, escalation.Timeouts{}, func(tool string) []string { return []string{tool, "asked"} }, 7, "asked|\n", "to stderr\n"},
		{"edited by the developer", func(h *host) prompter {
			return func(_ context.Context, p protocol.TerminalPrompt) (protocol.SignedProtocolRecord, error) {
				return h.f.Decision(p, []string{p.CommandArgv[0], "edited"})
			}
		}, escalation.Timeouts{}, func(tool string) []string { return []string{tool, "asked"} }, 7, "edited|\n", ""},
		{"denied", nil, escalation.Timeouts{}, func(tool string) []string { return []string{tool, "asked"} }, 125, "", "denied"},
		{"failed", func(h *host) prompter {
			return func(_ context.Context, p protocol.TerminalPrompt) (protocol.SignedProtocolRecord, error) {
				return h.f.Decision(p, []string{"/nonexistent/tool"})
			}
		}, escalation.Timeouts{}, func(tool string) []string { return []string{tool} }, 126, "", "could not run"},
		{"timed out", func(h *host) prompter {
			return func(ctx context.Context, _ protocol.TerminalPrompt) (protocol.SignedProtocolRecord, error) {
				<-ctx.Done()
				return protocol.SignedProtocolRecord{}, ctx.Err()
			}
		}, escalation.Timeouts{Approval: 200 * time.Millisecond}, func(tool string) []string { return []string{tool, "asked"} }, 124, "", "timed out"},
		{"large output", nil, escalation.Timeouts{},
			func(tool string) []string { return []string{tool, "auto", "big"} }, 7, "auto|big|\n" + string(big), "to stderr\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var tool string
			var h *host
			var decide prompter
			if tt.decide != nil {
				decide = func(ctx context.Context, p protocol.TerminalPrompt) (protocol.SignedProtocolRecord, error) {
					return tt.decide(h)(ctx, p)
				}
			}
			h = newHost(t, decide, func(bin string) []config.AutoApprovalRule {
				tool = escalationtest.Executable(t, bin, "tool", `printf '%s|' "$@"; echo; [ "$2" = big ] && cat big; echo to stderr >&2; exit 7`)
				return []config.AutoApprovalRule{{CanonicalExecutable: tool, Args: []string{"auto"}, AllowExtraArgs: true}}
			}, tt.timeouts)
			os.WriteFile(filepath.Join(h.work, "big"), big, 0o644)
			stdout, stderr, code := runGuest(t, h.command(t, append([]string{"run", "--justification", "testing", "--"}, tt.args(tool)...)...))
			if code != tt.code || stdout != tt.stdout || !strings.Contains(stderr, tt.stderr) {
				t.Fatalf("exit %d, stdout %.80q, stderr %q; want %d, %.80q, %q", code, stdout, stderr, tt.code, tt.stdout, tt.stderr)
			}
			if left, _ := os.ReadDir(filepath.Join(h.f.Root, mailbox.InboxDir)); len(left) != 0 {
				t.Errorf("the guest left %d files in the inbox", len(left))
			}
		})
	}
}

func TestGuestInterruptCancels(t *testing.T) {
	var tool string
	h := newHost(t, nil, func(bin string) []config.AutoApprovalRule {
		tool = escalationtest.Executable(t, bin, "sleeper", `echo started; echo $$ > pids.tmp; sleep 60 & echo $! >> pids.tmp; mv pids.tmp pids; wait`)
		return []config.AutoApprovalRule{{CanonicalExecutable: tool}}
	}, escalation.Timeouts{})
	cmd := h.command(t, "run", "--", tool)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var pids []int
	deadline := time.Now().Add(20 * time.Second)
	for len(pids) < 2 {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatal("the host command never started")
		}
		b, _ := os.ReadFile(filepath.Join(h.work, "pids"))
		pids = nil
		for _, f := range strings.Fields(string(b)) {
			p, _ := strconv.Atoi(f)
			pids = append(pids, p)
		}
		time.Sleep(10 * time.Millisecond)
	}
	cmd.Process.Signal(syscall.SIGINT)
	cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != 130 || !strings.Contains(e.String(), "cancelled") {
		t.Fatalf("exit %d, stderr %q; want 130 and a cancellation message", code, e.String())
	}
	if !strings.HasPrefix(o.String(), "started\n") {
		t.Errorf("stdout %q, want the output before the cancellation", o.String())
	}
	for _, p := range pids {
		for syscall.Kill(p, 0) == nil {
			if b, err := os.ReadFile("/proc/" + strconv.Itoa(p) + "/stat"); err != nil || bytes.Contains(b, []byte(") Z")) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("host process %d survived the cancellation", p)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

func TestGuestEnvironmentErrors(t *testing.T) {
	h := newHost(t, nil, nil, escalation.Timeouts{})
	tests := []struct {
		name string
		env  func(env []string) []string
		args []string
	}{
		{"no capability", func(env []string) []string { return env[:1] }, []string{"run", "--", "/usr/bin/true"}},
		{"capability not base64", func(env []string) []string {
			return append(env[:1], mailbox.EnvCapability+"=!!", env[2])
		}, []string{"run", "--", "/usr/bin/true"}},
		{"missing bundle", func(env []string) []string {
			return append([]string{mailbox.EnvCredentialBundle + "=/nonexistent"}, env[1:]...)
		}, []string{"run", "--", "/usr/bin/true"}},
		{"relative host path", func(env []string) []string { return env }, []string{"run", "--", "true"}},
		{"no command", func(env []string) []string { return env }, []string{"run"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := h.command(t, tt.args...)
			cmd.Env = tt.env(cmd.Env)
			_, stderr, code := runGuest(t, cmd)
			if code != 123 || stderr == "" {
				t.Fatalf("exit %d, stderr %q; want 123 and a message", code, stderr)
			}
		})
	}
}

func TestGuestShimInstall(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(guestBinary(t), "shim", "install", "--dir", dir, "gh", "git=/usr/bin/git")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	b, err := os.ReadFile(filepath.Join(dir, "gh"))
	if err != nil || !strings.Contains(string(b), "'/run/lazaret/lazaret-guest' run -- '/usr/bin/gh' \"$@\"") {
		t.Fatalf("gh shim %q, %v", b, err)
	}
}

// forbiddenDeps may never be in lazaret-guest's dependency graph. The
// host's command-line framework is among them for start-up time: the
// guest starts once per request inside gVisor, where every package
// initialisation costs, and that framework's (templates, a Markdown
// renderer, regular expressions) was most of the guest's own.
var forbiddenDeps = []string{
	"github.com/urfave/cli",
	"github.com/russross/blackfriday",
	"text/template",
	"lazaret.dev/pkg/cmdmain",
	"go.etcd.io/bbolt",
	"github.com/google/nftables",
	"github.com/mdlayher/netlink",
	"github.com/fxamacker/cbor",
	"github.com/pelletier/go-toml",
	"lazaret.dev/pkg/config",
	"lazaret.dev/pkg/escalation",
	"lazaret.dev/pkg/store",
	"lazaret.dev/pkg/domainstore",
	"lazaret.dev/pkg/control",
	"lazaret.dev/pkg/netpolicy",
	"net/http",
}

// TestDependencyBudget keeps lazaret-guest tiny and static: none of the
// host's heavy dependencies in its import graph, no TLS server code in the
// linked binary (pkg/protocol imports crypto/tls for the control socket;
// the linker must drop all of it from the guest), and no dynamic linking.
func TestDependencyBudget(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list -deps listed only %q", deps)
	}
	for _, d := range deps {
		for _, bad := range forbiddenDeps {
			if d == bad || strings.HasPrefix(d, bad+"/") {
				t.Errorf("lazaret-guest depends on %s", d)
			}
		}
	}
	bin := guestBinary(t)
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("lazaret-guest is dynamically linked (has PT_INTERP)")
		}
	}
	unstripped := filepath.Join(t.TempDir(), "lazaret-guest")
	build := exec.Command("go", "build", "-o", unstripped, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	syms, err := exec.Command("go", "tool", "nm", unstripped).Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"crypto/tls.(*serverHandshakeState", "crypto/tls.(*Conn).serverHandshake", "crypto/tls.Server", "crypto/tls.(*Conn).clientHandshake", "net/http."} {
		if bytes.Contains(syms, []byte(bad)) {
			t.Errorf("lazaret-guest links %s", bad)
		}
	}
}

// BenchmarkGuestBinarySize reports the size of the release build.
func BenchmarkGuestBinarySize(b *testing.B) {
	b.ReportAllocs()
	st, err := os.Stat(guestBinary(b))
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < b.N; i++ {
		_ = st.Size()
	}
	b.ReportMetric(float64(st.Size()), "bytes")
}

// BenchmarkGuestRoundTrip runs the guest binary for an auto-approved
// /usr/bin/true: process start, bundle verification, request, host
// execution, result and acknowledgment.
func BenchmarkGuestRoundTrip(b *testing.B) {
	f := escalationtest.New(b)
	e, err := escalation.New(escalation.Config{
		Verifier: f.Verifier, CoordinatorKey: f.CoordinatorKey, Sessions: f.Sessions,
		Prompter: prompter(func(_ context.Context, p protocol.TerminalPrompt) (protocol.SignedProtocolRecord, error) {
			return f.Decision(p, nil)
		}),
		Outbox: f.Outbox, Inbox: f.Inbox, Workspace: b.TempDir(), UID: os.Getuid(),
		Rules: []config.AutoApprovalRule{{CanonicalExecutable: "/usr/bin/true"}},
	})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go e.Serve(ctx)
	defer func() { cancel(); e.Close() }()
	h := &host{f: f}
	guestBinary(b)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		cmd := h.command(b, "run", "--", "/usr/bin/true")
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("%v: %s", err, out)
		}
		for {
			if _, _, active := e.Active(f.Binding.SessionID); !active {
				break
			}
			time.Sleep(20 * time.Microsecond)
		}
	}
}

func TestCommandLine(t *testing.T) {
	tests := []struct {
		args   []string
		code   int
		stdout string // prefix
		stderr string // substring
	}{
		{nil, exitUsage, "", "usage:"},
		{[]string{"--version"}, 0, "lazaret-guest version ", ""},
		{[]string{"-v"}, 0, "lazaret-guest version ", ""},
		{[]string{"help"}, 0, "usage:", ""},
		{[]string{"--help"}, 0, "usage:", ""},
		{[]string{"frob"}, exitUsage, "", `unknown command "frob"`},
		{[]string{"shim"}, exitUsage, "", "shim needs the subcommand install"},
		{[]string{"shim", "install"}, exitUsage, "", "needs at least one NAME"},
		{[]string{"shim", "install", "--bogus", "gh"}, exitUsage, "", "flag provided but not defined: -bogus"},
		{[]string{"shim", "install", "-h"}, 0, "usage:", ""},
		{[]string{"init", "extra"}, exitUsage, "", "init takes no arguments"},
		{[]string{"run"}, 123, "", "run needs the host command"},
		{[]string{"run", "--"}, 123, "", "run needs the host command"},
		{[]string{"run", "--bogus", "--", "/usr/bin/true"}, 123, "", "flag provided but not defined: -bogus"},
		{[]string{"run", "-h"}, 0, "usage:", ""},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var o, e bytes.Buffer
			code := run(context.Background(), tt.args, &o, &e)
			if code != tt.code || !strings.HasPrefix(o.String(), tt.stdout) || !strings.Contains(e.String(), tt.stderr) {
				t.Fatalf("exit %d, stdout %q, stderr %q; want %d, %q..., ...%q...", code, o.String(), e.String(), tt.code, tt.stdout, tt.stderr)
			}
		})
	}
}
