package netpolicy

import (
	"encoding/hex"
	"fmt"
	"slices"

	"lazaret.dev/pkg/hostid"
	"lazaret.dev/pkg/ids"
	"lazaret.dev/pkg/postcard"
)

// NetworkReadinessEvidence is what the Host Coordinator records in the
// Network participant once it has accepted a sidecar's attestation and the
// generation-bound reachability probe.
//
// The four schema fields (domain_id, generation_id, network_sidecar_id,
// readiness_fingerprint) name the generation and the fingerprint of the
// attestation's projected identity. The accepted attestation and the probe
// follow them in full, in that order, so that recorded evidence can be
// re-verified from the Domain Store alone: the process identities and
// observations stay available as evidence without entering the fingerprint.
// Build it with Bind; a decoded value is self-consistent (Validate) but must
// still be checked against the enclosing participant with Verify.
type NetworkReadinessEvidence struct {
	DomainID             ids.DomainID
	GenerationID         ids.GenerationID
	NetworkSidecarID     ids.SidecarID
	ReadinessFingerprint ids.Digest
	Attestation          NetworkReadinessAttestation
	Probe                NetworkReachabilityProbe
}

// Expected is what the Host Coordinator knows without asking the sidecar:
// the generation it is starting, the configuration fingerprint and policy
// digest it computed, the enforcement namespace and the committed Network
// Runtime Supervisor and connectivity helper it recorded, and the selected
// profile's readiness targets.
type Expected struct {
	DomainID                 ids.DomainID
	GenerationID             ids.GenerationID
	ConfigurationFingerprint ids.Digest
	NetworkSidecarID         ids.SidecarID
	DerivedPolicyDigest      ids.Digest
	EnforcementNamespace     hostid.NamespaceIdentity
	RuntimeSupervisor        hostid.PidfsProcessIdentityV1
	ConnectivityHelper       hostid.PidfsProcessIdentityV1
	Targets                  Targets
}

// Identity is the v1 readiness identity the coordinator expects.
func (w *Expected) Identity() NetworkReadinessIdentity {
	return NetworkReadinessIdentity{
		SchemaID:                 IdentitySchemaID,
		DomainID:                 w.DomainID,
		GenerationID:             w.GenerationID,
		ConfigurationFingerprint: w.ConfigurationFingerprint,
		NetworkSidecarID:         w.NetworkSidecarID,
		DerivedPolicyDigest:      w.DerivedPolicyDigest,
		EnforcementNamespace:     w.EnforcementNamespace,
	}
}

// ReadinessFingerprint is the fingerprint of Identity.
func (w *Expected) ReadinessFingerprint() ids.Digest {
	id := w.Identity()
	return digestOf(IdentitySchemaID, postcard.Marshal(&id))
}

// Bind accepts a sidecar's attestation and reachability probe for the
// generation that want describes and returns the evidence to record. It
// refuses, with a typed error, a foreign schema ID (*SchemaError), any field
// that names another domain, generation, sidecar, configuration, policy,
// namespace or process (*MismatchError), an unready helper or unattested
// routes, and any readiness target that was not probed, was probed but is
// not configured, or had the wrong result (*TargetError).
func Bind(want *Expected, att *NetworkReadinessAttestation, probe *NetworkReachabilityProbe) (*NetworkReadinessEvidence, error) {
	id, err := att.Project()
	if err != nil {
		return nil, fmt.Errorf("binding network readiness: %w", err)
	}
	fp, err := id.Fingerprint()
	if err != nil {
		return nil, fmt.Errorf("binding network readiness: %w", err)
	}
	e := &NetworkReadinessEvidence{
		DomainID:             att.DomainID,
		GenerationID:         att.GenerationID,
		NetworkSidecarID:     att.NetworkSidecarID,
		ReadinessFingerprint: fp,
		Attestation:          cloneAttestation(att),
		Probe:                cloneProbe(probe),
	}
	if err := e.Verify(want); err != nil {
		return nil, fmt.Errorf("binding network readiness: %w", err)
	}
	return e, nil
}

