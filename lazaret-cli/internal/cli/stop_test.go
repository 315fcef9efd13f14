package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"lazaret.dev/lazaret-cli/internal/session"
)

func stopHost(t *testing.T) *host {
	t.Helper()
	h := newHost(t)
	if err := os.MkdirAll(filepath.Dir(h.file), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(h.file, []byte(explainConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(h.dir, "run"), 0o700); err != nil {
		t.Fatal(err)
	}
	return h
}

func TestStopCommand(t *testing.T) {
	h := stopHost(t)
	tests := []struct {
		name   string
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{"cold Domain", []string{"--profile", "dev", "--workspace", h.ws}, 0, `no running generation of profile "dev" in ` + h.ws + "\n", ""},
		{"cold Domain, explicit timeout", []string{"--profile", "dev", "--workspace", h.ws, "--timeout", "2s"}, 0, `no running generation of profile "dev" in ` + h.ws + "\n", ""},
		{"zero timeout", []string{"--profile", "dev", "--workspace", h.ws, "--timeout", "0s"}, session.ExitFailure, "", "lazaret-cli: --timeout 0s: must be positive\n"},
		{"argument", []string{"--profile", "dev", "--workspace", h.ws, "now"}, session.ExitFailure, "", "lazaret-cli: stop takes no arguments, got \"now\"\n"},
		{"unknown profile", []string{"--profile", "nope", "--workspace", h.ws}, session.ExitFailure, "", "nope"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stdout, stderr, err := runApp(t, append([]string{"stop"}, tt.args...)...)
			if got := exitCode(err); got != tt.code {
				t.Fatalf("exit %d, want %d (%v)\nstdout %s\nstderr %s", got, tt.code, err, stdout, stderr)
			}
			if stdout != tt.stdout {
				t.Errorf("stdout %q, want %q", stdout, tt.stdout)
			}
			if !strings.Contains(stderr, tt.stderr) || (tt.stderr == "" && stderr != "") {
				t.Errorf("stderr %q, want %q", stderr, tt.stderr)
			}
		})
	}
}

func TestWriteStopResult(t *testing.T) {
	tg := &session.Target{Profile: "dev", Workspace: "/src/app"}
	tests := []struct {
		name string
		res  session.StopResult
		want string
	}{
		{"nothing", session.StopResult{}, "no running generation of profile \"dev\" in /src/app\n"},
		{"published", session.StopResult{Running: true, PID: 42, Generation: "0123456789abcdef0123456789abcdef", Took: 1234567 * time.Microsecond},
			"stopped generation 0123456789abcdef0123456789abcdef of profile \"dev\" in /src/app (lazaret-coordinator pid 42, 1.235s)\n"},
		{"starting", session.StopResult{Running: true, PID: 42, Took: 80 * time.Millisecond},
			"stopped the unpublished generation of profile \"dev\" in /src/app (lazaret-coordinator pid 42, 80ms)\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := writeStopResult(&b, tg, tt.res); err != nil {
				t.Fatal(err)
			}
			if b.String() != tt.want {
				t.Errorf("got %q, want %q", b.String(), tt.want)
			}
		})
	}
}
