package cli

import (
	"bytes"
	"strings"
	"testing"

	"lazaret.dev/lazaret-cli/internal/session"
)

func TestReleasePath(t *testing.T) {
	for _, tc := range []struct {
		arg, want, err string
	}{
		{arg: ".env", want: ".env"},
		{arg: "build/", want: "build"},
		{arg: "/home/u/ws/a/b", want: "a/b"},
		{arg: "/home/u/other/x", err: "not inside the workspace"},
		{arg: "/home/u/ws", err: `"." component`},
		{arg: "../x", err: `".." component`},
		{arg: ".git/config", err: "inside .git"},
		{arg: "a//b", err: "empty component"},
	} {
		got, err := releasePath("/home/u/ws", tc.arg)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), tc.arg) {
				t.Errorf("releasePath(%q) = %q, %v; want an error naming it with %q", tc.arg, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("releasePath(%q) = %q, %v; want %q", tc.arg, got, err, tc.want)
		}
	}
}

func TestPrintKept(t *testing.T) {
	var b bytes.Buffer
	printKept(&b, &session.Target{Profile: "dev"}, session.KeptPaths{Paths: []string{".env", "nl\nname", "build/"}, More: 2})
	out := b.String()
	for _, want := range []string{
		"kept isolated from the sandbox",
		"\n  .env\n",
		"\n  \"nl\\nname\"\n",
		"\n  build/\n",
		"... and 2 more (lazaret-cli workspace isolated --profile dev)",
		"lazaret-cli workspace release --profile dev PATH",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("printKept output lacks %q:\n%s", want, out)
		}
	}
}
