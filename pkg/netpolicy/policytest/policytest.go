// Package policytest draws random network policies for property tests
// of code that must decide as netpolicy.Decider does. It is for tests
// only.
package policytest

import (
	"math/rand/v2"
	"net/netip"

	"lazaret.dev/pkg/netpolicy"
)

// RandomIn returns a random IPv4 address inside p.
func RandomIn(rng *rand.Rand, p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().As4()
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	if p.Bits() < 32 {
		v |= rng.Uint32() & (uint32(1)<<(32-p.Bits()) - 1)
	}
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// NestedSets draws up to ten distinct IPv4 prefixes, each, half the time,
// a sub-network of an earlier one, so chains of allow-deny-allow appear;
// each goes to allow or deny at random. A third of the time an allow
// prefix is added inside an RFC 1918 range, which every policy denies.
// Pass the sets, with RFC 1918 added to deny, to netpolicy.Derive.
func NestedSets(rng *rand.Rand) (allow, deny []netip.Prefix) {
	var all []netip.Prefix
	seen := map[netip.Prefix]bool{}
	for _, p := range netpolicy.RFC1918 {
		seen[p] = true
	}
	for range 1 + rng.IntN(10) {
		var p netip.Prefix
		if len(all) > 0 && rng.IntN(2) == 0 {
			parent := all[rng.IntN(len(all))]
			if parent.Bits() == 32 {
				continue
			}
			bits := parent.Bits() + 1 + rng.IntN(32-parent.Bits())
			p = netip.PrefixFrom(RandomIn(rng, parent), bits).Masked()
		} else {
			bits := rng.IntN(33)
			p = netip.PrefixFrom(RandomIn(rng, netip.MustParsePrefix("0.0.0.0/0")), bits).Masked()
		}
		if seen[p] {
			continue
		}
		seen[p] = true
		all = append(all, p)
		if rng.IntN(2) == 0 {
			allow = append(allow, p)
		} else {
			deny = append(deny, p)
		}
	}
	// Sometimes nest inside the private ranges, which every policy denies.
	if rng.IntN(3) == 0 {
		p := netip.PrefixFrom(RandomIn(rng, netpolicy.RFC1918[rng.IntN(3)]), 16+rng.IntN(17)).Masked()
		if !seen[p] {
			allow = append(allow, p)
		}
	}
	return allow, deny
}
