package session

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestQuoteArgv(t *testing.T) {
	for _, tc := range []struct {
		name string
		argv []string
		want string
	}{
		{"bare", []string{"/usr/bin/git", "push", "--force-with-lease=main"}, "/usr/bin/git push --force-with-lease=main"},
		{"space and quote", []string{"/bin/echo", "it's here"}, `/bin/echo 'it'\''s here'`},
		{"empty", []string{"/bin/echo", ""}, `/bin/echo ''`},
		{"escape sequence", []string{"/bin/echo", "a\x1b[2Jb"}, `/bin/echo $'a\x1b[2Jb'`},
		{"invalid utf-8 and backslash", []string{"/bin/echo", "\xff\\'"}, `/bin/echo $'\xff\\\''`},
		{"bidi override", []string{"/bin/echo", "a\u202eb"}, `/bin/echo $'a\xe2\x80\xaeb'`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := QuoteArgv(tc.argv)
			if got != tc.want {
				t.Fatalf("QuoteArgv = %q, want %q", got, tc.want)
			}
			back, err := SplitArgv(got)
			if err != nil || !slices.Equal(back, tc.argv) {
				t.Fatalf("SplitArgv(%q) = %q, %v", got, back, err)
			}
		})
	}
}

func TestSplitArgv(t *testing.T) {
	for _, tc := range []struct {
		line string
		want []string
	}{
		{"/bin/echo  a\tb", []string{"/bin/echo", "a", "b"}},
		{`/bin/echo "a \"b\" \$x" c\ d`, []string{"/bin/echo", `a "b" $x`, "c d"}},
		{`/bin/echo $'x\ty\n' pre'fix'"post"`, []string{"/bin/echo", "x\ty\n", "prefixpost"}},
		{`/bin/echo $'\x41\x4a2'`, []string{"/bin/echo", "AJ2"}},
	} {
		t.Run(tc.line, func(t *testing.T) {
			got, err := SplitArgv(tc.line)
			if err != nil || !slices.Equal(got, tc.want) {
				t.Fatalf("SplitArgv = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestSplitArgvRefuses(t *testing.T) {
	for _, line := range []string{
		"", "   ", "/bin/echo 'open", `/bin/echo "open`, "/bin/echo $'open",
		"/bin/echo a | b", "/bin/echo $(id)", "/bin/echo `id`", "/bin/echo *", "/bin/echo ~",
		`/bin/echo "$HOME"`, `/bin/echo $'\q'`, `/bin/echo $'\x'`, `/bin/echo \`, "/bin/echo a\x01",
	} {
		t.Run(line, func(t *testing.T) {
			_, err := SplitArgv(line)
			var le *ArgvLineError
			if !errors.Is(err, ErrArgvLine) || !errors.As(err, &le) {
				t.Fatalf("SplitArgv(%q) error %v, want an ArgvLineError", line, err)
			}
		})
	}
}

func FuzzSplitArgv(f *testing.F) {
	for _, s := range []string{"/bin/echo a", `/bin/echo $'\x1b' "x\"" 'y'`, "a\\ b", "$'"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		argv, err := SplitArgv(line)
		if err != nil {
			return
		}
		if len(argv) == 0 {
			t.Fatalf("SplitArgv(%q) returned no words without an error", line)
		}
		line2 := QuoteArgv(argv)
		back, err := SplitArgv(line2)
		if err != nil || !slices.Equal(back, argv) {
			t.Fatalf("round trip of %q via %q: %q, %v", argv, line2, back, err)
		}
		for _, c := range []byte(line2) {
			if c < 0x20 || c == 0x7f {
				t.Fatalf("QuoteArgv(%q) = %q holds a control byte", argv, line2)
			}
		}
	})
}

func FuzzQuoteArgv(f *testing.F) {
	f.Add("/bin/echo", "a\x1b[2J")
	f.Add("", "\xff'\\")
	f.Fuzz(func(t *testing.T, a, b string) {
		argv := []string{a, b}
		line := QuoteArgv(argv)
		back, err := SplitArgv(line)
		if err != nil || !slices.Equal(back, argv) {
			t.Fatalf("round trip of %q via %q: %q, %v", argv, line, back, err)
		}
		if !utf8.ValidString(line) || strings.ContainsFunc(line, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			t.Fatalf("QuoteArgv(%q) = %q is not inert", argv, line)
		}
	})
}
