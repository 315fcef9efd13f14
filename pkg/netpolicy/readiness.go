package netpolicy

import (
	"cmp"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"unicode/utf8"

	"lazaret.dev/pkg/hostid"
	"lazaret.dev/pkg/ids"
	"lazaret.dev/pkg/postcard"
)

// Schema IDs of the readiness records. They are independent version
// domains: the v1 attestation projects only to the v1 identity.
const (
	AttestationSchemaID = "lazaret-network-attestation-v1"
	IdentitySchemaID    = "lazaret-network-readiness-identity-v1"
)

// Destination is an IPv4 address and a nonzero port. On the wire: four
// address bytes, then the port as a u16 varint.
type Destination struct {
	Address netip.Addr
	Port    uint16
}

func (d Destination) String() string { return netip.AddrPortFrom(d.Address, d.Port).String() }

func compareDestination(a, b Destination) int {
	if c := a.Address.Compare(b.Address); c != 0 {
		return c
	}
	return cmp.Compare(a.Port, b.Port)
}

func (d Destination) check() error {
	if !d.Address.Is4() {
		return ErrNotIPv4
	}
	if d.Port == 0 {
		return ErrZeroPort
	}
	return nil
}

// DNSTarget is a configured readiness DNS target: a query sent to one
// resolver.
type DNSTarget struct {
	Resolver netip.Addr
	Query    string
}

func (t DNSTarget) String() string { return strconv.Quote(t.Query) + " via " + t.Resolver.String() }

// Targets are the selected profile's readiness targets.
type Targets struct {
	Denied    []Destination
	Permitted []Destination
	DNS       []DNSTarget
	// Hosts (policies with names only) are reached by name through the
	// pinning resolver.
	Hosts []HostTarget
}

// DeniedDestinationObservation records whether a denied target was
// unreachable from inside the enforcement path.
type DeniedDestinationObservation struct {
	Destination Destination
	Unreachable bool
}

// PermittedDestinationObservation records whether a permitted target was
// reachable from inside the enforcement path.
type PermittedDestinationObservation struct {
	Destination Destination
	Reachable   bool
}

// DNSObservation (schema DnsObservation) records the addresses that
// QueryName resolved to through Resolver; none means it did not resolve.
// ResolvedAddresses are IPv4, sorted and distinct.
type DNSObservation struct {
	Resolver          netip.Addr
	QueryName         string
	ResolvedAddresses []netip.Addr
}

func (o DNSObservation) target() DNSTarget {
	return DNSTarget{Resolver: o.Resolver, Query: o.QueryName}
}

func compareDNSTarget(a, b DNSTarget) int {
	if c := a.Resolver.Compare(b.Resolver); c != 0 {
		return c
	}
	return cmp.Compare(a.Query, b.Query)
}

// PolicyDelivery says how the sidecar received the policy; v1 has only a
// sealed memfd (variant 0).
type PolicyDelivery uint8

const (
	SealedMemfd PolicyDelivery = iota
	numDeliveries
)

func (p PolicyDelivery) String() string {
	if p == SealedMemfd {
		return "sealed memfd"
	}
	return fmt.Sprintf("PolicyDelivery(%d)", uint8(p))
}

// NetworkObservation is what the sidecar saw while installing the policy.
// ObservedRoutes are the IPv4 route destinations of the sandbox-facing
// path in the enforcement namespace, canonical, sorted and distinct;
// RoutesAttested says the sidecar checked that they all lead through the
// enforcement ruleset.
type NetworkObservation struct {
	PolicyDelivery PolicyDelivery
	HelperReady    bool
	ObservedRoutes []netip.Prefix
	RoutesAttested bool
}

// NetworkReadinessAttestation is the sidecar's claim about one generation's
// enforcement path.
type NetworkReadinessAttestation struct {
	SchemaID                 string
	DomainID                 ids.DomainID
	GenerationID             ids.GenerationID
	ConfigurationFingerprint ids.Digest
	NetworkSidecarID         ids.SidecarID
	DerivedPolicyDigest      ids.Digest
	EnforcementNamespace     hostid.NamespaceIdentity
	RuntimeSupervisor        hostid.PidfsProcessIdentityV1
	ConnectivityHelper       hostid.PidfsProcessIdentityV1
	Observation              NetworkObservation
}

