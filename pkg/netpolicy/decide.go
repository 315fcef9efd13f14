package netpolicy

import (
	"fmt"
	"net/netip"
	"slices"
)

// StructuralPrefix is one IPv4 range that the enforcement path always drops,
// whatever the policy says. The set is fixed by the product, not by
// configuration, and is not part of the policy or its digest.
type StructuralPrefix struct {
	Prefix netip.Prefix
	Name   string
}

// Structural is the fixed always-drop set, in address order. The host's own
// addresses are added per host by NewDecider.
var Structural = []StructuralPrefix{
	{netip.MustParsePrefix("0.0.0.0/8"), "this network"},
	{netip.MustParsePrefix("127.0.0.0/8"), "loopback"},
	{netip.MustParsePrefix("169.254.0.0/16"), "link-local and cloud metadata"},
	{netip.MustParsePrefix("224.0.0.0/4"), "multicast"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved and broadcast"},
}

func structuralPrefix(a netip.Addr) (StructuralPrefix, bool) {
	for _, s := range Structural {
		if s.Prefix.Contains(a) {
			return s, true
		}
	}
	return StructuralPrefix{}, false
}

// Protocol is an IP protocol number.
type Protocol uint8

// Protocols a decision distinguishes: the DNS rule applies to TCP and UDP.
const (
	ProtocolICMP Protocol = 1
	ProtocolTCP  Protocol = 6
	ProtocolUDP  Protocol = 17
)

func (p Protocol) String() string {
	switch p {
	case ProtocolICMP:
		return "icmp"
	case ProtocolTCP:
		return "tcp"
	case ProtocolUDP:
		return "udp"
	}
	return fmt.Sprintf("protocol %d", uint8(p))
}

// DNSPort is the port that only the policy's resolvers may receive.
const DNSPort = 53

// Reason says which step of the decision procedure decided.
type Reason uint8

const (
	// ReasonInvalidAddress: the destination is not a valid address.
	ReasonInvalidAddress Reason = iota
	// ReasonFamilyDisabled: the destination's family is disabled (IPv6,
	// including IPv4-mapped IPv6 addresses).
	ReasonFamilyDisabled
	// ReasonStructural: the destination lies in the fixed always-drop set;
	// Decision.Prefix is that range.
	ReasonStructural
	// ReasonHostAddress: the destination is one of the host's addresses;
	// Decision.Prefix is that address as a /32.
	ReasonHostAddress
	// ReasonResolver: DNS to a listed resolver; Decision.Prefix is the
	// resolver as a /32.
	ReasonResolver
	// ReasonDNSNotResolver: DNS to an address that is not a resolver.
	ReasonDNSNotResolver
	// ReasonPrefixRule: the longest matching prefix rule; Decision.Prefix
	// is its network.
	ReasonPrefixRule
	// ReasonDefaultAction: no rule matches; the family's default applies.
	ReasonDefaultAction
)

// Decision is the outcome for one destination and the step that made it.
type Decision struct {
	Allowed bool
	Reason  Reason
	// Prefix is the range, rule network or address that decided; the zero
	// Prefix when no prefix is involved.
	Prefix netip.Prefix
	// Name labels a structural range.
	Name string
}

func (d Decision) verdict() string {
	if d.Allowed {
		return "allowed"
	}
	return "denied"
}

// String explains the decision in one line, for `lazaret-cli net explain`.
func (d Decision) String() string {
	v := d.verdict()
	switch d.Reason {
	case ReasonInvalidAddress:
		return v + ": not a valid destination address"
	case ReasonFamilyDisabled:
		return v + ": IPv6 is disabled"
	case ReasonStructural:
		return fmt.Sprintf("%s: %v (%s) is always dropped", v, d.Prefix, d.Name)
	case ReasonHostAddress:
		return fmt.Sprintf("%s: %v is an address of this host and is always dropped", v, d.Prefix.Addr())
	case ReasonResolver:
		return fmt.Sprintf("%s: DNS to configured resolver %v", v, d.Prefix.Addr())
	case ReasonDNSNotResolver:
		return v + ": DNS (port 53) goes only to the configured resolvers"
	case ReasonPrefixRule:
		action := Deny
		if d.Allowed {
			action = Allow
		}
		return fmt.Sprintf("%s by %v prefix %v (longest match)", v, action, d.Prefix)
	case ReasonDefaultAction:
		return v + ": no prefix matches and the default action is deny"
	}
	return v
}

// Decider answers policy decisions for one policy on one host. It is
// immutable and safe for concurrent use.
type Decider struct {
	enabled   [numFamilies]bool
	defaults  [numFamilies]PolicyAction
	rules     map[netip.Prefix]PolicyAction
	lengths   [numFamilies][]int   // distinct rule prefix lengths, longest first
	resolvers []netip.Addr         // sorted IPv4 resolvers
	hosts     []netip.Addr         // sorted IPv4 host addresses
	names     DerivedNetworkPolicy // the schema ID and name rules only
}

// NewDecider validates p and prepares decisions for it on a host whose own
// addresses are hostAddrs. IPv4-mapped host addresses are unmapped; IPv6
// host addresses need no entry because IPv6 is disabled. p is copied.
func NewDecider(p *DerivedNetworkPolicy, hostAddrs []netip.Addr) (*Decider, error) {
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("preparing network policy decisions: %w", err)
	}
	d := &Decider{rules: make(map[netip.Prefix]PolicyAction, len(p.PrefixRules))}
	d.names = DerivedNetworkPolicy{SchemaID: p.SchemaID, NameRules: slices.Clone(p.NameRules)}
	for _, af := range p.AddressFamilies {
		d.enabled[af.Family] = af.Disposition == Enabled
	}
	for _, da := range p.DefaultActions {
		d.defaults[da.Family] = da.Action
	}
	for _, r := range p.PrefixRules {
		d.rules[r.Network] = r.Action
		d.lengths[r.Family] = append(d.lengths[r.Family], r.Network.Bits())
	}
	for f := range d.lengths {
		l := d.lengths[f]
		slices.Sort(l)
		l = slices.Compact(l)
		slices.Reverse(l)
		d.lengths[f] = l
	}
	for _, r := range p.Resolvers {
		d.resolvers = append(d.resolvers, r.Address)
	}
	for i, a := range hostAddrs {
		if !a.IsValid() {
			return nil, fmt.Errorf("preparing network policy decisions: %w",
				fieldErr(at("host_addresses", i), nil, ErrInvalidAddress))
		}
		if a = a.Unmap(); a.Is4() {
			d.hosts = append(d.hosts, a)
		}
	}
	slices.SortFunc(d.hosts, netip.Addr.Compare)
	d.hosts = slices.Compact(d.hosts)
	return d, nil
}

