package trace

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRecordAndRead(t *testing.T) {
	p := Path(t.TempDir(), "d0")
	for round := range 2 { // a second coordinator appends to the same file
		r, err := Open(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Record(Event{Action: "StartNewDomain", Session: "s" + string(rune('0'+round))}); err != nil {
			t.Fatal(err)
		}
		if err := r.Record(Event{Action: "ReceiveEscalation", Session: "s", Request: "r", Facts: map[string]string{FactShell: "false"}}); err != nil {
			t.Fatal(err)
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
	}
	evs, err := Read(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 4 || evs[2].Session != "s1" || evs[3].Facts[FactShell] != "false" || evs[0].PID != os.Getpid() || evs[0].Time.IsZero() {
		t.Fatalf("read %+v", evs)
	}
	if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("trace mode: %v %v", fi.Mode(), err)
	}
}

func TestNilRecorderRecordsNothing(t *testing.T) {
	var r *Recorder
	if err := r.Record(Event{Action: "X"}); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestDecodeRefusesMalformedLines(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"action":"A"}` + "\n" + `{"action":"B","extra":1}`, "line 2"},
		{`{"session":"s"}`, "line 1: no action"},
		{`not json`, "line 1"},
	} {
		_, err := Decode(strings.NewReader(c.in))
		if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Decode(%q) = %v, want ErrFormat naming %q", c.in, err, c.want)
		}
	}
}

func TestOpenRefusesASymlink(t *testing.T) {
	dir := t.TempDir()
	if err := os.Symlink(filepath.Join(dir, "elsewhere"), Path(dir, "d0")); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(Path(dir, "d0")); err == nil {
		t.Fatal("Open followed a symlink")
	}
}
