package netpolicy

import (
	"crypto/sha256"
	"fmt"
	"net/netip"

	"lazaret.dev/pkg/ids"
	"lazaret.dev/pkg/postcard"
)

// PolicySchemaID is DerivedNetworkPolicy.schema_id; it is also the digest's
// domain separator, followed by one zero byte.
const PolicySchemaID = "lazaret-derived-network-policy-v1"

// AddressFamily is IPv4 (variant 0) or IPv6 (variant 1).
type AddressFamily uint8

const (
	IPv4 AddressFamily = iota
	IPv6
	numFamilies
)

func (f AddressFamily) String() string {
	switch f {
	case IPv4:
		return "IPv4"
	case IPv6:
		return "IPv6"
	}
	return fmt.Sprintf("AddressFamily(%d)", uint8(f))
}

// Disposition says whether an address family carries traffic at all. A
// Disabled family drops every packet of that family; it has no default
// action, prefix rules or resolvers. v1 enables IPv4 and disables IPv6.
type Disposition uint8

const (
	Enabled Disposition = iota
	Disabled
	numDispositions
)

func (d Disposition) String() string {
	switch d {
	case Enabled:
		return "enabled"
	case Disabled:
		return "disabled"
	}
	return fmt.Sprintf("Disposition(%d)", uint8(d))
}

// PolicyAction is Allow (variant 0) or Deny (variant 1).
type PolicyAction uint8

const (
	Allow PolicyAction = iota
	Deny
	numActions
)

func (a PolicyAction) String() string {
	switch a {
	case Allow:
		return "allow"
	case Deny:
		return "deny"
	}
	return fmt.Sprintf("PolicyAction(%d)", uint8(a))
}

// AddressFamilyDisposition enables or disables one family.
type AddressFamilyDisposition struct {
	Family      AddressFamily
	Disposition Disposition
}

// DefaultAction applies to a destination of an enabled family that no prefix
// rule matches. v1 accepts only Deny.
type DefaultAction struct {
	Family AddressFamily
	Action PolicyAction
}

// PrefixRule allows or denies one network; the longest matching rule wins.
type PrefixRule struct {
	Family  AddressFamily
	Network netip.Prefix
	Action  PolicyAction
}

// Resolver is an address that DNS (port 53, UDP and TCP) may reach; DNS to
// any other address is dropped.
type Resolver struct {
	Family  AddressFamily
	Address netip.Addr
}

func (r PrefixRule) String() string { return fmt.Sprintf("%v %v", r.Action, r.Network) }

// DerivedNetworkPolicy is the policy the network sidecar enforces. A valid
// policy is in canonical form: dispositions sorted by family, exactly one per
// family; default actions sorted by family, exactly one per enabled family;
// prefix rules sorted by (family, address bytes, prefix length, action) with
// host bits clear and no prefix twice; resolvers sorted by (family, address
// bytes) with no address twice and at least one present. Rules and resolvers
// belong to enabled families only.
type DerivedNetworkPolicy struct {
	SchemaID        string
	AddressFamilies []AddressFamilyDisposition
	DefaultActions  []DefaultAction
	PrefixRules     []PrefixRule
	Resolvers       []Resolver
	// NameRules (v2 only) allow and deny host names, sorted by (pattern
	// bytes, action), no pattern twice, at least one Allow.
	NameRules []NameRule
	// NameUpstream (v2 only) is the IPv4 resolver the pinning resolver
	// forwards allowed names to.
	NameUpstream netip.Addr
	// Brokered (v2 only, may be empty) are the destinations of the
	// credential broker, sorted by (host, port). The encoding has the
	// section only when it is not empty, so a v2 policy without
	// credentials keeps its bytes.
	Brokered []BrokeredDestination
}

