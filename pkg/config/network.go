package config

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
)

// rfc1918 is always part of the effective deny set.
var rfc1918 = []netip.Prefix{
	netip.MustParsePrefix("10.0.0.0/8"),
	netip.MustParsePrefix("172.16.0.0/12"),
	netip.MustParsePrefix("192.168.0.0/16"),
}

// structuralDrops are the destinations the enforcement path always drops,
// whatever the effective policy says. They are not part of the effective
// prefix sets or of any digest.
var structuralDrops = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("127.0.0.0/8"),
	netip.MustParsePrefix("169.254.0.0/16"),
	netip.MustParsePrefix("224.0.0.0/4"),
	netip.MustParsePrefix("240.0.0.0/4"),
}

// RFC1918Prefixes returns the three private prefixes every effective deny
// set contains.
func RFC1918Prefixes() []netip.Prefix { return slices.Clone(rfc1918) }

// StructuralDropPrefixes returns the prefixes the enforcement path always
// drops; no allow prefix reopens them.
func StructuralDropPrefixes() []netip.Prefix { return slices.Clone(structuralDrops) }

func structurallyDropped(a netip.Addr) (netip.Prefix, bool) {
	for _, p := range structuralDrops {
		if p.Contains(a) {
			return p, true
		}
	}
	return netip.Prefix{}, false
}

// parsePrefix parses an IPv4 prefix in CIDR form and clears its host bits.
func parsePrefix(s string) (netip.Prefix, string) {
	if why := checkString(s); why != "" {
		return netip.Prefix{}, why
	}
	p, err := netip.ParsePrefix(s)
	if err != nil || !p.Addr().Is4() {
		return netip.Prefix{}, fmt.Sprintf("%q must be an IPv4 prefix in CIDR form such as 192.0.2.0/24 (IPv6 is not supported in v1)", s)
	}
	return p.Masked(), ""
}

// parseAddr parses a dotted-quad IPv4 address.
func parseAddr(s string) (netip.Addr, string) {
	if why := checkString(s); why != "" {
		return netip.Addr{}, why
	}
	a, err := netip.ParseAddr(s)
	if err != nil || !a.Is4() {
		return netip.Addr{}, fmt.Sprintf("%q must be an IPv4 address such as 192.0.2.1 (IPv6 is not supported in v1)", s)
	}
	return a, ""
}

// comparePrefix orders prefixes like their fingerprint encodings: address
// bytes, then length.
func comparePrefix(a, b netip.Prefix) int {
	if c := a.Addr().Compare(b.Addr()); c != 0 {
		return c
	}
	return cmp.Compare(a.Bits(), b.Bits())
}

// prefixSet is a deduplicated set of prefixes remembering where each first
// appeared.
type prefixSet struct {
	from map[netip.Prefix]fieldPath
}

func newPrefixSet() *prefixSet { return &prefixSet{from: map[netip.Prefix]fieldPath{}} }

func (s *prefixSet) add(p netip.Prefix, at fieldPath) {
	if _, ok := s.from[p]; !ok {
		s.from[p] = at
	}
}

func (s *prefixSet) sorted() []netip.Prefix {
	out := make([]netip.Prefix, 0, len(s.from))
	for p := range s.from {
		out = append(out, p)
	}
	slices.SortFunc(out, comparePrefix)
	return out
}

// Decision is the verdict of the effective policy for one address.
type Decision struct {
	Allowed bool
	// Prefix is the longest matching effective prefix; invalid when none
	// matches (which denies).
	Prefix netip.Prefix
}

// decide applies longest-prefix match over the effective sets. Exact
// conflicts are rejected before this runs, so the longest match is unique.
func decide(allow, deny []netip.Prefix, a netip.Addr) Decision {
	var best Decision
	bits := -1
	for _, p := range allow {
		if p.Bits() > bits && p.Contains(a) {
			best, bits = Decision{Allowed: true, Prefix: p}, p.Bits()
		}
	}
	for _, p := range deny {
		if p.Bits() > bits && p.Contains(a) {
			best, bits = Decision{Allowed: false, Prefix: p}, p.Bits()
		}
	}
	return best
}

// Target is a readiness address and port.
type Target struct {
	Address netip.Addr
	Port    uint16
}

// DNSTarget is a readiness resolver and the name it must resolve.
type DNSTarget struct {
	Resolver netip.Addr
	Query    string
}

