package cmdmain

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

func TestRunExitCodes(t *testing.T) {
	cases := []struct {
		name     string
		action   error
		wantCode int
		wantErr  string
	}{
		{"ok", nil, 0, ""},
		{"plain error", errors.New("reading config: boom"), 1, "lazaret-x: reading config: boom\n"},
		{"silent exit", &ExitError{Code: 7}, 7, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			app := &cli.App{Name: "lazaret-x", Action: func(*cli.Context) error { return tc.action }}
			var stderr bytes.Buffer
			if got := run(app, []string{"lazaret-x"}, &stderr); got != tc.wantCode {
				t.Errorf("exit code = %d, want %d", got, tc.wantCode)
			}
			if stderr.String() != tc.wantErr {
				t.Errorf("stderr = %q, want %q", stderr.String(), tc.wantErr)
			}
			stderr.Reset()
			if got := exitCode("lazaret-x", tc.action, &stderr); got != tc.wantCode || stderr.String() != tc.wantErr {
				t.Errorf("a tool's exit: code %d, stderr %q; want what the app gave", got, stderr.String())
			}
		})
	}
}

func TestVersionFlag(t *testing.T) {
	var out bytes.Buffer
	app := &cli.App{Name: "lazaret-x", Writer: &out, Action: func(*cli.Context) error { return errors.New("action ran") }}
	if got := run(app, []string{"lazaret-x", "--version"}, &bytes.Buffer{}); got != 0 {
		t.Fatalf("--version exit code = %d", got)
	}
	if !strings.HasPrefix(out.String(), "lazaret-x version ") {
		t.Fatalf("--version printed %q", out.String())
	}
}

// TestHandoffLeavesArgsToTheLayout: flags after a hand-off subcommand
// reach its run unparsed, in order, even ones urfave would reject.
func TestHandoffLeavesArgsToTheLayout(t *testing.T) {
	var got []string
	app := &cli.App{Name: "lazaret-x", Commands: []*cli.Command{
		Handoff("serve", "serve", "--a A [--b]", func(_ context.Context, args []string) error {
			got = args
			return nil
		}),
	}}
	args := []string{"--a", "x", "--unknown", "--", "-v"}
	if code := run(app, append([]string{"lazaret-x", "serve"}, args...), &bytes.Buffer{}); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	if !slices.Equal(got, args) {
		t.Fatalf("run got %q, want %q", got, args)
	}
}