// Validate reports the first violation of the canonical form as a
// *FieldError or *SchemaError.
func (p *DerivedNetworkPolicy) Validate() error {
	if p.SchemaID != PolicySchemaID && p.SchemaID != PolicySchemaIDV2 {
		return &SchemaError{Record: "derived network policy", Got: p.SchemaID, Want: PolicySchemaID}
	}
	var enabled [numFamilies]bool
	for i, af := range p.AddressFamilies {
		if af.Family >= numFamilies || af.Disposition >= numDispositions {
			return fieldErr(at("address_families", i), nil, ErrUnknownValue)
		}
		if i > 0 {
			prev := p.AddressFamilies[i-1].Family
			if af.Family == prev {
				return fieldErr(at("address_families", i), af.Family, ErrDisposition)
			}
			if af.Family < prev {
				return fieldErr(at("address_families", i), af.Family, ErrUnsorted)
			}
		}
		enabled[af.Family] = af.Disposition == Enabled
	}
	if len(p.AddressFamilies) != int(numFamilies) {
		return fieldErr("address_families", nil, ErrDisposition)
	}
	if enabled[IPv6] {
		return fieldErr("address_families[1]", "IPv6 enabled", ErrIPv6Enabled)
	}
	var hasDefault [numFamilies]bool
	for i, da := range p.DefaultActions {
		if da.Family >= numFamilies || da.Action >= numActions {
			return fieldErr(at("default_actions", i), nil, ErrUnknownValue)
		}
		if i > 0 {
			prev := p.DefaultActions[i-1].Family
			if da.Family == prev {
				return fieldErr(at("default_actions", i), da.Family, ErrDefaultAction)
			}
			if da.Family < prev {
				return fieldErr(at("default_actions", i), da.Family, ErrUnsorted)
			}
		}
		if !enabled[da.Family] {
			return fieldErr(at("default_actions", i), da.Family, ErrDefaultAction)
		}
		if da.Action != Deny {
			return fieldErr(at("default_actions", i), da.Family, ErrDefaultAllow)
		}
		hasDefault[da.Family] = true
	}
	for f := range numFamilies {
		if enabled[f] && !hasDefault[f] {
			return fieldErr("default_actions", f, ErrDefaultAction)
		}
	}
	for i, r := range p.PrefixRules {
		if r.Family >= numFamilies || r.Action >= numActions {
			return fieldErr(at("prefix_rules", i), nil, ErrUnknownValue)
		}
		if err := checkPrefix(r.Family, r.Network); err != nil {
			return fieldErr(at("prefix_rules", i), r.Network, err)
		}
		if !enabled[r.Family] {
			return fieldErr(at("prefix_rules", i), r.Network, ErrFamilyDisabled)
		}
		if i > 0 {
			prev := p.PrefixRules[i-1]
			switch c := compareRuleKey(prev.Family, prev.Network, r.Family, r.Network); {
			case c == 0 && prev.Action == r.Action:
				return fieldErr(at("prefix_rules", i), r, ErrDuplicate)
			case c == 0:
				return fieldErr(at("prefix_rules", i), r, ErrConflict)
			case c > 0:
				return fieldErr(at("prefix_rules", i), r, ErrUnsorted)
			}
		}
	}
	// A v2 policy's sandbox asks the pinning resolver; readiness DNS
	// targets, and with them resolvers, are optional there.
	if len(p.Resolvers) == 0 && p.SchemaID == PolicySchemaID {
		return fieldErr("resolvers", nil, ErrNoResolver)
	}
	for i, r := range p.Resolvers {
		if r.Family >= numFamilies {
			return fieldErr(at("resolvers", i), nil, ErrUnknownValue)
		}
		if err := checkAddr(r.Family, r.Address); err != nil {
			return fieldErr(at("resolvers", i), r.Address, err)
		}
		if !enabled[r.Family] {
			return fieldErr(at("resolvers", i), r.Address, ErrFamilyDisabled)
		}
		if i > 0 {
			prev := p.Resolvers[i-1]
			c := compareFamilyAddr(prev.Family, prev.Address, r.Family, r.Address)
			if c == 0 {
				return fieldErr(at("resolvers", i), r.Address, ErrDuplicate)
			}
			if c > 0 {
				return fieldErr(at("resolvers", i), r.Address, ErrUnsorted)
			}
		}
	}
	if err := p.validateNames(); err != nil {
		return err
	}
	return p.validateBrokered()
}

// familyOf is the family an address is written in: IPv4 only for a plain
// four-byte address; an IPv4-mapped IPv6 address is IPv6.
func familyOf(a netip.Addr) AddressFamily {
	if a.Is4() {
		return IPv4
	}
	return IPv6
}

func checkAddr(f AddressFamily, a netip.Addr) error {
	if !a.IsValid() || a.Zone() != "" {
		return ErrInvalidAddress
	}
	if familyOf(a) != f {
		return ErrFamilyMismatch
	}
	return nil
}

func checkPrefix(f AddressFamily, p netip.Prefix) error {
	if !p.IsValid() {
		return ErrInvalidAddress
	}
	if err := checkAddr(f, p.Addr()); err != nil {
		return err
	}
	if p.Masked() != p {
		return ErrHostBits
	}
	return nil
}

