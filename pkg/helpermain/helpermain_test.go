package helpermain

import (
	"bytes"
	"context"
	"errors"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// recorder is a command's Run that records its arguments and returns err.
type recorder struct {
	args []string
	ran  bool
	err  error
}

func (r *recorder) run(_ context.Context, args []string) error {
	r.ran, r.args = true, args
	return r.err
}

func helperWith(serve, gate *recorder) Helper {
	return Helper{Name: "lazaret-x", Usage: "a test helper", Commands: []Command{
		{Name: "serve", Usage: "serve one thing", ArgsUsage: "--a A [--b]", Run: serve.run},
		{Name: "gate", Usage: "the hidden gate", ArgsUsage: "--c C", Hidden: true, Run: gate.run},
	}}
}

func TestCommandLines(t *testing.T) {
	tests := []struct {
		name   string
		args   []string
		err    error
		code   int
		serve  []string // the serve command's arguments, nil: not run
		gate   bool
		stdout string // substring
		stderr string // exact
	}{
		{name: "serve with its hand-off, flags unparsed", args: []string{"serve", "--a", "x", "--unknown", "--", "-v"},
			serve: []string{"--a", "x", "--unknown", "--", "-v"}},
		{name: "serve without arguments", args: []string{"serve"}, serve: []string{}},
		{name: "hidden command runs", args: []string{"gate", "--c", "1"}, gate: true},
		{name: "version", args: []string{"--version"}, stdout: "lazaret-x version "},
		{name: "short version", args: []string{"-v"}, stdout: "lazaret-x version "},
		{name: "help lists visible commands", args: []string{"--help"}, stdout: "  serve  serve one thing\n"},
		{name: "command help", args: []string{"serve", "--help"}, stdout: "usage: lazaret-x serve --a A [--b]\n"},
		{name: "no command", args: nil, code: ExitUsage,
			stderr: "lazaret-x: usage: a command is needed (commands: serve) (see lazaret-x --help)\n"},
		{name: "unknown command", args: []string{"serf"}, code: ExitUsage,
			stderr: "lazaret-x: usage: unknown command \"serf\" (commands: serve) (see lazaret-x --help)\n"},
		{name: "error", args: []string{"serve"}, err: errors.New("reading config: boom"), code: 1,
			serve: []string{}, stderr: "lazaret-x: reading config: boom\n"},
		{name: "silent exit code", args: []string{"serve"}, err: &ExitError{Code: 7}, code: 7, serve: []string{}},
		{name: "wrapped exit code", args: []string{"serve"}, err: errors.Join(errors.New("x"), &ExitError{Code: 9}), code: 9, serve: []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			serve, gate := &recorder{err: tt.err}, &recorder{}
			var stdout, stderr bytes.Buffer
			code := helperWith(serve, gate).main(tt.args, &stdout, &stderr)
			if code != tt.code || stderr.String() != tt.stderr || !strings.Contains(stdout.String(), tt.stdout) {
				t.Fatalf("exit %d, stdout %q, stderr %q; want %d, %q, %q", code, stdout.String(), stderr.String(), tt.code, tt.stdout, tt.stderr)
			}
			if serve.ran != (tt.serve != nil) || (tt.serve != nil && !slices.Equal(serve.args, tt.serve)) {
				t.Errorf("serve ran %v with %q, want %q", serve.ran, serve.args, tt.serve)
			}
			if gate.ran != tt.gate {
				t.Errorf("gate ran %v, want %v", gate.ran, tt.gate)
			}
		})
	}
}

func TestHelpHidesHiddenCommands(t *testing.T) {
	var stdout bytes.Buffer
	helperWith(&recorder{}, &recorder{}).main([]string{"help"}, &stdout, &bytes.Buffer{})
	if strings.Contains(stdout.String(), "gate") || !strings.HasPrefix(stdout.String(), "lazaret-x - a test helper\n") {
		t.Fatalf("help %q", stdout.String())
	}
}

// TestHelperWithoutCommands: Run receives every argument but a lone
// --version or --help.
func TestHelperWithoutCommands(t *testing.T) {
	r := &recorder{}
	h := Helper{Name: "lazaret-y", Usage: "no commands", ArgsUsage: "--root DIR", Run: r.run}
	if code := h.main([]string{"--root", "/x", "--help"}, &bytes.Buffer{}, &bytes.Buffer{}); code != 0 || !slices.Equal(r.args, []string{"--root", "/x", "--help"}) {
		t.Fatalf("exit %d, run got %q", code, r.args)
	}
	var stdout bytes.Buffer
	r.ran = false
	if code := h.main([]string{"--help"}, &stdout, &bytes.Buffer{}); code != 0 || r.ran || !strings.Contains(stdout.String(), "usage: lazaret-y --root DIR\n") {
		t.Fatalf("--help: exit %d, ran %v, stdout %q", code, r.ran, stdout.String())
	}
}

func TestRuntimeSettings(t *testing.T) {
	procs := runtime.GOMAXPROCS(0)
	t.Cleanup(func() { runtime.GOMAXPROCS(procs) })
	env := func(set ...string) func(string) (string, bool) {
		return func(name string) (string, bool) { return "", slices.Contains(set, name) }
	}

	if err := (Runtime{MaxProcs: 1}).apply(env()); err != nil {
		t.Fatal(err)
	}
	if got := runtime.GOMAXPROCS(0); got != 1 {
		t.Errorf("GOMAXPROCS %d, want 1", got)
	}

	// The environment's GOMAXPROCS wins.
	runtime.GOMAXPROCS(procs)
	if err := (Runtime{MaxProcs: 1}).apply(env("GOMAXPROCS")); err != nil {
		t.Fatal(err)
	}
	if got := runtime.GOMAXPROCS(0); got != procs {
		t.Errorf("GOMAXPROCS %d with GOMAXPROCS set, want %d", got, procs)
	}

	// MaxProcs only lowers.
	runtime.GOMAXPROCS(1)
	if err := (Runtime{MaxProcs: 2}).apply(env()); err != nil {
		t.Fatal(err)
	}
	if got := runtime.GOMAXPROCS(0); got != 1 {
		t.Errorf("GOMAXPROCS raised to %d by MaxProcs 2", got)
	}

	if err := (Runtime{MaxProcs: -1}).apply(env()); err == nil {
		t.Error("a negative setting was accepted")
	}
}
