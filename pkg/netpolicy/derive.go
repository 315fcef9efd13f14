package netpolicy

import (
	"fmt"
	"net/netip"
	"slices"
)

// RFC1918 are the private networks that every v1 effective deny set
// contains.
var RFC1918 = []netip.Prefix{
	netip.MustParsePrefix("10.0.0.0/8"),
	netip.MustParsePrefix("172.16.0.0/12"),
	netip.MustParsePrefix("192.168.0.0/16"),
}

// Derive builds the v1 policy from effective prefix sets: IPv4 enabled with
// default deny, IPv6 disabled, one rule per prefix, and the resolvers.
//
// allow and deny are the effective sets (global and profile lists united,
// RFC 1918 added to deny): canonical IPv4 prefixes, each at most once per
// set, none in both. Derive refuses a set that breaks these rules rather than
// repairing it, and refuses a deny set that lacks an RFC 1918 prefix, which
// shows that it was handed unresolved lists. resolvers names the resolver of
// every readiness DNS target; several targets may share a resolver, so a
// repeated address is kept once. A resolver must be IPv4 and outside the
// fixed always-drop ranges, where it could never answer. The inputs may be in
// any order and are not modified.
func Derive(allow, deny []netip.Prefix, resolvers []netip.Addr) (*DerivedNetworkPolicy, error) {
	return derive(allow, deny, resolvers, false)
}

// derive is Derive; with names set it builds the v1 part of a v2 policy,
// which may have no resolver, and leaves validation to the caller.
func derive(allow, deny []netip.Prefix, resolvers []netip.Addr, names bool) (*DerivedNetworkPolicy, error) {
	type entry struct {
		rule  PrefixRule
		index int // in allow for an Allow rule, in deny for a Deny rule
	}
	entries := make([]entry, 0, len(allow)+len(deny))
	add := func(list string, ps []netip.Prefix, action PolicyAction) error {
		for i, p := range ps {
			if p.IsValid() && !p.Addr().Is4() {
				return fieldErr(at(list, i), p, ErrNotIPv4)
			}
			if err := checkPrefix(IPv4, p); err != nil {
				return fieldErr(at(list, i), p, err)
			}
			entries = append(entries, entry{PrefixRule{Family: IPv4, Network: p, Action: action}, i})
		}
		return nil
	}
	if err := add("allow", allow, Allow); err != nil {
		return nil, fmt.Errorf("deriving network policy: %w", err)
	}
	if err := add("deny", deny, Deny); err != nil {
		return nil, fmt.Errorf("deriving network policy: %w", err)
	}
	for _, want := range RFC1918 {
		if !slices.Contains(deny, want) {
			return nil, fmt.Errorf("deriving network policy: %w", fieldErr("deny", want, ErrMissingRFC1918))
		}
	}
	// The order is total, so the first duplicate found and reported does
	// not depend on the sort algorithm.
	slices.SortFunc(entries, func(a, b entry) int {
		if c := compareRuleKey(a.rule.Family, a.rule.Network, b.rule.Family, b.rule.Network); c != 0 {
			return c
		}
		if c := int(a.rule.Action) - int(b.rule.Action); c != 0 {
			return c
		}
		return a.index - b.index
	})
	name := func(e entry) string {
		if e.rule.Action == Allow {
			return at("allow", e.index)
		}
		return at("deny", e.index)
	}
	rules := make([]PrefixRule, len(entries))
	for i, e := range entries {
		if i > 0 && entries[i-1].rule.Network == e.rule.Network {
			err := ErrDuplicate
			if entries[i-1].rule.Action != e.rule.Action {
				err = ErrConflict
			}
			return nil, fmt.Errorf("deriving network policy: %w",
				fieldErr(name(entries[i-1])+" and "+name(e), e.rule.Network, err))
		}
		rules[i] = e.rule
	}

	if len(resolvers) == 0 && !names {
		return nil, fmt.Errorf("deriving network policy: %w", fieldErr("resolvers", nil, ErrNoResolver))
	}
	addrs := make([]netip.Addr, 0, len(resolvers))
	for i, a := range resolvers {
		if a.IsValid() && !a.Is4() {
			return nil, fmt.Errorf("deriving network policy: %w", fieldErr(at("resolvers", i), a, ErrNotIPv4))
		}
		if err := checkAddr(IPv4, a); err != nil {
			return nil, fmt.Errorf("deriving network policy: %w", fieldErr(at("resolvers", i), a, err))
		}
		if s, ok := structuralPrefix(a); ok {
			return nil, fmt.Errorf("deriving network policy: %w",
				fieldErr(at("resolvers", i), a, fmt.Errorf("%w (%v, %s)", ErrStructuralTarget, s.Prefix, s.Name)))
		}
		addrs = append(addrs, a)
	}
	slices.SortFunc(addrs, netip.Addr.Compare)
	addrs = slices.Compact(addrs)
	res := make([]Resolver, len(addrs))
	for i, a := range addrs {
		res[i] = Resolver{Family: IPv4, Address: a}
	}

	p := &DerivedNetworkPolicy{
		SchemaID: PolicySchemaID,
		AddressFamilies: []AddressFamilyDisposition{
			{Family: IPv4, Disposition: Enabled},
			{Family: IPv6, Disposition: Disabled},
		},
		DefaultActions: []DefaultAction{{Family: IPv4, Action: Deny}},
		PrefixRules:    rules,
		Resolvers:      res,
	}
	if names {
		return p, nil
	}
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("deriving network policy: %w", err)
	}
	return p, nil
}