func cloneAttestation(a *NetworkReadinessAttestation) NetworkReadinessAttestation {
	c := *a
	c.Observation.ObservedRoutes = slices.Clone(a.Observation.ObservedRoutes)
	return c
}

func cloneProbe(p *NetworkReachabilityProbe) NetworkReachabilityProbe {
	c := *p
	c.Denied = slices.Clone(p.Denied)
	c.Permitted = slices.Clone(p.Permitted)
	c.DNS = slices.Clone(p.DNS)
	for i := range c.DNS {
		c.DNS[i].ResolvedAddresses = slices.Clone(p.DNS[i].ResolvedAddresses)
	}
	return c
}

func hexOf(b []byte) string { return hex.EncodeToString(b) }

func nsString(n hostid.NamespaceIdentity) string {
	return fmt.Sprintf("namespace(dev=%d ino=%d)", n.Device, n.Inode)
}

type fieldCheck struct {
	field     string
	got, want string
	equal     bool
}

func firstMismatch(record string, checks []fieldCheck) error {
	for _, c := range checks {
		if !c.equal {
			return &MismatchError{Record: record, Field: c.field, Got: c.got, Want: c.want}
		}
	}
	return nil
}

// Verify checks recorded or freshly bound evidence against the enclosing
// participant: it must name want's domain and generation, carry the
// fingerprint of want's identity (and so its configuration fingerprint,
// policy digest and namespace), attest want's committed Runtime Supervisor
// and connectivity helper, and hold a probe of this generation that covers
// every configured target with the right result and nothing else.
func (e *NetworkReadinessEvidence) Verify(want *Expected) error {
	a := &e.Attestation
	if _, err := a.Project(); err != nil {
		return err
	}
	if err := firstMismatch("readiness attestation", []fieldCheck{
		{"domain_id", hexOf(a.DomainID[:]), hexOf(want.DomainID[:]), a.DomainID == want.DomainID},
		{"generation_id", hexOf(a.GenerationID[:]), hexOf(want.GenerationID[:]), a.GenerationID == want.GenerationID},
		{"configuration_fingerprint", hexOf(a.ConfigurationFingerprint[:]), hexOf(want.ConfigurationFingerprint[:]), a.ConfigurationFingerprint == want.ConfigurationFingerprint},
		{"network_sidecar_id", hexOf(a.NetworkSidecarID[:]), hexOf(want.NetworkSidecarID[:]), a.NetworkSidecarID == want.NetworkSidecarID},
		{"derived_policy_digest", hexOf(a.DerivedPolicyDigest[:]), hexOf(want.DerivedPolicyDigest[:]), a.DerivedPolicyDigest == want.DerivedPolicyDigest},
		{"enforcement_namespace", nsString(a.EnforcementNamespace), nsString(want.EnforcementNamespace), a.EnforcementNamespace == want.EnforcementNamespace},
		{"runtime_supervisor", a.RuntimeSupervisor.String(), want.RuntimeSupervisor.String(), a.RuntimeSupervisor == want.RuntimeSupervisor},
		{"connectivity_helper", a.ConnectivityHelper.String(), want.ConnectivityHelper.String(), a.ConnectivityHelper == want.ConnectivityHelper},
	}); err != nil {
		return err
	}
	wfp := want.ReadinessFingerprint()
	if err := firstMismatch("readiness evidence", []fieldCheck{
		{"domain_id", hexOf(e.DomainID[:]), hexOf(want.DomainID[:]), e.DomainID == want.DomainID},
		{"generation_id", hexOf(e.GenerationID[:]), hexOf(want.GenerationID[:]), e.GenerationID == want.GenerationID},
		{"network_sidecar_id", hexOf(e.NetworkSidecarID[:]), hexOf(want.NetworkSidecarID[:]), e.NetworkSidecarID == want.NetworkSidecarID},
		{"readiness_fingerprint", hexOf(e.ReadinessFingerprint[:]), hexOf(wfp[:]), e.ReadinessFingerprint == wfp},
	}); err != nil {
		return err
	}
	if err := e.Validate(); err != nil {
		return err
	}
	return checkCoverage(&e.Probe, &want.Targets)
}

