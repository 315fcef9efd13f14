package kube

import (
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"

	"lazaret.dev/pkg/netpolicy"
	"lazaret.dev/pkg/netpolicy/policytest"
)

// admits is the NetworkPolicy semantics, written from the Kubernetes API
// reference and independent of the conversion: a packet leaves when any
// egress rule admits it; a rule admits it when some peer's ipBlock holds
// the destination (in cidr, in no except) and some port matches its
// protocol and port range. A rule with no ports admits every protocol and
// port.
func admits(rules []EgressRule, addr netip.Addr, port uint16, proto string) bool {
	for _, r := range rules {
		peer := false
		for _, p := range r.To {
			if p.IPBlock == nil {
				continue
			}
			cidr := netip.MustParsePrefix(p.IPBlock.CIDR)
			if !cidr.Contains(addr) {
				continue
			}
			excluded := false
			for _, e := range p.IPBlock.Except {
				if netip.MustParsePrefix(e).Contains(addr) {
					excluded = true
				}
			}
			peer = peer || !excluded
		}
		if !peer {
			continue
		}
		if len(r.Ports) == 0 {
			return true
		}
		for _, p := range r.Ports {
			end := p.Port
			if p.EndPort != nil {
				end = *p.EndPort
			}
			if p.Protocol == proto && int32(port) >= p.Port && int32(port) <= end {
				return true
			}
		}
	}
	return false
}

var probePorts = []uint16{1, 22, 52, 53, 54, 80, 443, 8443, 65534, 65535}

