package isolation

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func TestCheckPath(t *testing.T) {
	for _, tc := range []struct {
		path string
		ok   bool
	}{
		{".env", true},
		{"a/b/c", true},
		{"new\nline", true},
		{"\xff\xfe", true},
		{".gitignore", true},
		{".github/x", true},
		{"", false},
		{"/abs", false},
		{"a/", false},
		{"a//b", false},
		{"./a", false},
		{"a/../b", false},
		{"..", false},
		{".git", false},
		{".git/config", false},
		{"a\x00b", false},
		{strings.Repeat("a", MaxPathLen), true},
		{strings.Repeat("a", MaxPathLen+1), false},
	} {
		err := CheckPath(tc.path)
		if (err == nil) != tc.ok {
			t.Errorf("CheckPath(%q) = %v, want ok %v", tc.path, err, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrPath) {
			t.Errorf("CheckPath(%q) = %v, not ErrPath", tc.path, err)
		}
	}
}

type fakeClassifier map[string]bool

func (f fakeClassifier) Ignored(p string, _ bool) bool { return f[p] }

func TestKeep(t *testing.T) {
	set, err := NewSet([]Entry{{Path: ".env"}, {Path: "secrets", Dir: true}, {Path: "a/b"}})
	if err != nil {
		t.Fatal(err)
	}
	k := Keep{Inner: fakeClassifier{"build": true}, Set: set}
	for _, tc := range []struct {
		path  string
		isDir bool
		want  bool
	}{
		{".env", false, true},
		{".env", true, true}, // a kept file that became a directory
		{".env/x", false, true},
		{".envrc", false, false},
		{".en", false, false},
		{"secrets", true, true},
		{"secrets/key", false, true},
		{"secretsx", false, false},
		{"a", true, false},
		{"a/b", false, true},
		{"a/b/c/d", false, true},
		{"a/bc", false, false},
		{"build", true, true}, // the inner classifier's answer
		{"src", true, false},
	} {
		if got := k.Ignored(tc.path, tc.isDir); got != tc.want {
			t.Errorf("Ignored(%q, %v) = %v, want %v", tc.path, tc.isDir, got, tc.want)
		}
	}
	if (Keep{Inner: fakeClassifier{}, Set: nil}).Ignored(".env", false) {
		t.Error("a nil set keeps .env")
	}
}

func TestSetUnionWithout(t *testing.T) {
	s, err := NewSet([]Entry{{Path: "b"}, {Path: "a", Dir: true}})
	if err != nil {
		t.Fatal(err)
	}
	u, err := s.Union([]Entry{{Path: "c"}, {Path: "b", Dir: true}})
	if err != nil {
		t.Fatal(err)
	}
	if got := entriesString(u.Entries()); got != "a/ b/ c" {
		t.Errorf("union = %q", got)
	}
	w, removed, err := u.Without([]string{"b", "a"})
	if err != nil {
		t.Fatal(err)
	}
	if got := entriesString(w.Entries()); got != "c" {
		t.Errorf("without = %q", got)
	}
	if got := entriesString(removed); got != "a/ b/" {
		t.Errorf("removed = %q", got)
	}
	if _, _, err := u.Without([]string{"c", "nope"}); !errors.Is(err, ErrNotKept) || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("releasing an unknown path: %v", err)
	}
	if _, err := NewSet([]Entry{{Path: "x"}, {Path: "x", Dir: true}}); !errors.Is(err, ErrPath) {
		t.Errorf("duplicate path: %v", err)
	}
	if _, err := NewSet([]Entry{{Path: ".git/index"}}); !errors.Is(err, ErrPath) {
		t.Errorf("path inside .git: %v", err)
	}
}

func entriesString(es []Entry) string {
	var s []string
	for _, e := range es {
		s = append(s, e.String())
	}
	return strings.Join(s, " ")
}

func TestKeepFileGolden(t *testing.T) {
	s, err := NewSet([]Entry{{Path: "nl\nname"}, {Path: ".env"}, {Path: "build", Dir: true}})
	if err != nil {
		t.Fatal(err)
	}
	want := []byte("lazaret-keep-isolated-v1\n.env\x00build/\x00nl\nname\x00")
	got := EncodeKeep(s)
	if !bytes.Equal(got, want) {
		t.Fatalf("EncodeKeep = %q, want %q", got, want)
	}
	back, err := ParseKeep(got)
	if err != nil {
		t.Fatal(err)
	}
	if entriesString(back.Entries()) != entriesString(s.Entries()) {
		t.Errorf("round trip = %v", back.Entries())
	}
	if empty := EncodeKeep(nil); string(empty) != keepHeader {
		t.Errorf("empty keep file = %q", empty)
	}
}

func TestReportGolden(t *testing.T) {
	rs := []Reported{
		{Entry: Entry{Path: ".env"}, Reason: Kept},
		{Entry: Entry{Path: "build", Dir: true}, Reason: Ignored},
	}
	want := []byte("lazaret-isolation-report-v1\nk.env\x00ibuild/\x00")
	got, err := EncodeReport(rs)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("EncodeReport = %q, want %q", got, want)
	}
	back, err := ParseReport(got)
	if err != nil {
		t.Fatal(err)
	}
	if len(back) != 2 || back[0] != rs[0] || back[1] != rs[1] {
		t.Errorf("round trip = %+v", back)
	}
	if _, err := EncodeReport([]Reported{rs[1], rs[0]}); !errors.Is(err, ErrFormat) {
		t.Errorf("out of order: %v", err)
	}
}

func TestParseRejects(t *testing.T) {
	for _, tc := range []struct {
		name, data string
		report     bool
	}{
		{"no header", ".env\x00", false},
		{"report header in a keep file", reportHeader, false},
		{"unterminated record", keepHeader + ".env", false},
		{"empty record", keepHeader + "\x00", false},
		{"bare slash", keepHeader + "/\x00", false},
		{"double slash dir", keepHeader + "a//\x00", false},
		{"duplicate", keepHeader + "a\x00a\x00", false},
		{"duplicate with kinds", keepHeader + "a\x00a/\x00", false},
		{"out of order", keepHeader + "b\x00a\x00", false},
		{"dot dot", keepHeader + "../x\x00", false},
		{"absolute", keepHeader + "/etc/passwd\x00", false},
		{"git dir", keepHeader + ".git/\x00", false},
		{"unknown reason", reportHeader + "x.env\x00", true},
		{"reason without path", reportHeader + "i\x00", true},
		{"empty report record", reportHeader + "\x00", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			if tc.report {
				_, err = ParseReport([]byte(tc.data))
			} else {
				_, err = ParseKeep([]byte(tc.data))
			}
			if !errors.Is(err, ErrFormat) && !errors.Is(err, ErrPath) {
				t.Errorf("parsing %q: %v, want a format error", tc.data, err)
			}
		})
	}
	big := make([]byte, MaxFileSize+1)
	copy(big, keepHeader)
	if _, err := ParseKeep(big); !errors.Is(err, ErrTooMany) {
		t.Errorf("oversized keep file: %v", err)
	}
}