// Decide applies the decision procedure in order: invalid address, disabled
// family, structural range, host address, the DNS rule, the longest
// matching prefix rule, and finally the family's default action. port is
// ignored for protocols other than TCP and UDP.
func (d *Decider) Decide(addr netip.Addr, port uint16, proto Protocol) Decision {
	if !addr.IsValid() {
		return Decision{Reason: ReasonInvalidAddress}
	}
	fam := familyOf(addr)
	if !d.enabled[fam] {
		return Decision{Reason: ReasonFamilyDisabled}
	}
	if fam == IPv4 {
		if s, ok := structuralPrefix(addr); ok {
			return Decision{Reason: ReasonStructural, Prefix: s.Prefix, Name: s.Name}
		}
		if _, ok := slices.BinarySearchFunc(d.hosts, addr, netip.Addr.Compare); ok {
			return Decision{Reason: ReasonHostAddress, Prefix: netip.PrefixFrom(addr, 32)}
		}
	}
	if port == DNSPort && (proto == ProtocolTCP || proto == ProtocolUDP) {
		if _, ok := slices.BinarySearchFunc(d.resolvers, addr, netip.Addr.Compare); ok {
			return Decision{Allowed: true, Reason: ReasonResolver, Prefix: netip.PrefixFrom(addr, addr.BitLen())}
		}
		return Decision{Reason: ReasonDNSNotResolver}
	}
	if network, action, ok := d.longestMatch(fam, addr); ok {
		return Decision{Allowed: action == Allow, Reason: ReasonPrefixRule, Prefix: network}
	}
	return Decision{Allowed: d.defaults[fam] == Allow, Reason: ReasonDefaultAction}
}

// longestMatch masks the destination to each rule length present, longest
// first, and looks the resulting network up. A valid policy has at most one
// rule per network, and a family's addresses never collide with another's.
func (d *Decider) longestMatch(fam AddressFamily, addr netip.Addr) (netip.Prefix, PolicyAction, bool) {
	for _, bits := range d.lengths[fam] {
		key := netip.PrefixFrom(addr, bits).Masked()
		if action, ok := d.rules[key]; ok {
			return key, action, true
		}
	}
	return netip.Prefix{}, 0, false
}

// Decide is NewDecider followed by one decision.
func Decide(p *DerivedNetworkPolicy, hostAddrs []netip.Addr, addr netip.Addr, port uint16, proto Protocol) (Decision, error) {
	d, err := NewDecider(p, hostAddrs)
	if err != nil {
		return Decision{}, err
	}
	return d.Decide(addr, port, proto), nil
}

// CheckTargets reports the first readiness target that the policy itself
// contradicts: a denied target the policy allows, a permitted target it
// denies, or a DNS target whose resolver it does not admit. Targets are
// checked as TCP destinations, DNS targets as UDP to port 53. Such a
// configuration is invalid before anything is probed.
func (d *Decider) CheckTargets(t Targets) error {
	for _, dst := range t.Denied {
		if dec := d.Decide(dst.Address, dst.Port, ProtocolTCP); dec.Allowed {
			return &TargetError{Kind: TargetDenied, Target: dst.String(), Detail: dec.String(), Err: ErrTargetAllowed}
		}
	}
	for _, dst := range t.Permitted {
		if dec := d.Decide(dst.Address, dst.Port, ProtocolTCP); !dec.Allowed {
			return &TargetError{Kind: TargetPermitted, Target: dst.String(), Detail: dec.String(), Err: ErrTargetDenied}
		}
	}
	for _, q := range t.DNS {
		if dec := d.Decide(q.Resolver, DNSPort, ProtocolUDP); !dec.Allowed {
			return &TargetError{Kind: TargetDNS, Target: q.String(), Detail: dec.String(), Err: ErrTargetDenied}
		}
	}
	return checkHostTargets(&d.names, t.Hosts)
}

// DecideName decides a host name against the policy's name rules; see
// DerivedNetworkPolicy.DecideName.
func (d *Decider) DecideName(name string) NameDecision { return d.names.DecideName(name) }

// HasNames reports whether the policy admits egress by host name.
func (d *Decider) HasNames() bool { return d.names.HasNames() }