// NetworkReadinessIdentity is the part of an attestation that the readiness
// fingerprint covers: no process identities, no observations.
type NetworkReadinessIdentity struct {
	SchemaID                 string
	DomainID                 ids.DomainID
	GenerationID             ids.GenerationID
	ConfigurationFingerprint ids.Digest
	NetworkSidecarID         ids.SidecarID
	DerivedPolicyDigest      ids.Digest
	EnforcementNamespace     hostid.NamespaceIdentity
}

// NetworkReachabilityProbe holds the results of probing every readiness
// target from inside the enforcement path of one generation. Each list is
// nonempty, sorted (destinations by address then port, DNS by resolver then
// query name) and has no target twice.
type NetworkReachabilityProbe struct {
	DomainID             ids.DomainID
	GenerationID         ids.GenerationID
	EnforcementNamespace hostid.NamespaceIdentity
	Denied               []DeniedDestinationObservation
	Permitted            []PermittedDestinationObservation
	DNS                  []DNSObservation
	// Names holds the proofs of egress by name; nil for a policy without
	// names, whose probe is then byte for byte a v1 probe.
	Names *NameObservations
}

// Project returns the readiness identity of a v1 attestation. Any other
// attestation schema ID is refused with a *SchemaError; there is no
// fallback.
func (a *NetworkReadinessAttestation) Project() (NetworkReadinessIdentity, error) {
	if a.SchemaID != AttestationSchemaID {
		return NetworkReadinessIdentity{}, &SchemaError{Record: "network readiness attestation", Got: a.SchemaID, Want: AttestationSchemaID}
	}
	return NetworkReadinessIdentity{
		SchemaID:                 IdentitySchemaID,
		DomainID:                 a.DomainID,
		GenerationID:             a.GenerationID,
		ConfigurationFingerprint: a.ConfigurationFingerprint,
		NetworkSidecarID:         a.NetworkSidecarID,
		DerivedPolicyDigest:      a.DerivedPolicyDigest,
		EnforcementNamespace:     a.EnforcementNamespace,
	}, nil
}

// Fingerprint is the readiness fingerprint:
// SHA-256("lazaret-network-readiness-identity-v1" || 0x00 || postcard(identity)).
// Any other identity schema ID is refused with a *SchemaError.
func (id *NetworkReadinessIdentity) Fingerprint() (ids.Digest, error) {
	if id.SchemaID != IdentitySchemaID {
		return ids.Digest{}, &SchemaError{Record: "network readiness identity", Got: id.SchemaID, Want: IdentitySchemaID}
	}
	return digestOf(IdentitySchemaID, postcard.Marshal(id)), nil
}

// Validate checks the schema ID, the IPv4 route prefixes and their order.
func (a *NetworkReadinessAttestation) Validate() error {
	if a.SchemaID != AttestationSchemaID {
		return &SchemaError{Record: "network readiness attestation", Got: a.SchemaID, Want: AttestationSchemaID}
	}
	o := &a.Observation
	if o.PolicyDelivery >= numDeliveries {
		return fieldErr("observation.policy_delivery", nil, ErrUnknownValue)
	}
	for i, r := range o.ObservedRoutes {
		if r.IsValid() && !r.Addr().Is4() {
			return fieldErr(at("observation.observed_routes", i), r, ErrNotIPv4)
		}
		if err := checkPrefix(IPv4, r); err != nil {
			return fieldErr(at("observation.observed_routes", i), r, err)
		}
		if i > 0 {
			switch c := compareRuleKey(IPv4, o.ObservedRoutes[i-1], IPv4, r); {
			case c == 0:
				return fieldErr(at("observation.observed_routes", i), r, ErrDuplicate)
			case c > 0:
				return fieldErr(at("observation.observed_routes", i), r, ErrUnsorted)
			}
		}
	}
	return nil
}

// Validate checks the schema ID.
func (id *NetworkReadinessIdentity) Validate() error {
	if id.SchemaID != IdentitySchemaID {
		return &SchemaError{Record: "network readiness identity", Got: id.SchemaID, Want: IdentitySchemaID}
	}
	return nil
}