func compareFamilyAddr(fa AddressFamily, a netip.Addr, fb AddressFamily, b netip.Addr) int {
	if fa != fb {
		if fa < fb {
			return -1
		}
		return 1
	}
	// Within one family both addresses have the same length, so Compare
	// is the unsigned bytewise order of their address bytes.
	return a.Compare(b)
}

// compareRuleKey orders rules by (family, address bytes, prefix length).
func compareRuleKey(fa AddressFamily, a netip.Prefix, fb AddressFamily, b netip.Prefix) int {
	if c := compareFamilyAddr(fa, a.Addr(), fb, b.Addr()); c != 0 {
		return c
	}
	switch {
	case a.Bits() < b.Bits():
		return -1
	case a.Bits() > b.Bits():
		return 1
	}
	return 0
}

// Encode validates p and returns its canonical encoding.
func (p *DerivedNetworkPolicy) Encode() ([]byte, error) {
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("encoding derived network policy: %w", err)
	}
	return postcard.Marshal(p), nil
}

// Digest is SHA-256(schema ID || 0x00 || canonical encoding).
func (p *DerivedNetworkPolicy) Digest() (ids.Digest, error) {
	b, err := p.Encode()
	if err != nil {
		return ids.Digest{}, err
	}
	return digestOf(p.SchemaID, b), nil
}

// DigestOfEncoding is the policy digest of bytes already known to be a
// canonical encoding (for instance, the contents of a sealed memfd that
// DecodePolicy accepted). The separator is the schema ID the encoding
// begins with: v1 and v2 are separate digest domains.
func DigestOfEncoding(canonical []byte) ids.Digest {
	schema := PolicySchemaID
	if n := len(PolicySchemaIDV2); len(canonical) > n && canonical[0] == byte(n) && string(canonical[1:1+n]) == PolicySchemaIDV2 {
		schema = PolicySchemaIDV2
	}
	return digestOf(schema, canonical)
}

func digestOf(schema string, enc []byte) ids.Digest {
	h := sha256.New()
	h.Write([]byte(schema))
	h.Write([]byte{0})
	h.Write(enc)
	var d ids.Digest
	h.Sum(d[:0])
	return d
}

// DecodePolicy decodes a canonical encoding and refuses anything else,
// including a document that is valid Postcard but not sorted.
func DecodePolicy(b []byte) (*DerivedNetworkPolicy, error) {
	var p DerivedNetworkPolicy
	if err := postcard.Unmarshal(b, &p); err != nil {
		return nil, fmt.Errorf("decoding derived network policy: %w", err)
	}
	return &p, nil
}

// MarshalPostcard writes the fields in schema order. The encoding of an
// invalid policy is not canonical; use Encode, which validates first.
func (p *DerivedNetworkPolicy) MarshalPostcard(e *postcard.Encoder) {
	e.String(p.SchemaID)
	e.SeqLen(len(p.AddressFamilies))
	for _, af := range p.AddressFamilies {
		e.Variant(uint32(af.Family))
		e.Variant(uint32(af.Disposition))
	}
	e.SeqLen(len(p.DefaultActions))
	for _, da := range p.DefaultActions {
		e.Variant(uint32(da.Family))
		e.Variant(uint32(da.Action))
	}
	e.SeqLen(len(p.PrefixRules))
	for _, r := range p.PrefixRules {
		e.Variant(uint32(r.Family))
		writeIPAddr(e, r.Network.Addr())
		e.U8(uint8(max(r.Network.Bits(), 0)))
		e.Variant(uint32(r.Action))
	}
	e.SeqLen(len(p.Resolvers))
	for _, r := range p.Resolvers {
		e.Variant(uint32(r.Family))
		writeIPAddr(e, r.Address)
	}
	if p.SchemaID != PolicySchemaIDV2 {
		return
	}
	e.SeqLen(len(p.NameRules))
	for _, r := range p.NameRules {
		e.String(r.Pattern)
		e.Variant(uint32(r.Action))
	}
	e.Variant(uint32(familyOf(p.NameUpstream)))
	writeIPAddr(e, p.NameUpstream)
	if len(p.Brokered) == 0 {
		return
	}
	e.SeqLen(len(p.Brokered))
	for _, b := range p.Brokered {
		e.String(b.Host)
		e.U16(b.Port)
	}
}

// writeIPAddr writes the family-tagged address union: V4 (0) and four
// bytes, or V6 (1) and sixteen bytes.
func writeIPAddr(e *postcard.Encoder, a netip.Addr) {
	if a.Is4() {
		b := a.As4()
		e.Variant(0)
		e.Fixed(b[:])
		return
	}
	var b [16]byte
	if a.IsValid() {
		b = a.As16()
	}
	e.Variant(1)
	e.Fixed(b[:])
}