// checkExact compares the rendering with the decider on every sample
// address, every probe port and both protocols, and checks the shape
// rules the API server enforces on ipBlocks.
func checkExact(t *testing.T, p *netpolicy.DerivedNetworkPolicy, samples []netip.Addr) {
	t.Helper()
	rules, err := EgressRules(p)
	if err != nil {
		t.Fatal(err)
	}
	checkShape(t, rules)
	d, err := netpolicy.NewDecider(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range samples {
		for _, port := range probePorts {
			for proto, name := range map[netpolicy.Protocol]string{netpolicy.ProtocolTCP: protoTCP, netpolicy.ProtocolUDP: protoUDP} {
				want := d.Decide(a, port, proto)
				if got := admits(rules, a, port, name); got != want.Allowed {
					t.Fatalf("%v:%d/%s: NetworkPolicy admits=%v, decider %v\npolicy rules %v resolvers %v\negress %+v",
						a, port, name, got, want, p.PrefixRules, p.Resolvers, rules)
				}
			}
		}
		// No ICMP: every rule names its ports.
		if admits(rules, a, 0, "ICMP") {
			t.Fatalf("%v: ICMP admitted", a)
		}
	}
}

// checkShape holds the rendering to the API server's ipBlock rules:
// canonical CIDRs, every except strictly inside its cidr, ports in range.
func checkShape(t *testing.T, rules []EgressRule) {
	t.Helper()
	for _, r := range rules {
		if len(r.Ports) == 0 {
			t.Errorf("rule %+v has no ports", r)
		}
		for _, p := range r.Ports {
			if p.Port < 1 || p.Port > 65535 || (p.EndPort != nil && (*p.EndPort < p.Port || *p.EndPort > 65535)) {
				t.Errorf("port %+v out of range", p)
			}
		}
		for _, peer := range r.To {
			cidr, err := netip.ParsePrefix(peer.IPBlock.CIDR)
			if err != nil || cidr != cidr.Masked() || !cidr.Addr().Is4() {
				t.Errorf("cidr %q is not a canonical IPv4 network", peer.IPBlock.CIDR)
				continue
			}
			for _, e := range peer.IPBlock.Except {
				ex, err := netip.ParsePrefix(e)
				if err != nil || ex != ex.Masked() || ex.Bits() <= cidr.Bits() || !cidr.Contains(ex.Addr()) {
					t.Errorf("except %q is not strictly inside %v", e, cidr)
				}
			}
		}
	}
}

// boundaries are the first and last address of p and the addresses just
// outside it.
func boundaries(p netip.Prefix) []netip.Addr {
	first := p.Masked().Addr()
	last := first
	for range 32 - p.Bits() {
		last = last.Next()
		if !p.Contains(last) {
			last = last.Prev()
			break
		}
	}
	// last by arithmetic: a /8 has 2^24 addresses, too many to walk.
	b := first.As4()
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	v |= uint32(1)<<(32-p.Bits()) - 1
	if p.Bits() == 0 {
		v = ^uint32(0)
	}
	last = netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
	out := []netip.Addr{first, last}
	if prev := first.Prev(); prev.IsValid() {
		out = append(out, prev)
	}
	if next := last.Next(); next.IsValid() {
		out = append(out, next)
	}
	return out
}

func samplesFor(p *netpolicy.DerivedNetworkPolicy, rng *rand.Rand, random int) []netip.Addr {
	var out []netip.Addr
	for _, r := range p.PrefixRules {
		out = append(out, boundaries(r.Network)...)
		// One address inside, off the boundary.
		out = append(out, policytest.RandomIn(rng, r.Network))
	}
	for _, s := range netpolicy.Structural {
		out = append(out, boundaries(s.Prefix)...)
	}
	for _, r := range p.Resolvers {
		out = append(out, r.Address, r.Address.Prev(), r.Address.Next())
	}
	for range random {
		out = append(out, policytest.RandomIn(rng, netip.MustParsePrefix("0.0.0.0/0")))
	}
	return slices.DeleteFunc(out, func(a netip.Addr) bool { return !a.IsValid() || !a.Is4() })
}

func mustDerive(t testing.TB, allow, deny []string, resolvers []string) *netpolicy.DerivedNetworkPolicy {
	t.Helper()
	var a, d []netip.Prefix
	for _, s := range allow {
		a = append(a, netip.MustParsePrefix(s))
	}
	for _, s := range deny {
		d = append(d, netip.MustParsePrefix(s))
	}
	d = append(d, netpolicy.RFC1918...)
	var r []netip.Addr
	for _, s := range resolvers {
		r = append(r, netip.MustParseAddr(s))
	}
	p, err := netpolicy.Derive(a, d, r)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestEgressRulesTable pins the conversion of hand-made policies, and
// checks each against the decider.
func TestEgressRulesTable(t *testing.T) {
	cases := []struct {
		name      string
		allow     []string
		deny      []string
		resolvers []string
		blocks    []IPBlock
	}{
		{
			name:      "internet minus private",
			allow:     []string{"0.0.0.0/0"},
			resolvers: []string{"1.1.1.1"},
			blocks: []IPBlock{{CIDR: "0.0.0.0/0", Except: []string{
				"0.0.0.0/8", "10.0.0.0/8", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12", "192.168.0.0/16", "224.0.0.0/4", "240.0.0.0/4"}}},
		},
		{
			name:      "nested allow inside deny inside allow",
			allow:     []string{"0.0.0.0/0", "10.1.2.0/24", "10.1.2.128/32"},
			deny:      []string{"10.1.2.0/25"},
			resolvers: []string{"9.9.9.9"},
			blocks: []IPBlock{
				{CIDR: "0.0.0.0/0", Except: []string{"0.0.0.0/8", "10.0.0.0/8", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12", "192.168.0.0/16", "224.0.0.0/4", "240.0.0.0/4"}},
				{CIDR: "10.1.2.0/24", Except: []string{"10.1.2.0/25", "10.1.2.128/32"}},
				{CIDR: "10.1.2.128/32"},
			},
		},
		{
			name:      "an allow inside a structural range reopens nothing",
			allow:     []string{"169.254.169.254/32", "203.0.113.0/24"},
			resolvers: []string{"203.0.113.53"},
			blocks:    []IPBlock{{CIDR: "203.0.113.0/24"}},
		},
		{
			name:      "nothing allowed",
			resolvers: []string{"8.8.8.8"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := mustDerive(t, c.allow, c.deny, c.resolvers)
			blocks, err := AllowedBlocks(p)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.EqualFunc(blocks, c.blocks, func(a, b IPBlock) bool {
				return a.CIDR == b.CIDR && slices.Equal(a.Except, b.Except)
			}) {
				t.Errorf("blocks\n got %+v\nwant %+v", blocks, c.blocks)
			}
			rng := rand.New(rand.NewPCG(1, 2))
			checkExact(t, p, samplesFor(p, rng, 2000))
		})
	}
}

// TestEgressRulesMatchDecider is the property: for random policies (nested
// and overlapping allow and deny prefixes, resolvers inside and outside
// the allowed space), the NetworkPolicy admits a TCP or UDP destination
// exactly when the decider allows it, on every prefix boundary, every
// structural boundary, every resolver and its neighbours, and random
// addresses, on ports around DNS and at both ends of the range.
func TestEgressRulesMatchDecider(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 4))
	iterations := 300
	if testing.Short() {
		iterations = 50
	}
	for i := range iterations {
		allow, deny := policytest.NestedSets(rng)
		var resolvers []netip.Addr
		for range 1 + rng.IntN(3) {
			a := policytest.RandomIn(rng, netip.MustParsePrefix("0.0.0.0/0"))
			if len(allow) > 0 && rng.IntN(2) == 0 {
				a = policytest.RandomIn(rng, allow[rng.IntN(len(allow))])
			}
			if insideStructural(netip.PrefixFrom(a, 32)) || slices.Contains(resolvers, a) {
				continue
			}
			resolvers = append(resolvers, a)
		}
		if len(resolvers) == 0 {
			resolvers = []netip.Addr{netip.MustParseAddr("1.1.1.1")}
		}
		p, err := netpolicy.Derive(allow, append(deny, netpolicy.RFC1918...), resolvers)
		if err != nil {
			continue // a random set can repeat a prefix across lists
		}
		t.Run("", func(t *testing.T) {
			_ = i
			checkExact(t, p, samplesFor(p, rng, 300))
		})
	}
}