// Validate checks that every list is nonempty, canonical and sorted. It does
// not judge the results; Verify does.
func (p *NetworkReachabilityProbe) Validate() error {
	if len(p.Denied) == 0 {
		return fieldErr("denied", nil, ErrTargetNotProbed)
	}
	for i, o := range p.Denied {
		if err := o.Destination.check(); err != nil {
			return fieldErr(at("denied", i), o.Destination, err)
		}
		if i > 0 {
			if err := orderErr(compareDestination(p.Denied[i-1].Destination, o.Destination)); err != nil {
				return fieldErr(at("denied", i), o.Destination, err)
			}
		}
	}
	if len(p.Permitted) == 0 && p.Names == nil {
		return fieldErr("permitted", nil, ErrTargetNotProbed)
	}
	for i, o := range p.Permitted {
		if err := o.Destination.check(); err != nil {
			return fieldErr(at("permitted", i), o.Destination, err)
		}
		if i > 0 {
			if err := orderErr(compareDestination(p.Permitted[i-1].Destination, o.Destination)); err != nil {
				return fieldErr(at("permitted", i), o.Destination, err)
			}
		}
	}
	if len(p.DNS) == 0 && p.Names == nil {
		return fieldErr("dns", nil, ErrTargetNotProbed)
	}
	for i, o := range p.DNS {
		if !o.Resolver.Is4() {
			return fieldErr(at("dns", i)+".resolver", o.Resolver, ErrNotIPv4)
		}
		if len(o.QueryName) == 0 || len(o.QueryName) > 253 || strings.IndexByte(o.QueryName, 0) >= 0 || !utf8.ValidString(o.QueryName) {
			return fieldErr(at("dns", i)+".query_name", strconv.Quote(o.QueryName), ErrQueryName)
		}
		if i > 0 {
			if err := orderErr(compareDNSTarget(p.DNS[i-1].target(), o.target())); err != nil {
				return fieldErr(at("dns", i), o.target(), err)
			}
		}
		for j, a := range o.ResolvedAddresses {
			if !a.Is4() {
				return fieldErr(fmt.Sprintf("dns[%d].resolved_addresses[%d]", i, j), a, ErrNotIPv4)
			}
			if j > 0 {
				if err := orderErr(o.ResolvedAddresses[j-1].Compare(a)); err != nil {
					return fieldErr(fmt.Sprintf("dns[%d].resolved_addresses[%d]", i, j), a, err)
				}
			}
		}
	}
	if p.Names != nil {
		return p.Names.validate()
	}
	return nil
}

// orderErr maps the comparison of an element with its predecessor to the
// canonical-order rule: strictly increasing.
func orderErr(c int) error {
	switch {
	case c == 0:
		return ErrDuplicate
	case c > 0:
		return ErrUnsorted
	}
	return nil
}

// Wire helpers for the IPv4-only readiness records.

func writeIPv4(e *postcard.Encoder, a netip.Addr) {
	var b [4]byte
	if a.Is4() {
		b = a.As4()
	}
	e.Fixed(b[:])
}

func readIPv4(d *postcard.Decoder) netip.Addr {
	var b [4]byte
	d.Fixed(b[:])
	return netip.AddrFrom4(b)
}

func writeDestination(e *postcard.Encoder, dst Destination) {
	writeIPv4(e, dst.Address)
	e.U16(dst.Port)
}

func readDestination(d *postcard.Decoder) Destination {
	a := readIPv4(d)
	return Destination{Address: a, Port: d.U16()}
}

func checkSchema(d *postcard.Decoder, record, want string) string {
	s := d.String()
	if d.Err() == nil && s != want {
		d.Fail("schema_id", &SchemaError{Record: record, Got: s, Want: want})
	}
	return s
}

func failInvalid(d *postcard.Decoder, err error) {
	if d.Err() == nil && err != nil {
		d.Fail("", err)
	}
}

// MarshalPostcard writes the observation fields in schema order.
func (o *NetworkObservation) MarshalPostcard(e *postcard.Encoder) {
	e.Variant(uint32(o.PolicyDelivery))
	e.Bool(o.HelperReady)
	e.SeqLen(len(o.ObservedRoutes))
	for _, r := range o.ObservedRoutes {
		writeIPv4(e, r.Addr())
		e.U8(uint8(max(r.Bits(), 0)))
	}
	e.Bool(o.RoutesAttested)
}

