package session

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"lazaret.dev/pkg/control"
	"lazaret.dev/pkg/netpolicy"
	"lazaret.dev/pkg/netsidecar"
)

// TestNameStatus: the name rules, the pins still held with their time left
// and the recent refusals reach status, every sandbox name escaped.
func TestNameStatus(t *testing.T) {
	dir := t.TempDir()
	pol, err := netpolicy.DeriveV2(nil, netpolicy.RFC1918, nil, []string{"*.example.net"}, []string{"bad.example.net"}, netip.MustParseAddr("198.51.100.53"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := control.OpenNameLog(dir)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	l := netsidecar.NewNameLog(f, 0, nil)
	for _, r := range []netsidecar.NameLogRecord{
		{Time: now.Add(-time.Minute), Kind: "pinned", Name: "old.example.net", Addresses: []netip.Addr{netip.MustParseAddr("198.19.0.1")}, TTLMillis: 10000},
		{Time: now, Kind: "pinned", Name: "cdn.example.net", Addresses: []netip.Addr{netip.MustParseAddr("198.19.0.2")}, TTLMillis: 30000},
		{Time: now, Kind: "refused", Name: "\x1b[1mevil.test", Reason: "name not allowed\x1b"},
	} {
		if err := l.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	f.Close()
	n := &NetworkStatus{}
	nameStatus(n, pol, dir, now, RecentRefusals)
	if strings.Join(n.AllowHosts, ",") != "*.example.net" || strings.Join(n.DenyHosts, ",") != "bad.example.net" || n.NameUpstream != "198.51.100.53" {
		t.Fatalf("rules %+v", n)
	}
	if len(n.Pins) != 1 || n.Pins[0].Address != "198.19.0.2" || n.Pins[0].RemainingSeconds < 29 || n.Pins[0].Names[0] != "cdn.example.net" {
		t.Fatalf("pins %+v", n.Pins)
	}
	if len(n.Refusals) != 1 || n.Refusals[0].Name != `\x1b\x5b1mevil.test` || strings.ContainsRune(n.Refusals[0].Reason, 0x1b) {
		t.Fatalf("refusals %+v", n.Refusals)
	}
	v1 := &NetworkStatus{}
	p1, _ := netpolicy.Derive(nil, netpolicy.RFC1918, []netip.Addr{netip.MustParseAddr("198.51.100.53")})
	nameStatus(v1, p1, dir, now, RecentRefusals)
	if v1.AllowHosts != nil || v1.Pins != nil || v1.NameLog != "" {
		t.Fatalf("a v1 policy shows names: %+v", v1)
	}
}
