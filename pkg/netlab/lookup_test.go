package netlab

import (
	"net/netip"
	"testing"
)

func TestDynamicLookup(t *testing.T) {
	rrs, ok := lookup("198-19-0-10.ttl0.dyn.lab.test", nil)
	if !ok || len(rrs) != 1 || rrs[0].a != netip.MustParseAddr("198.19.0.10") || rrs[0].ttl != 0 {
		t.Fatalf("A record: %+v %v", rrs, ok)
	}
	rrs, ok = lookup("cname.10-1-2-3.ttl30.dyn.lab.test", nil)
	if !ok || len(rrs) != 2 || rrs[0].cname != "10-1-2-3.ttl30.dyn.lab.test" || rrs[1].ttl != 30 {
		t.Fatalf("CNAME: %+v %v", rrs, ok)
	}
	for _, bad := range []string{"x.dyn.lab.test", "1-2-3.ttl5.dyn.lab.test", "1-2-3-4.ttlx.dyn.lab.test", "cname.nothing.dyn.lab.test", "other.test"} {
		if _, ok := lookup(bad, nil); ok {
			t.Errorf("lookup(%q) answered", bad)
		}
	}
	if rrs, ok := lookup("example.com", map[string][]netip.Addr{"example.com": {netip.MustParseAddr("198.51.100.80")}}); !ok || rrs[0].ttl != 60 {
		t.Fatalf("table: %+v", rrs)
	}
}

func TestDynamicName(t *testing.T) {
	if got := DynamicName(InternetNamed[1], 60); got != "198-19-0-11.ttl60.dyn.lab.test" {
		t.Fatalf("DynamicName = %q", got)
	}
	rrs, ok := lookup(DynamicName(InternetNamed[2], 0), nil)
	if !ok || rrs[0].a != netip.MustParseAddr("198.19.0.12") {
		t.Fatalf("lookup: %+v %v", rrs, ok)
	}
}
