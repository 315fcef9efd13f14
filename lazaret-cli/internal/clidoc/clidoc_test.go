package clidoc

import (
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

func TestEscape(t *testing.T) {
	tests := []struct{ in, want string }{
		{"--storage-root", `\-\-storage\-root`},
		{`a\b`, `a\eb`},
		{".starts with a dot\n'and a quote", "\\&.starts with a dot\n\\&'and a quote"},
	}
	for _, tt := range tests {
		if got := escape(tt.in); got != tt.want {
			t.Errorf("escape(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestDescribe(t *testing.T) {
	if got, want := describe("a:b", "it's\nsecond line"), `'a\:b:it'\''s'`; got != want {
		t.Errorf("describe = %s, want %s", got, want)
	}
}

// TestUnsafeNamesLeftOut: a name a script would have to quote is not
// written into it.
func TestUnsafeNamesLeftOut(t *testing.T) {
	app := &cli.App{Name: "prog", Commands: []*cli.Command{
		{Name: "ok", Flags: []cli.Flag{&cli.StringFlag{Name: "file", Usage: "read `FILE`"}}, Action: func(*cli.Context) error { return nil }},
		{Name: "bad$(touch x)", Action: func(*cli.Context) error { return nil }},
		{Name: "hidden", Hidden: true},
	}}
	for _, s := range []string{Bash(app), Zsh(app)} {
		if strings.Contains(s, "touch") || strings.Contains(s, "hidden") {
			t.Errorf("script holds an unsafe or hidden name:\n%s", s)
		}
		if !strings.Contains(s, `"/ok") cmdpath="/ok"`) || !strings.Contains(s, "--file") {
			t.Errorf("script lacks the command ok or its flag:\n%s", s)
		}
	}
	if _, err := Script(app, "tcsh"); err == nil || !strings.Contains(err.Error(), "bash, zsh, fish") {
		t.Errorf("Script(tcsh) = %v", err)
	}
}

func TestTakesFile(t *testing.T) {
	for _, tt := range []struct {
		f    cli.Flag
		want bool
	}{
		{&cli.StringFlag{Name: "a", Usage: "read `FILE`"}, true},
		{&cli.StringFlag{Name: "b", Usage: "in `DIR`"}, true},
		{&cli.StringFlag{Name: "c", TakesFile: true}, true},
		{&cli.StringFlag{Name: "d", Usage: "profile `NAME`"}, false},
		{&cli.BoolFlag{Name: "e"}, false},
	} {
		if got := takesFile(tt.f); got != tt.want {
			t.Errorf("takesFile(%s) = %v", tt.f.Names()[0], got)
		}
	}
}
