package isolation

import (
	"bytes"
	"strings"
	"testing"
)

// FuzzParseKeep checks that whatever ParseKeep accepts encodes back to the
// same bytes (the layout is canonical).
func FuzzParseKeep(f *testing.F) {
	f.Add([]byte(keepHeader + ".env\x00build/\x00"))
	f.Add([]byte(keepHeader))
	f.Add([]byte(keepHeader + "a\x00a/\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ParseKeep(data)
		if err != nil {
			return
		}
		if got := EncodeKeep(s); !bytes.Equal(got, data) {
			t.Fatalf("ParseKeep accepted %q, which encodes back as %q", data, got)
		}
	})
}

// FuzzParseReport checks the same of reports.
func FuzzParseReport(f *testing.F) {
	f.Add([]byte(reportHeader + "k.env\x00ibuild/\x00"))
	f.Add([]byte(reportHeader + "x\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		rs, err := ParseReport(data)
		if err != nil {
			return
		}
		got, err := EncodeReport(rs)
		if err != nil {
			t.Fatalf("ParseReport accepted %q, which does not encode: %v", data, err)
		}
		if !bytes.Equal(got, data) {
			t.Fatalf("ParseReport accepted %q, which encodes back as %q", data, got)
		}
	})
}

// FuzzCovers checks Set.Covers against its definition: p equals an
// entry's path or lies below it.
func FuzzCovers(f *testing.F) {
	f.Add(".env", "build", ".env/x")
	f.Add("a/b", "a", "a/bc")
	f.Fuzz(func(t *testing.T, a, b, p string) {
		var entries []Entry
		for _, e := range []string{a, b} {
			if CheckPath(e) == nil && (len(entries) == 0 || entries[0].Path != e) {
				entries = append(entries, Entry{Path: e})
			}
		}
		s, err := NewSet(entries)
		if err != nil {
			t.Fatalf("NewSet(%q): %v", entries, err)
		}
		want := false
		for _, e := range entries {
			want = want || p == e.Path || strings.HasPrefix(p, e.Path+"/")
		}
		if got := s.Covers(p); got != want {
			t.Fatalf("Covers(%q) with %q = %v, want %v", p, entries, got, want)
		}
		if got := (Keep{Inner: fakeClassifier{}, Set: s}).Ignored(p, false); got != want {
			t.Fatalf("Keep.Ignored(%q) with %q = %v, want %v", p, entries, got, want)
		}
	})
}