// Validate checks that the evidence is self-consistent and describes an
// accepted readiness: a valid v1 attestation whose projection has the
// recorded fingerprint and names the recorded domain, generation and
// sidecar; a ready helper and attested routes; a canonical probe of the same
// domain, generation and namespace in which every denied target was
// unreachable, every permitted target reachable and every DNS query
// resolved. Which targets must be present is configuration, checked by
// Verify.
func (e *NetworkReadinessEvidence) Validate() error {
	a := &e.Attestation
	if err := a.Validate(); err != nil {
		return err
	}
	id, err := a.Project()
	if err != nil {
		return err
	}
	fp, err := id.Fingerprint()
	if err != nil {
		return err
	}
	if err := firstMismatch("readiness evidence", []fieldCheck{
		{"domain_id", hexOf(e.DomainID[:]), hexOf(a.DomainID[:]), e.DomainID == a.DomainID},
		{"generation_id", hexOf(e.GenerationID[:]), hexOf(a.GenerationID[:]), e.GenerationID == a.GenerationID},
		{"network_sidecar_id", hexOf(e.NetworkSidecarID[:]), hexOf(a.NetworkSidecarID[:]), e.NetworkSidecarID == a.NetworkSidecarID},
		{"readiness_fingerprint", hexOf(e.ReadinessFingerprint[:]), hexOf(fp[:]), e.ReadinessFingerprint == fp},
	}); err != nil {
		return err
	}
	p := &e.Probe
	if err := firstMismatch("reachability probe", []fieldCheck{
		{"domain_id", hexOf(p.DomainID[:]), hexOf(a.DomainID[:]), p.DomainID == a.DomainID},
		{"generation_id", hexOf(p.GenerationID[:]), hexOf(a.GenerationID[:]), p.GenerationID == a.GenerationID},
		{"enforcement_namespace", nsString(p.EnforcementNamespace), nsString(a.EnforcementNamespace), p.EnforcementNamespace == a.EnforcementNamespace},
	}); err != nil {
		return err
	}
	o := &a.Observation
	if o.PolicyDelivery != SealedMemfd {
		return fieldErr("observation.policy_delivery", o.PolicyDelivery, ErrUnknownValue)
	}
	if !o.HelperReady {
		return fieldErr("observation.helper_ready", nil, ErrHelperNotReady)
	}
	if !o.RoutesAttested || len(o.ObservedRoutes) == 0 {
		return fieldErr("observation.routes_attested", nil, ErrRoutesNotAttested)
	}
	if err := p.Validate(); err != nil {
		return err
	}
	for _, d := range p.Denied {
		if !d.Unreachable {
			return &TargetError{Kind: TargetDenied, Target: d.Destination.String(), Err: ErrTargetReachable}
		}
	}
	for _, d := range p.Permitted {
		if !d.Reachable {
			return &TargetError{Kind: TargetPermitted, Target: d.Destination.String(), Err: ErrTargetUnreachable}
		}
	}
	for _, d := range p.DNS {
		if len(d.ResolvedAddresses) == 0 {
			return &TargetError{Kind: TargetDNS, Target: d.target().String(), Err: ErrTargetUnresolved}
		}
	}
	if p.Names != nil {
		return p.Names.judge()
	}
	return nil
}