func readIPAddr(d *postcard.Decoder) netip.Addr {
	switch d.Variant(2) {
	case 0:
		var b [4]byte
		d.Fixed(b[:])
		return netip.AddrFrom4(b)
	default:
		var b [16]byte
		d.Fixed(b[:])
		return netip.AddrFrom16(b)
	}
}

// Minimum encoded sizes, so that a hostile length cannot allocate beyond
// the input.
const (
	minDispositionSize = 2
	minDefaultSize     = 2
	minRuleSize        = 1 + 1 + 4 + 1 + 1
	minResolverSize    = 1 + 1 + 4
	minNameRuleSize    = 1 + 1
)

// UnmarshalPostcard reads the fields in schema order, refuses a foreign
// schema ID before reading further, and validates the canonical form.
func (p *DerivedNetworkPolicy) UnmarshalPostcard(d *postcard.Decoder) {
	*p = DerivedNetworkPolicy{}
	p.SchemaID = d.String()
	if d.Err() != nil {
		return
	}
	if p.SchemaID != PolicySchemaID && p.SchemaID != PolicySchemaIDV2 {
		d.Fail("schema_id", &SchemaError{Record: "derived network policy", Got: p.SchemaID, Want: PolicySchemaID})
		return
	}
	n := d.SeqLen(minDispositionSize)
	p.AddressFamilies = make([]AddressFamilyDisposition, n)
	for i := range p.AddressFamilies {
		p.AddressFamilies[i] = AddressFamilyDisposition{
			Family:      AddressFamily(d.Variant(uint32(numFamilies))),
			Disposition: Disposition(d.Variant(uint32(numDispositions))),
		}
	}
	n = d.SeqLen(minDefaultSize)
	p.DefaultActions = make([]DefaultAction, n)
	for i := range p.DefaultActions {
		p.DefaultActions[i] = DefaultAction{
			Family: AddressFamily(d.Variant(uint32(numFamilies))),
			Action: PolicyAction(d.Variant(uint32(numActions))),
		}
	}
	n = d.SeqLen(minRuleSize)
	p.PrefixRules = make([]PrefixRule, n)
	for i := range p.PrefixRules {
		r := &p.PrefixRules[i]
		r.Family = AddressFamily(d.Variant(uint32(numFamilies)))
		addr := readIPAddr(d)
		bits := d.U8()
		r.Action = PolicyAction(d.Variant(uint32(numActions)))
		if d.Err() != nil {
			return
		}
		if int(bits) > addr.BitLen() {
			d.Fail("", fieldErr(at("prefix_rules", i), fmt.Sprintf("%v/%d", addr, bits), ErrInvalidAddress))
			return
		}
		r.Network = netip.PrefixFrom(addr, int(bits))
	}
	n = d.SeqLen(minResolverSize)
	p.Resolvers = make([]Resolver, n)
	for i := range p.Resolvers {
		p.Resolvers[i] = Resolver{
			Family:  AddressFamily(d.Variant(uint32(numFamilies))),
			Address: readIPAddr(d),
		}
	}
	if p.SchemaID == PolicySchemaIDV2 {
		p.NameRules = make([]NameRule, d.SeqLen(minNameRuleSize))
		for i := range p.NameRules {
			p.NameRules[i] = NameRule{Pattern: d.String(), Action: PolicyAction(d.Variant(uint32(numActions)))}
		}
		fam := AddressFamily(d.Variant(uint32(numFamilies)))
		p.NameUpstream = readIPAddr(d)
		if d.Err() == nil && familyOf(p.NameUpstream) != fam {
			d.Fail("name_upstream", fieldErr("name_upstream", p.NameUpstream, ErrFamilyMismatch))
		}
		if d.Err() == nil && d.Remaining() > 0 {
			// The section is present only when it is not empty.
			n := d.SeqLen(minBrokeredSize)
			if d.Err() == nil && n == 0 {
				d.Fail("brokered", fieldErr("brokered", nil, ErrBrokeredEmpty))
				return
			}
			p.Brokered = make([]BrokeredDestination, n)
			for i := range p.Brokered {
				p.Brokered[i] = BrokeredDestination{Host: d.String(), Port: d.U16()}
			}
		}
	}
	if d.Err() != nil {
		return
	}
	if err := p.Validate(); err != nil {
		d.Fail("", err)
	}
}
