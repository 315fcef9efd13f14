package initready

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

func TestAnnounceGolden(t *testing.T) {
	var b bytes.Buffer
	if err := Announce(&b); err != nil {
		t.Fatal(err)
	}
	if got, want := b.String(), "lazaret-guest init: running\n"; got != want {
		t.Fatalf("Announce wrote %q, want %q", got, want)
	}
}

func TestWatch(t *testing.T) {
	long := strings.Repeat("x", maxLine+10)
	for _, tc := range []struct {
		name  string
		in    string
		ready bool
		lines []string
	}{
		{"alone", Line + "\n", true, []string{Line}},
		{"after runsc output", "runsc: warning\n" + Line + "\nlater\n", true, []string{"runsc: warning", Line, "later"}},
		{"crlf", Line + "\r\n", true, []string{Line}},
		{"twice", Line + "\n" + Line + "\n", true, []string{Line, Line}},
		{"unterminated", Line, false, []string{Line}},
		{"prefix", "x" + Line + "\n", false, []string{"x" + Line}},
		{"suffix", Line + " \n", false, []string{Line + " "}},
		{"empty", "", false, nil},
		{"long line then ready", long + "\n" + Line + "\n", true, []string{long[:maxLine], long[maxLine:], Line}},
		{"line tail of a long line", strings.Repeat("y", maxLine) + Line + "\n", false, []string{strings.Repeat("y", maxLine), Line}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var lines []string
			n := 0
			if err := Watch(strings.NewReader(tc.in), func(l string) { lines = append(lines, l) }, func() { n++ }); err != nil {
				t.Fatal(err)
			}
			if want := map[bool]int{true: 1, false: 0}[tc.ready]; n != want {
				t.Errorf("ready called %d times, want %d", n, want)
			}
			if len(lines) != len(tc.lines) {
				t.Fatalf("got %d lines, want %d", len(lines), len(tc.lines))
			}
			for i := range lines {
				if lines[i] != tc.lines[i] {
					t.Errorf("line %d = %.40q…, want %.40q…", i, lines[i], tc.lines[i])
				}
			}
		})
	}
}

func TestWatchReadError(t *testing.T) {
	boom := errors.New("boom")
	r := io.MultiReader(strings.NewReader(Line+"\n"), errReader{boom})
	n := 0
	if err := Watch(r, func(string) {}, func() { n++ }); !errors.Is(err, boom) {
		t.Fatalf("Watch = %v, want %v", err, boom)
	}
	if n != 1 {
		t.Fatalf("ready called %d times, want 1", n)
	}
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

func FuzzWatch(f *testing.F) {
	f.Add([]byte(Line + "\n"))
	f.Add([]byte("a\nb\r\n" + Line))
	f.Fuzz(func(t *testing.T, b []byte) {
		var got []string
		n := 0
		if err := Watch(bytes.NewReader(b), func(l string) { got = append(got, l) }, func() { n++ }); err != nil {
			t.Fatal(err)
		}
		if n > 1 {
			t.Fatalf("ready called %d times", n)
		}
		want := n == 1
		has := bytes.HasPrefix(b, []byte(Line+"\n")) || bytes.HasPrefix(b, []byte(Line+"\r\n")) ||
			bytes.Contains(b, []byte("\n"+Line+"\n")) || bytes.Contains(b, []byte("\n"+Line+"\r\n"))
		if len(b) <= maxLine && want != has {
			t.Fatalf("ready = %v for %q, want %v", want, b, has)
		}
	})
}