// ReadinessV1 is ResolvedNetworkReadinessV1: the targets that prove the
// network policy before a Domain is published. Denied, Permitted and DNS
// keep declaration order; the fingerprint sorts them. Hosts (v2 only; empty
// for a v1 document) is sorted by name, then port.
type ReadinessV1 struct {
	Denied    []Target
	Permitted []Target
	DNS       []DNSTarget
	Hosts     []HostTarget
}

func (r ReadinessV1) clone() ReadinessV1 {
	return ReadinessV1{Denied: slices.Clone(r.Denied), Permitted: slices.Clone(r.Permitted), DNS: slices.Clone(r.DNS), Hosts: slices.Clone(r.Hosts)}
}

const maxReadinessTargets = 32

// readiness checks a readiness table against the profile's effective
// policy, including its host-name policy (empty for v1). When the table
// lists hosts, permitted and dns may be empty: resolving and reaching an
// allowed name proves both.
func (v *validator) readiness(at fieldPath, rd *readinessDocV2, sp *staticProfile, hostsDeclared bool) *ReadinessV1 {
	out := &ReadinessV1{}
	ok := true
	allow, deny := sp.allow, sp.deny
	out.Hosts, ok = v.readinessHosts(at.key("hosts"), rd.Hosts, sp, hostsDeclared)
	minTargets := 1
	if len(rd.Hosts) > 0 {
		minTargets = 0
	}
	count := func(lp fieldPath, n, min int) {
		if n < min || n > maxReadinessTargets {
			v.add(lp, RuleReadinessCount, "must list %d to %d targets, found %d", min, maxReadinessTargets, n)
			ok = false
		}
	}
	check := func(name string, targets []*targetDoc, wantAllowed bool) []Target {
		lp := at.key(name)
		min := 1
		if wantAllowed {
			min = minTargets
		}
		count(lp, len(targets), min)
		seen := map[Target]int{}
		var list []Target
		for i, td := range targets {
			ep := lp.index(i)
			if td == nil {
				td = &targetDoc{}
			}
			var t Target
			good := true
			if td.Address == nil {
				v.add(ep.key("address"), RuleRequired, "address is required")
				good = false
			} else if a, why := parseAddr(*td.Address); why != "" {
				v.add(ep.key("address"), RuleAddress, "%s", why)
				good = false
			} else {
				t.Address = a
			}
			if port, ok := v.port(ep, td.Port); ok {
				t.Port = port
			} else {
				good = false
			}
			if !good {
				ok = false
				continue
			}
			if j, dup := seen[t]; dup {
				v.add(ep, RuleReadinessUnique, "target %s:%d repeats %s", t.Address, t.Port, lp.index(j))
				ok = false
				continue
			}
			seen[t] = i
			d := decide(allow, deny, t.Address)
			switch {
			case wantAllowed && !d.Allowed && d.Prefix.IsValid():
				v.add(ep.key("address"), RuleReadinessPolicy, "permitted target %s is denied by effective deny prefix %s; a permitted target must be allowed", t.Address, d.Prefix)
				ok = false
			case wantAllowed && !d.Allowed:
				v.add(ep.key("address"), RuleReadinessPolicy, "permitted target %s matches no effective prefix and is therefore denied; a permitted target must be allowed", t.Address)
				ok = false
			case !wantAllowed && d.Allowed:
				v.add(ep.key("address"), RuleReadinessPolicy, "denied target %s is allowed by effective allow prefix %s; a denied target must be denied", t.Address, d.Prefix)
				ok = false
			}
			if wantAllowed {
				if sp, bad := structurallyDropped(t.Address); bad {
					v.add(ep.key("address"), RuleStructural, "permitted target %s lies in %s, which the enforcement path always drops", t.Address, sp)
					ok = false
				}
			}
			list = append(list, t)
		}
		return list
	}
	out.Denied = check("denied", rd.Denied, false)
	out.Permitted = check("permitted", rd.Permitted, true)

	lp := at.key("dns")
	count(lp, len(rd.DNS), minTargets)
	seen := map[DNSTarget]int{}
	for i, dd := range rd.DNS {
		ep := lp.index(i)
		if dd == nil {
			dd = &dnsDoc{}
		}
		var t DNSTarget
		good := true
		if dd.Resolver == nil {
			v.add(ep.key("resolver"), RuleRequired, "resolver is required")
			good = false
		} else if a, why := parseAddr(*dd.Resolver); why != "" {
			v.add(ep.key("resolver"), RuleAddress, "%s", why)
			good = false
		} else if sp, bad := structurallyDropped(a); bad {
			v.add(ep.key("resolver"), RuleStructural, "resolver %s lies in %s, which the enforcement path always drops", a, sp)
			good = false
		} else {
			t.Resolver = a
		}
		if dd.Query == nil {
			v.add(ep.key("query"), RuleRequired, "query is required")
			good = false
		} else if why := checkString(*dd.Query); why != "" {
			v.add(ep.key("query"), RuleString, "%s", why)
			good = false
		} else if why := checkDNSName(*dd.Query); why != "" {
			v.add(ep.key("query"), RuleDNSName, "%q %s", *dd.Query, why)
			good = false
		} else {
			t.Query = *dd.Query
		}
		if !good {
			ok = false
			continue
		}
		if j, dup := seen[t]; dup {
			v.add(ep, RuleReadinessUnique, "target %s %s repeats %s", t.Resolver, t.Query, lp.index(j))
			ok = false
			continue
		}
		seen[t] = i
		out.DNS = append(out.DNS, t)
	}
	if !ok {
		return nil
	}
	return out
}

