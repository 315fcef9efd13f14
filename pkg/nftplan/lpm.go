package nftplan

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"

	"lazaret.dev/pkg/netpolicy"
)

// Range is an inclusive span of IPv4 addresses, First <= Last.
type Range struct {
	First netip.Addr
	Last  netip.Addr
}

func (r Range) String() string {
	if r.First == r.Last {
		return r.First.String()
	}
	return r.First.String() + "-" + r.Last.String()
}

// Contains reports whether a lies in r.
func (r Range) Contains(a netip.Addr) bool {
	return a.Is4() && r.First.Compare(a) <= 0 && a.Compare(r.Last) <= 0
}

func u32(a netip.Addr) uint32 {
	b := a.As4()
	return binary.BigEndian.Uint32(b[:])
}

func addr(v uint32) netip.Addr {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], v)
	return netip.AddrFrom4(b)
}

// span is a half-open interval [lo, hi) of the IPv4 space; hi may be 2^32.
type span struct{ lo, hi uint64 }

func prefixSpan(p netip.Prefix) span {
	lo := uint64(u32(p.Masked().Addr()))
	return span{lo, lo + 1<<(32-p.Bits())}
}

// Flatten returns the IPv4 addresses below limit that the longest-prefix
// step of the policy allows, as sorted, disjoint, non-adjacent ranges. It
// walks the elementary intervals between consecutive prefix boundaries;
// within one, every rule either covers all addresses or none, so one
// lookup per interval decides it. Rules of other families are ignored.
func Flatten(rules []netpolicy.PrefixRule, limit netip.Addr) ([]Range, error) {
	return flatten(rules, limit, netpolicy.Allow)
}

// FlattenDenied is Flatten for the addresses whose longest matching prefix
// is a Deny rule: those no name may reopen. Addresses no rule matches are
// in neither set.
func FlattenDenied(rules []netpolicy.PrefixRule, limit netip.Addr) ([]Range, error) {
	return flatten(rules, limit, netpolicy.Deny)
}

func flatten(rules []netpolicy.PrefixRule, limit netip.Addr, want netpolicy.PolicyAction) ([]Range, error) {
	if !limit.Is4() {
		return nil, fmt.Errorf("flattening prefix rules: limit %v: %w", limit, ErrNotIPv4)
	}
	byPrefix := make(map[netip.Prefix]netpolicy.PolicyAction, len(rules))
	var lengths []int
	bounds := []uint64{0}
	for i, r := range rules {
		if r.Family != netpolicy.IPv4 {
			continue
		}
		if !r.Network.Addr().Is4() || r.Network != r.Network.Masked() {
			return nil, fmt.Errorf("flattening prefix rules: prefix_rules[%d] %v: %w", i, r.Network, ErrBadPrefix)
		}
		if _, dup := byPrefix[r.Network]; dup {
			return nil, fmt.Errorf("flattening prefix rules: prefix_rules[%d] %v: %w", i, r.Network, ErrDuplicatePrefix)
		}
		byPrefix[r.Network] = r.Action
		lengths = append(lengths, r.Network.Bits())
		s := prefixSpan(r.Network)
		bounds = append(bounds, s.lo, s.hi)
	}
	slices.Sort(lengths)
	lengths = slices.Compact(lengths)
	slices.Reverse(lengths)
	top := uint64(u32(limit))
	bounds = append(bounds, top)
	slices.Sort(bounds)
	bounds = slices.Compact(bounds)

	var out []span
	for i := 0; i+1 < len(bounds) && bounds[i] < top; i++ {
		lo, hi := bounds[i], min(bounds[i+1], top)
		if action, ok := longestAt(byPrefix, lengths, addr(uint32(lo))); !ok || action != want {
			continue
		}
		if n := len(out); n > 0 && out[n-1].hi == lo {
			out[n-1].hi = hi
			continue
		}
		out = append(out, span{lo, hi})
	}
	ranges := make([]Range, len(out))
	for i, s := range out {
		ranges[i] = Range{First: addr(uint32(s.lo)), Last: addr(uint32(s.hi - 1))}
	}
	return ranges, nil
}

// longestAt is the longest-prefix step for one address: the action of the
// longest rule containing it, and whether there is one.
func longestAt(rules map[netip.Prefix]netpolicy.PolicyAction, lengths []int, a netip.Addr) (netpolicy.PolicyAction, bool) {
	for _, bits := range lengths {
		if action, ok := rules[netip.PrefixFrom(a, bits).Masked()]; ok {
			return action, true
		}
	}
	return 0, false
}

// mergePrefixes turns prefixes into sorted, disjoint, non-adjacent spans.
func mergePrefixes(ps []netip.Prefix) []span {
	spans := make([]span, 0, len(ps))
	for _, p := range ps {
		spans = append(spans, prefixSpan(p))
	}
	slices.SortFunc(spans, func(a, b span) int {
		if a.lo != b.lo {
			if a.lo < b.lo {
				return -1
			}
			return 1
		}
		return 0
	})
	var out []span
	for _, s := range spans {
		if n := len(out); n > 0 && s.lo <= out[n-1].hi {
			out[n-1].hi = max(out[n-1].hi, s.hi)
			continue
		}
		out = append(out, s)
	}
	return out
}
