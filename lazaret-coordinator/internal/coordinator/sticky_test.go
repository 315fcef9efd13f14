package coordinator

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"lazaret.dev/pkg/isolation"
	"lazaret.dev/pkg/startup"
)

func TestReportKept(t *testing.T) {
	var entries []isolation.Entry
	entries = append(entries, isolation.Entry{Path: ".env"}, isolation.Entry{Path: "nl\nname\xff"}, isolation.Entry{Path: "build", Dir: true})
	entries = append(entries, isolation.Entry{Path: strings.Repeat("x", 4088) + "\x01"}) // too long once quoted
	for i := 0; i < 40; i++ {
		entries = append(entries, isolation.Entry{Path: fmt.Sprintf("f%02d", i)})
	}
	p := filepath.Join(t.TempDir(), "report")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	r := newReport(f)
	r.kept(entries)
	r.ready()
	r.kept(entries[:1]) // after ready: nothing
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) != startup.MaxKept+2 {
		t.Fatalf("%d lines, want %d kept, kept-more and ready:\n%s", len(lines), startup.MaxKept, b)
	}
	for i, want := range []string{`kept ".env"`, `kept "nl\nname\xff"`, `kept "build/"`, `kept "f00"`} {
		if lines[i] != want {
			t.Errorf("line %d = %q, want %q", i, lines[i], want)
		}
	}
	// 44 entries: 32 named, the long one and 11 more counted.
	if got := lines[startup.MaxKept]; got != "kept-more 12" {
		t.Errorf("count line = %q, want kept-more 12", got)
	}
	if lines[len(lines)-1] != "ready" {
		t.Errorf("last line = %q", lines[len(lines)-1])
	}
}
