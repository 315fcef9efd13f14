package netpath_test

import (
	"net/netip"
	"testing"
	"time"

	"lazaret.dev/pkg/netlab"
	"lazaret.dev/pkg/netpath"
	"lazaret.dev/pkg/netpolicy"
)

// labPolicyV2 is the lab policy with names: the same prefixes, one allowed
// name, upstream 192.0.2.53.
func labPolicyV2(t testing.TB) *netpolicy.DerivedNetworkPolicy {
	t.Helper()
	pol := netlab.Policy(t)
	pol.SchemaID = netpolicy.PolicySchemaIDV2
	pol.NameRules = []netpolicy.NameRule{{Pattern: "svc.lab.test", Action: netpolicy.Allow}}
	pol.NameUpstream = a("192.0.2.53")
	if err := pol.Validate(); err != nil {
		t.Fatal(err)
	}
	return pol
}

// TestPinnedAddressOpensAndExpires: in a real kernel, an address no prefix
// allows is unreachable until it is pinned, reachable while the pin lasts,
// and unreachable again when the kernel's timeout ends it; a pinned
// address that a Deny prefix covers stays unreachable; the ruleset still
// verifies with pins in it.
func TestPinnedAddressOpensAndExpires(t *testing.T) {
	if !netlab.Enter(t) {
		return
	}
	pinnedHost := a("198.19.7.7")
	path := buildLabWith(t, labPolicyV2(t), pinnedHost)
	pinner, err := netpath.NewPinner(path.Enforcement, path.Plan)
	if err != nil {
		t.Fatal(err)
	}
	dst := netip.AddrPortFrom(pinnedHost, 80)
	if got := netlab.Dial(t, path.Sandbox, dst, 500*time.Millisecond); got != netpath.TimedOut {
		t.Fatalf("before the pin: %v, want timed out", got)
	}
	if err := pinner.Pin([]netip.Addr{pinnedHost, a("203.0.113.200"), a("10.9.9.9")}, 1500*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if err := netpath.VerifyRuleset(path.Enforcement, path.Plan); err != nil {
		t.Fatalf("ruleset with pins: %v", err)
	}
	pins, err := pinner.Pins()
	if err != nil || len(pins) != 3 {
		t.Fatalf("Pins = %v, %v; want three", pins, err)
	}
	if got := netlab.Dial(t, path.Sandbox, dst, time.Second); got != netpath.Connected {
		t.Fatalf("while pinned: %v, want connected", got)
	}
	for _, denied := range []string{"203.0.113.200:80", "10.9.9.9:80"} {
		if got := netlab.Dial(t, path.Sandbox, ap(denied), 500*time.Millisecond); got != netpath.TimedOut {
			t.Errorf("pinned but denied by prefix %s: %v, want timed out", denied, got)
		}
	}
	// A shorter pin never shortens a longer one.
	if err := pinner.Pin([]netip.Addr{pinnedHost}, 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if got := netlab.Dial(t, path.Sandbox, dst, time.Second); got != netpath.Connected {
		t.Fatalf("after a shorter re-pin: %v, want connected", got)
	}
	time.Sleep(1600 * time.Millisecond)
	if got := netlab.Dial(t, path.Sandbox, dst, 500*time.Millisecond); got != netpath.TimedOut {
		t.Fatalf("after the pin expired: %v, want timed out", got)
	}
	if pins, err := pinner.Pins(); err != nil || len(pins) != 0 {
		t.Fatalf("Pins after expiry = %v, %v", pins, err)
	}
}
