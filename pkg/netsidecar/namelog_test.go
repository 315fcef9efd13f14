package netsidecar

import (
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestNameLogStartsOverWithSnapshot(t *testing.T) {
	path := filepath.Join(t.TempDir(), "names.log")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	now := time.Now()
	held := netip.MustParseAddr("198.51.100.7")
	l := NewNameLog(f, 1200, func() []NamePin { return []NamePin{{Address: held, Expires: now.Add(time.Minute)}} })
	write := func(r NameLogRecord) {
		t.Helper()
		if err := l.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	write(NameLogRecord{Time: now, Kind: "pinned", Name: "api.example.com", Addresses: []netip.Addr{netip.MustParseAddr("198.51.100.9")}, TTLMillis: 30000})
	for range 20 {
		write(NameLogRecord{Time: now, Kind: "refused", Name: "x\x1b[31m.example.org", Reason: "no allow_hosts pattern matches"})
	}
	st, _ := os.Stat(path)
	if st.Size() > 1200 {
		t.Fatalf("log grew to %d bytes past its limit", st.Size())
	}
	sum, err := ReadNameLog(path, now, 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(sum.Pins) != 1 || sum.Pins[0].Address != held {
		t.Fatalf("pins after starting over = %+v, want the snapshot's", sum.Pins)
	}
	if len(sum.Refusals) != 3 || sum.Refusals[2].Name != "x\x1b[31m.example.org" {
		t.Fatalf("refusals = %+v", sum.Refusals)
	}
	later, err := ReadNameLog(path, now.Add(2*time.Minute), 3)
	if err != nil || len(later.Pins) != 0 {
		t.Fatalf("expired pins still listed: %+v %v", later.Pins, err)
	}
	if missing, err := ReadNameLog(filepath.Join(t.TempDir(), "none"), now, 3); err != nil || missing.Records != 0 {
		t.Fatalf("missing log: %+v %v", missing, err)
	}
}
