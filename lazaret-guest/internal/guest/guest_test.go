package guest

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"lazaret.dev/pkg/initready"
	"lazaret.dev/pkg/protocol"
)

func TestExitCode(t *testing.T) {
	u8 := func(v uint8) *uint8 { return &v }
	tests := []struct {
		name string
		r    protocol.MailboxResult
		want int
	}{
		{"completed 0", protocol.MailboxResult{Outcome: protocol.OutcomeCompleted, ExitCode: u8(0)}, 0},
		{"completed 42", protocol.MailboxResult{Outcome: protocol.OutcomeCompleted, ExitCode: u8(42)}, 42},
		{"completed 255", protocol.MailboxResult{Outcome: protocol.OutcomeCompleted, ExitCode: u8(255)}, 255},
		{"denied", protocol.MailboxResult{Outcome: protocol.OutcomeDenied}, 125},
		{"timed out", protocol.MailboxResult{Outcome: protocol.OutcomeTimedOut}, 124},
		{"cancelled", protocol.MailboxResult{Outcome: protocol.OutcomeCancelled}, 130},
		{"failed", protocol.MailboxResult{Outcome: protocol.OutcomeFailed}, 126},
	}
	seen := map[int]string{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ExitCode(&tt.r); got != tt.want {
				t.Errorf("ExitCode = %d, want %d", got, tt.want)
			}
		})
		if tt.r.Outcome != protocol.OutcomeCompleted {
			if other, dup := seen[tt.want]; dup || tt.want == ExitGuestError {
				t.Errorf("%s shares exit code %d with %s", tt.name, tt.want, other)
			}
			seen[tt.want] = tt.name
		}
	}
}

func TestParseShim(t *testing.T) {
	tests := []struct {
		spec, hostDir string
		want          Shim
		ok            bool
	}{
		{"gh", "/usr/bin", Shim{"gh", "/usr/bin/gh"}, true},
		{"gh", "/usr/local/bin", Shim{"gh", "/usr/local/bin/gh"}, true},
		{"git=/usr/bin/git", "/ignored", Shim{"git", "/usr/bin/git"}, true},
		{"kubectl-1.30=/opt/k8s/bin/kubectl", "/usr/bin", Shim{"kubectl-1.30", "/opt/k8s/bin/kubectl"}, true},
		{"gh", "relative", Shim{}, false},
		{"", "/usr/bin", Shim{}, false},
		{".hidden", "/usr/bin", Shim{}, false},
		{"-flag", "/usr/bin", Shim{}, false},
		{"a/b", "/usr/bin", Shim{}, false},
		{"a b", "/usr/bin", Shim{}, false},
		{"gh=usr/bin/gh", "/usr/bin", Shim{}, false},
		{"gh=/usr/bin/../bin/gh", "/usr/bin", Shim{}, false},
		{"gh=/usr//bin/gh", "/usr/bin", Shim{}, false},
		{"gh=/usr/bin/gh/", "/usr/bin", Shim{}, false},
		{"gh=/", "/usr/bin", Shim{}, false},
		{"gh=/usr/bin/g\nh", "/usr/bin", Shim{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.spec+"@"+tt.hostDir, func(t *testing.T) {
			got, err := ParseShim(tt.spec, tt.hostDir)
			if tt.ok != (err == nil) || got != tt.want {
				t.Fatalf("ParseShim = %+v, %v; want %+v, ok=%v", got, err, tt.want, tt.ok)
			}
			if err != nil && !errors.Is(err, ErrShim) {
				t.Fatalf("error %v is not ErrShim", err)
			}
		})
	}
}

func TestShimScriptGolden(t *testing.T) {
	got := string(Shim{Name: "gh", HostPath: "/opt/it's/gh"}.Script("/run/lazaret/lazaret-guest"))
	want := "#!/bin/sh\n# lazaret-guest shim: gh escalates to the host\nexec '/run/lazaret/lazaret-guest' run -- '/opt/it'\\''s/gh' \"$@\"\n"
	if got != want {
		t.Fatalf("script\n%s\nwant\n%s", got, want)
	}
}

func TestInstallShims(t *testing.T) {
	dir := t.TempDir()
	guestPath := filepath.Join(t.TempDir(), "fake-guest")
	// The fake guest prints its arguments, one per line.
	os.WriteFile(guestPath, []byte("#!/bin/sh\nfor a in \"$@\"; do echo \"$a\"; done\n"), 0o755)
	os.Chmod(guestPath, 0o755)
	if err := InstallShims(dir, guestPath, []Shim{{"gh", "/usr/bin/gh"}, {"git", "/usr/bin/git"}}); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(filepath.Join(dir, "gh"))
	if err != nil || st.Mode().Perm() != 0o755 {
		t.Fatalf("gh shim: %v, %v", st, err)
	}
	out, err := runScript(filepath.Join(dir, "gh"), "pr", "create", "--title", "a b; c")
	if err != nil {
		t.Fatal(err)
	}
	if want := "run\n--\n/usr/bin/gh\npr\ncreate\n--title\na b; c\n"; out != want {
		t.Fatalf("shim passed %q, want %q", out, want)
	}
	// Reinstalling replaces our own wrapper.
	if err := InstallShims(dir, guestPath, []Shim{{"gh", "/opt/gh/bin/gh"}}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "gh")); !strings.Contains(string(b), "/opt/gh/bin/gh") {
		t.Fatalf("gh shim not replaced:\n%s", b)
	}
	// A foreign file is never replaced.
	os.WriteFile(filepath.Join(dir, "make"), []byte("#!/bin/sh\necho real make\n"), 0o755)
	if err := InstallShims(dir, guestPath, []Shim{{"make", "/usr/bin/make"}}); !errors.Is(err, ErrShim) {
		t.Fatalf("InstallShims over a foreign file = %v, want ErrShim", err)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".tmp.") {
			t.Errorf("temporary file %s left behind", e.Name())
		}
	}
}