// readinessHosts checks the v2 readiness hosts: 0 to 32 unique names, each
// allowed by the profile's host-name policy, at least one exactly when the
// profile allows host names. hostsDeclared is whether any allow_hosts entry
// applies to the profile, valid or not, so that a bad pattern is reported
// once rather than again here.
func (v *validator) readinessHosts(lp fieldPath, hosts []*hostDoc, sp *staticProfile, hostsDeclared bool) ([]HostTarget, bool) {
	ok := true
	switch {
	case len(hosts) > maxReadinessTargets:
		v.add(lp, RuleReadinessCount, "must list 0 to %d host targets, found %d", maxReadinessTargets, len(hosts))
		ok = false
	case hostsDeclared && len(hosts) == 0:
		v.add(lp, RuleReadinessCount, "must list 1 to %d host targets: the profile allows host names (allow_hosts), and the start proves that one of them resolves and connects", maxReadinessTargets)
		ok = false
	case !hostsDeclared && len(hosts) > 0:
		v.add(lp, RuleReadinessCount, "must be empty: the profile allows no host names (add allow_hosts, or remove hosts)")
		ok = false
	}
	seen := map[HostTarget]int{}
	var list []HostTarget
	for i, hd := range hosts {
		ep := lp.index(i)
		if hd == nil {
			hd = &hostDoc{}
		}
		var t HostTarget
		good := true
		switch {
		case hd.Name == nil:
			v.add(ep.key("name"), RuleRequired, "name is required")
			good = false
		case checkString(*hd.Name) != "":
			v.add(ep.key("name"), RuleString, "%s", checkString(*hd.Name))
			good = false
		case checkDNSName(*hd.Name) != "":
			v.add(ep.key("name"), RuleDNSName, "%q %s (a readiness host is one name, never a wildcard)", *hd.Name, checkDNSName(*hd.Name))
			good = false
		default:
			t.Name = *hd.Name
		}
		if port, ok := v.port(ep, hd.Port); ok {
			t.Port = port
		} else {
			good = false
		}
		if !good {
			ok = false
			continue
		}
		if j, dup := seen[t]; dup {
			v.add(ep, RuleReadinessUnique, "host target %s:%d repeats %s", t.Name, t.Port, lp.index(j))
			ok = false
			continue
		}
		seen[t] = i
		if len(sp.allowHosts) > 0 {
			switch allowed, rule := DecideHost(sp.allowHosts, sp.denyHosts, t.Name); {
			case !allowed && rule != "":
				v.add(ep.key("name"), RuleReadinessPolicy, "host target %s is denied by effective deny_hosts pattern %s; a host target must be allowed", t.Name, rule)
				ok = false
			case !allowed:
				v.add(ep.key("name"), RuleReadinessPolicy, "host target %s matches no effective allow_hosts pattern; a host target must be allowed", t.Name)
				ok = false
			}
		}
		list = append(list, t)
	}
	slices.SortFunc(list, compareHostTarget)
	return list, ok
}

// port checks the required port field of the readiness entry at ep.
func (v *validator) port(ep fieldPath, p *int64) (uint16, bool) {
	switch {
	case p == nil:
		v.add(ep.key("port"), RuleRequired, "port is required")
		return 0, false
	case *p < 1 || *p > 65535:
		v.add(ep.key("port"), RulePort, "port %d must be between 1 and 65535", *p)
		return 0, false
	}
	return uint16(*p), true
}
