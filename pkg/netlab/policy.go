package netlab

import (
	"net/netip"
	"testing"

	"lazaret.dev/pkg/netpolicy"
)

// Policy is the network policy the lab tests enforce: it allows two
// TEST-NET ranges, one host inside RFC 1918 and TEST-NET-1, denies the
// upper half of TEST-NET-3 and RFC 1918, and names 192.0.2.53 as the only
// resolver.
func Policy(t testing.TB) *netpolicy.DerivedNetworkPolicy {
	t.Helper()
	p := netip.MustParsePrefix
	pol, err := netpolicy.Derive(
		[]netip.Prefix{p("198.51.100.0/24"), p("203.0.113.0/24"), p("10.1.2.3/32"), p("192.0.2.0/24")},
		append([]netip.Prefix{p("203.0.113.128/25")}, netpolicy.RFC1918...),
		[]netip.Addr{netip.MustParseAddr("192.0.2.53")})
	if err != nil {
		t.Fatal(err)
	}
	return pol
}