// UnmarshalPostcard reads what MarshalPostcard writes.
func (o *NetworkObservation) UnmarshalPostcard(d *postcard.Decoder) {
	o.PolicyDelivery = PolicyDelivery(d.Variant(uint32(numDeliveries)))
	o.HelperReady = d.Bool()
	n := d.SeqLen(5)
	o.ObservedRoutes = make([]netip.Prefix, n)
	for i := range o.ObservedRoutes {
		a := readIPv4(d)
		bits := d.U8()
		if d.Err() != nil {
			return
		}
		if bits > 32 {
			d.Fail("", fieldErr(at("observation.observed_routes", i), fmt.Sprintf("%v/%d", a, bits), ErrInvalidAddress))
			return
		}
		o.ObservedRoutes[i] = netip.PrefixFrom(a, int(bits))
	}
	o.RoutesAttested = d.Bool()
}

// MarshalPostcard writes the fields in schema order; use Encode to validate
// first.
func (a *NetworkReadinessAttestation) MarshalPostcard(e *postcard.Encoder) {
	e.String(a.SchemaID)
	e.Fixed(a.DomainID[:])
	e.Fixed(a.GenerationID[:])
	e.Fixed(a.ConfigurationFingerprint[:])
	e.Fixed(a.NetworkSidecarID[:])
	e.Fixed(a.DerivedPolicyDigest[:])
	a.EnforcementNamespace.MarshalPostcard(e)
	a.RuntimeSupervisor.MarshalPostcard(e)
	a.ConnectivityHelper.MarshalPostcard(e)
	a.Observation.MarshalPostcard(e)
}

// UnmarshalPostcard refuses a foreign schema ID before reading further and
// validates what it read.
func (a *NetworkReadinessAttestation) UnmarshalPostcard(d *postcard.Decoder) {
	*a = NetworkReadinessAttestation{}
	a.SchemaID = checkSchema(d, "network readiness attestation", AttestationSchemaID)
	if d.Err() != nil {
		return
	}
	d.Fixed(a.DomainID[:])
	d.Fixed(a.GenerationID[:])
	d.Fixed(a.ConfigurationFingerprint[:])
	d.Fixed(a.NetworkSidecarID[:])
	d.Fixed(a.DerivedPolicyDigest[:])
	a.EnforcementNamespace.UnmarshalPostcard(d)
	a.RuntimeSupervisor.UnmarshalPostcard(d)
	a.ConnectivityHelper.UnmarshalPostcard(d)
	a.Observation.UnmarshalPostcard(d)
	failInvalid(d, a.Validate())
}

// MarshalPostcard writes the fields in schema order.
func (id *NetworkReadinessIdentity) MarshalPostcard(e *postcard.Encoder) {
	e.String(id.SchemaID)
	e.Fixed(id.DomainID[:])
	e.Fixed(id.GenerationID[:])
	e.Fixed(id.ConfigurationFingerprint[:])
	e.Fixed(id.NetworkSidecarID[:])
	e.Fixed(id.DerivedPolicyDigest[:])
	id.EnforcementNamespace.MarshalPostcard(e)
}

// UnmarshalPostcard refuses a foreign schema ID before reading further.
func (id *NetworkReadinessIdentity) UnmarshalPostcard(d *postcard.Decoder) {
	*id = NetworkReadinessIdentity{}
	id.SchemaID = checkSchema(d, "network readiness identity", IdentitySchemaID)
	if d.Err() != nil {
		return
	}
	d.Fixed(id.DomainID[:])
	d.Fixed(id.GenerationID[:])
	d.Fixed(id.ConfigurationFingerprint[:])
	d.Fixed(id.NetworkSidecarID[:])
	d.Fixed(id.DerivedPolicyDigest[:])
	id.EnforcementNamespace.UnmarshalPostcard(d)
}