// checkCoverage requires that the probe holds exactly the configured
// targets. Results were judged by Validate.
func checkCoverage(p *NetworkReachabilityProbe, t *Targets) error {
	switch {
	case p.Names != nil:
		if err := p.Names.coverage(t.Hosts); err != nil {
			return err
		}
	case len(t.Hosts) > 0:
		return &TargetError{Kind: TargetHost, Target: t.Hosts[0].String(), Err: ErrTargetNotProbed}
	}
	for _, dst := range t.Denied {
		if _, ok := slices.BinarySearchFunc(p.Denied, dst, func(o DeniedDestinationObservation, k Destination) int {
			return compareDestination(o.Destination, k)
		}); !ok {
			return &TargetError{Kind: TargetDenied, Target: dst.String(), Err: ErrTargetNotProbed}
		}
	}
	for _, dst := range t.Permitted {
		if _, ok := slices.BinarySearchFunc(p.Permitted, dst, func(o PermittedDestinationObservation, k Destination) int {
			return compareDestination(o.Destination, k)
		}); !ok {
			return &TargetError{Kind: TargetPermitted, Target: dst.String(), Err: ErrTargetNotProbed}
		}
	}
	for _, q := range t.DNS {
		if _, ok := slices.BinarySearchFunc(p.DNS, q, func(o DNSObservation, k DNSTarget) int {
			return compareDNSTarget(o.target(), k)
		}); !ok {
			return &TargetError{Kind: TargetDNS, Target: q.String(), Err: ErrTargetNotProbed}
		}
	}
	for _, o := range p.Denied {
		if !slices.Contains(t.Denied, o.Destination) {
			return &TargetError{Kind: TargetDenied, Target: o.Destination.String(), Err: ErrTargetNotConfigured}
		}
	}
	for _, o := range p.Permitted {
		if !slices.Contains(t.Permitted, o.Destination) {
			return &TargetError{Kind: TargetPermitted, Target: o.Destination.String(), Err: ErrTargetNotConfigured}
		}
	}
	for _, o := range p.DNS {
		if !slices.Contains(t.DNS, o.target()) {
			return &TargetError{Kind: TargetDNS, Target: o.target().String(), Err: ErrTargetNotConfigured}
		}
	}
	return nil
}

// MarshalPostcard writes the four schema fields, then the attestation and
// the probe.
func (e *NetworkReadinessEvidence) MarshalPostcard(enc *postcard.Encoder) {
	enc.Fixed(e.DomainID[:])
	enc.Fixed(e.GenerationID[:])
	enc.Fixed(e.NetworkSidecarID[:])
	enc.Fixed(e.ReadinessFingerprint[:])
	e.Attestation.MarshalPostcard(enc)
	e.Probe.MarshalPostcard(enc)
}

// UnmarshalPostcard reads what MarshalPostcard writes and refuses evidence
// that is not self-consistent.
func (e *NetworkReadinessEvidence) UnmarshalPostcard(d *postcard.Decoder) {
	*e = NetworkReadinessEvidence{}
	d.Fixed(e.DomainID[:])
	d.Fixed(e.GenerationID[:])
	d.Fixed(e.NetworkSidecarID[:])
	d.Fixed(e.ReadinessFingerprint[:])
	e.Attestation.UnmarshalPostcard(d)
	e.Probe.UnmarshalPostcard(d)
	failInvalid(d, e.Validate())
}

// Encode validates e and returns its encoding.
func (e *NetworkReadinessEvidence) Encode() ([]byte, error) {
	if err := e.Validate(); err != nil {
		return nil, fmt.Errorf("encoding network readiness evidence: %w", err)
	}
	return postcard.Marshal(e), nil
}

// DecodeEvidence decodes self-consistent readiness evidence.
func DecodeEvidence(b []byte) (*NetworkReadinessEvidence, error) {
	var e NetworkReadinessEvidence
	if err := postcard.Unmarshal(b, &e); err != nil {
		return nil, fmt.Errorf("decoding network readiness evidence: %w", err)
	}
	return &e, nil
}
