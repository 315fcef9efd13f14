package netpath_test

import (
	"context"
	"net"
	"net/netip"
	"testing"
	"time"

	"lazaret.dev/pkg/netlab"
	"lazaret.dev/pkg/netpath"
	"lazaret.dev/pkg/netpolicy"
	"lazaret.dev/pkg/pinresolver"
	"lazaret.dev/pkg/testgate"
)

// labPolicyV2 is the lab policy with names: the same prefixes, the test
// resolvers' dynamic zone and one more name allowed, upstream 192.0.2.53.
func labPolicyV2(t testing.TB) *netpolicy.DerivedNetworkPolicy {
	t.Helper()
	pol := netlab.Policy(t)
	pol.SchemaID = netpolicy.PolicySchemaIDV2
	pol.NameRules = []netpolicy.NameRule{{Pattern: "*." + netlab.DynamicSuffix, Action: netpolicy.Allow}, {Pattern: "svc.lab.test", Action: netpolicy.Allow}}
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

// BenchmarkPin1000 pins 1,000 fresh addresses in one batch per
// iteration: the nftables cost of a resolver answer, or of many, at that
// scale. The set is emptied (by new addresses expiring) between rounds by
// using a different block each time.
func BenchmarkPin1000(b *testing.B) {
	if !netlab.Inside() {
		testgate.Root(b)
	}
	path := buildLabWith(b, labPolicyV2(b))
	pinner, err := netpath.NewPinner(path.Enforcement, path.Plan)
	if err != nil {
		b.Fatal(err)
	}
	round := 0
	for b.Loop() {
		addrs := make([]netip.Addr, 1000)
		for i := range addrs {
			addrs[i] = netip.AddrFrom4([4]byte{100, byte(64 + round%64), byte(i >> 8), byte(i)})
		}
		round++
		if err := pinner.Pin(addrs, 2*time.Second); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPinOne pins one address per call, as the resolver does for a
// name with one A record, with 1,000 other pins held.
func BenchmarkPinOne(b *testing.B) {
	if !netlab.Inside() {
		testgate.Root(b)
	}
	path := buildLabWith(b, labPolicyV2(b))
	pinner, err := netpath.NewPinner(path.Enforcement, path.Plan)
	if err != nil {
		b.Fatal(err)
	}
	held := make([]netip.Addr, 1000)
	for i := range held {
		held[i] = netip.AddrFrom4([4]byte{100, 70, byte(i >> 8), byte(i)})
	}
	if err := pinner.Pin(held, time.Minute); err != nil {
		b.Fatal(err)
	}
	i := 0
	for b.Loop() {
		i++
		if err := pinner.Pin([]netip.Addr{netip.AddrFrom4([4]byte{100, 71, byte(i >> 8), byte(i)})}, time.Minute); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkConnect compares TCP connection setup from the sandbox to a
// pinned address (accepted by the pinned set, after the Deny interval set)
// with setup to an address an allow prefix admits, through the same path.
func BenchmarkConnect(b *testing.B) {
	if !netlab.Inside() {
		testgate.Root(b)
	}
	pinnedHost := a("198.19.7.7")
	path := buildLabWith(b, labPolicyV2(b), pinnedHost)
	pinner, err := netpath.NewPinner(path.Enforcement, path.Plan)
	if err != nil {
		b.Fatal(err)
	}
	if err := pinner.Pin([]netip.Addr{pinnedHost}, time.Hour); err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		dst  netip.AddrPort
	}{{"prefix", ap("198.51.100.10:80")}, {"pinned", netip.AddrPortFrom(pinnedHost, 80)}} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				if got := netlab.Dial(b, path.Sandbox, tc.dst, time.Second); got != netpath.Connected {
					b.Fatalf("%v: %v", tc.dst, got)
				}
			}
		})
	}
}

// BenchmarkResolve compares a lookup from the sandbox through the pinning
// resolver on the enforcement end (which forwards to the upstream, checks
// the answer and pins its address in the kernel) with the same lookup
// sent by the sandbox straight to that upstream.
func BenchmarkResolve(b *testing.B) {
	if !netlab.Inside() {
		testgate.Root(b)
	}
	path := buildLabWith(b, labPolicyV2(b))
	pinner, err := netpath.NewPinner(path.Enforcement, path.Plan)
	if err != nil {
		b.Fatal(err)
	}
	pol := labPolicyV2(b)
	evs := make(chan string, 1<<16)
	defer func() {
		if b.Failed() {
			close(evs)
			for e := range evs {
				b.Log(e)
			}
		}
	}()
	dec, err := netpolicy.NewDecider(pol, []netip.Addr{a("198.18.0.1")})
	if err != nil {
		b.Fatal(err)
	}
	srv, err := pinresolver.New(pinresolver.Config{
		Names: func(name string) pinresolver.Verdict {
			d := dec.DecideName(name)
			return pinresolver.Verdict{Allowed: d.Allowed, Rule: d.Rule.Pattern}
		},
		Upstream: netip.AddrPortFrom(pol.NameUpstream, 53),
		Admit: func(x netip.Addr) (bool, string) {
			d, ok := dec.AdmitLearned(x)
			return ok, d.String()
		},
		Pin:   pinner.Pin,
		Event: func(ev pinresolver.Event) { evs <- ev.String() },
		// The sidecar lives in the enforcement namespace; this benchmark
		// does not, so each upstream socket is opened there (one setns
		// pair per lookup that the sidecar does not pay).
		Dial: func(ctx context.Context, network, addr string) (c net.Conn, err error) {
			err = netpath.InNetNS(path.Enforcement, func() error {
				c, err = (&net.Dialer{}).DialContext(ctx, network, addr)
				return err
			})
			return c, err
		},
	})
	if err != nil {
		b.Fatal(err)
	}
	gw := netpath.DefaultLink.Addr().Next()
	var pc net.PacketConn
	if err := netpath.InNetNS(path.Enforcement, func() error {
		var err error
		pc, err = net.ListenPacket("udp4", netip.AddrPortFrom(gw, 53).String())
		return err
	}); err != nil {
		b.Fatal(err)
	}
	defer pc.Close()
	go srv.ServeUDP(pc)
	name := "198-19-7-7.ttl60." + netlab.DynamicSuffix
	cfg := netpath.ProbeConfig{DNSTimeout: time.Second, DNSAttempts: 1}
	for _, tc := range []struct {
		name     string
		resolver netip.Addr
	}{{"direct", pol.NameUpstream}, {"pinning", gw}} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				got, err := netpath.Resolve(context.Background(), path.Sandbox, tc.resolver, name, cfg)
				if err != nil || len(got) != 1 {
					b.Fatalf("resolving through %v: %v, %v", tc.resolver, got, err)
				}
			}
		})
	}
}