// MarshalPostcard writes domain_id, generation_id, enforcement_namespace,
// then the denied, permitted and DNS observation lists.
func (p *NetworkReachabilityProbe) MarshalPostcard(e *postcard.Encoder) {
	e.Fixed(p.DomainID[:])
	e.Fixed(p.GenerationID[:])
	p.EnforcementNamespace.MarshalPostcard(e)
	e.SeqLen(len(p.Denied))
	for _, o := range p.Denied {
		writeDestination(e, o.Destination)
		e.Bool(o.Unreachable)
	}
	e.SeqLen(len(p.Permitted))
	for _, o := range p.Permitted {
		writeDestination(e, o.Destination)
		e.Bool(o.Reachable)
	}
	e.SeqLen(len(p.DNS))
	for _, o := range p.DNS {
		writeIPv4(e, o.Resolver)
		e.String(o.QueryName)
		e.SeqLen(len(o.ResolvedAddresses))
		for _, a := range o.ResolvedAddresses {
			writeIPv4(e, a)
		}
	}
	if p.Names != nil {
		p.Names.marshal(e)
	}
}

// UnmarshalPostcard reads what MarshalPostcard writes and validates it.
func (p *NetworkReachabilityProbe) UnmarshalPostcard(d *postcard.Decoder) {
	*p = NetworkReachabilityProbe{}
	d.Fixed(p.DomainID[:])
	d.Fixed(p.GenerationID[:])
	p.EnforcementNamespace.UnmarshalPostcard(d)
	p.Denied = make([]DeniedDestinationObservation, d.SeqLen(6))
	for i := range p.Denied {
		p.Denied[i].Destination = readDestination(d)
		p.Denied[i].Unreachable = d.Bool()
	}
	p.Permitted = make([]PermittedDestinationObservation, d.SeqLen(6))
	for i := range p.Permitted {
		p.Permitted[i].Destination = readDestination(d)
		p.Permitted[i].Reachable = d.Bool()
	}
	p.DNS = make([]DNSObservation, d.SeqLen(6))
	for i := range p.DNS {
		o := &p.DNS[i]
		o.Resolver = readIPv4(d)
		o.QueryName = d.String()
		o.ResolvedAddresses = make([]netip.Addr, d.SeqLen(4))
		for j := range o.ResolvedAddresses {
			o.ResolvedAddresses[j] = readIPv4(d)
		}
		if d.Err() != nil {
			return
		}
	}
	// The name section follows only in a probe of a policy with names;
	// a v1 probe ends here, and so its bytes are unchanged.
	if d.Remaining() > 0 {
		p.Names = &NameObservations{}
		p.Names.unmarshal(d)
	}
	failInvalid(d, p.Validate())
}

// Encode validates a and returns its encoding.
func (a *NetworkReadinessAttestation) Encode() ([]byte, error) {
	if err := a.Validate(); err != nil {
		return nil, fmt.Errorf("encoding network readiness attestation: %w", err)
	}
	return postcard.Marshal(a), nil
}

// Encode validates id and returns its encoding.
func (id *NetworkReadinessIdentity) Encode() ([]byte, error) {
	if err := id.Validate(); err != nil {
		return nil, fmt.Errorf("encoding network readiness identity: %w", err)
	}
	return postcard.Marshal(id), nil
}

// Encode validates p and returns its encoding.
func (p *NetworkReachabilityProbe) Encode() ([]byte, error) {
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("encoding network reachability probe: %w", err)
	}
	return postcard.Marshal(p), nil
}

// DecodeAttestation decodes a v1 attestation and refuses anything else.
func DecodeAttestation(b []byte) (*NetworkReadinessAttestation, error) {
	var a NetworkReadinessAttestation
	if err := postcard.Unmarshal(b, &a); err != nil {
		return nil, fmt.Errorf("decoding network readiness attestation: %w", err)
	}
	return &a, nil
}

// DecodeIdentity decodes a v1 readiness identity and refuses anything else.
func DecodeIdentity(b []byte) (*NetworkReadinessIdentity, error) {
	var id NetworkReadinessIdentity
	if err := postcard.Unmarshal(b, &id); err != nil {
		return nil, fmt.Errorf("decoding network readiness identity: %w", err)
	}
	return &id, nil
}

// DecodeProbe decodes a canonical reachability probe.
func DecodeProbe(b []byte) (*NetworkReachabilityProbe, error) {
	var p NetworkReachabilityProbe
	if err := postcard.Unmarshal(b, &p); err != nil {
		return nil, fmt.Errorf("decoding network reachability probe: %w", err)
	}
	return &p, nil
}
