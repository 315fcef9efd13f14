package netpath_test

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"lazaret.dev/pkg/netpath"
	"lazaret.dev/pkg/netpolicy"
	"lazaret.dev/pkg/nftplan"
)

// TestDeniedEvidence: a denied target is proven unreachable only by its
// probe rule's counter with no completed handshake; the socket's error
// alone proves nothing, since a reset from the probe rule and one from a
// host behind the path look alike.
func TestDeniedEvidence(t *testing.T) {
	tests := []struct {
		outcome     netpath.Outcome
		refusals    uint64
		unreachable bool
		err         error
		detail      string
	}{
		{netpath.Refused, 1, true, nil, ""},
		{netpath.Refused, 2, true, nil, ""}, // a retransmitted SYN, refused again
		{netpath.TimedOut, 1, true, nil, ""},
		{netpath.NoRoute, 1, true, nil, ""},
		{netpath.Connected, 1, false, netpath.ErrReachable, "handshake completed"},
		{netpath.Connected, 0, false, netpath.ErrReachable, "handshake completed"},
		{netpath.Refused, 0, false, netpath.ErrReachable, "refused by a host behind the enforcement path"},
		{netpath.TimedOut, 0, false, netpath.ErrNotRefused, "timed out; its deny rule counted no SYN"},
		{netpath.NoRoute, 0, false, netpath.ErrNotRefused, "no route; its deny rule counted no SYN"},
	}
	dst := netpolicy.Destination{Address: a("198.19.0.1"), Port: 443}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%v/%d", tc.outcome, tc.refusals), func(t *testing.T) {
			ev := netpath.DeniedEvidence{
				Probe:   nftplan.DeniedProbe{Source: ap("10.255.255.2:20000"), Destination: ap("198.19.0.1:443")},
				Outcome: tc.outcome, Refusals: tc.refusals,
			}
			if got := ev.Unreachable(); got != tc.unreachable {
				t.Fatalf("Unreachable() = %v, want %v", got, tc.unreachable)
			}
			obs := &netpath.Observations{
				Denied:    []netpolicy.DeniedDestinationObservation{{Destination: dst, Unreachable: ev.Unreachable()}},
				Permitted: []netpolicy.PermittedDestinationObservation{{Destination: netpolicy.Destination{Address: a("198.51.100.1"), Port: 443}, Reachable: true}},
				DNS:       []netpolicy.DNSObservation{{Resolver: a("198.51.100.53"), QueryName: "example.com", ResolvedAddresses: []netip.Addr{a("198.51.100.80")}}},
				Evidence:  map[netpolicy.Destination]netpath.DeniedEvidence{dst: ev},
			}
			err := obs.Check()
			if tc.err == nil {
				if err != nil {
					t.Fatalf("Check = %v", err)
				}
				return
			}
			var te *netpolicy.TargetError
			if !errors.As(err, &te) || te.Kind != netpolicy.TargetDenied || te.Target != "198.19.0.1:443" ||
				!errors.Is(err, tc.err) || !strings.Contains(te.Detail, tc.detail) {
				t.Fatalf("Check = %v; want a denied-target error naming 198.19.0.1:443: %v (%s)", err, tc.err, tc.detail)
			}
		})
	}
}

// TestPermittedOutcome: a permitted target is reachable when a host behind
// the path completed or refused the handshake; silence or a local routing
// failure fails it, naming it.
func TestPermittedOutcome(t *testing.T) {
	dst := netpolicy.Destination{Address: a("198.51.100.37"), Port: 443}
	for _, o := range []netpath.Outcome{netpath.Connected, netpath.Refused, netpath.TimedOut, netpath.NoRoute} {
		obs := &netpath.Observations{
			Permitted: []netpolicy.PermittedDestinationObservation{{Destination: dst, Reachable: o.Reachable()}},
			Outcomes:  map[netpolicy.Destination]netpath.Outcome{dst: o},
		}
		err := obs.Check()
		if o.Reachable() != (o == netpath.Connected || o == netpath.Refused) {
			t.Fatalf("%v: Reachable() = %v", o, o.Reachable())
		}
		if o.Reachable() {
			if err != nil {
				t.Fatalf("%v: Check = %v", o, err)
			}
			continue
		}
		if !errors.Is(err, netpath.ErrUnreachable) || !strings.Contains(err.Error(), "readiness permitted target 198.51.100.37:443") ||
			!strings.Contains(err.Error(), o.String()) {
			t.Fatalf("%v: Check = %v", o, err)
		}
	}
}