func runScript(path string, args ...string) (string, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return "", err
	}
	p, err := os.StartProcess(path, append([]string{path}, args...), &os.ProcAttr{Files: []*os.File{nil, w, os.Stderr}})
	w.Close()
	if err != nil {
		return "", err
	}
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := r.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	_, err = p.Wait()
	return b.String(), err
}

func TestInitReapsAndStops(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	announce, wrote := io.Pipe()
	go func() { done <- Init(ctx, wrote) }()
	line, err := bufio.NewReader(announce).ReadString('\n')
	if err != nil || line != initready.Line+"\n" {
		t.Fatalf("Init announced %q (%v), want %q", line, err, initready.Line+"\n")
	}
	// A child nobody waits for: Init must reap it.
	pid, err := syscall.ForkExec("/bin/sh", []string{"sh", "-c", "exit 0"}, &syscall.ProcAttr{})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); errors.Is(err, os.ErrNotExist) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("child %d was not reaped", pid)
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Init = %v, want nil", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Init did not return after its context ended")
	}
}

func TestBackoff(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var b backoff
	b.reset(t0)
	steps := []struct {
		at   time.Duration
		want time.Duration
	}{
		{0, fastPoll},
		{fastFor - time.Microsecond, fastPoll},
		{fastFor, fastPoll},
		{fastFor + time.Millisecond, 2 * fastPoll},
		{fastFor + 2*time.Millisecond, 4 * fastPoll},
	}
	for _, s := range steps {
		if got := b.wait(t0.Add(s.at)); got != s.want {
			t.Fatalf("wait at %v = %v, want %v", s.at, got, s.want)
		}
	}
	var last time.Duration
	for range 20 {
		last = b.wait(t0.Add(time.Hour))
	}
	if last != maxPoll {
		t.Fatalf("wait after a long time = %v, want %v", last, maxPoll)
	}
	b.reset(t0.Add(time.Hour))
	if got := b.wait(t0.Add(time.Hour + time.Millisecond)); got != fastPoll {
		t.Fatalf("wait after a reset = %v, want %v", got, fastPoll)
	}
}
