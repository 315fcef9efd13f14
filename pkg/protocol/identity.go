package protocol

import (
	"crypto/sha256"
	"fmt"

	"lazaret.dev/pkg/ids"
	"lazaret.dev/pkg/postcard"
)

// GenerationIdentity names one generation of one Domain. Two identities are
// equal exactly when == holds.
type GenerationIdentity struct {
	AgentProfile             string
	DomainID                 ids.DomainID
	GenerationID             ids.GenerationID
	ConfigurationFingerprint ids.Digest
	CoordinatorID            ids.CoordinatorID
	SandboxID                ids.SandboxID
}

// TrustManifest roots a generation's protocol trust: the TLS CA and the
// protocol issuer key. The issuer signs the encoding of every field before
// issuer_signature under SignatureTrustManifest; Digest covers the complete
// encoding including the signature.
type TrustManifest struct {
	GenerationIdentity      GenerationIdentity
	TLSCASHA256             ids.Digest
	ProtocolIssuerPublicKey PublicKey
	IssuerSignature         Signature
}

// TLSRole is the role a TLS certificate serves.
type TLSRole uint32

// TLS roles, in variant order.
const (
	TLSRoleSessionCoordinator TLSRole = iota
	TLSRoleClientCLI
	numTLSRoles
)

// TLSCredential is a certificate issued by the generation TLS CA.
// SubjectID is the CoordinatorID for TLSRoleSessionCoordinator and the CLIID
// for TLSRoleClientCLI; CertificateSHA256 is SHA-256 of CertificateDER.
type TLSCredential struct {
	GenerationIdentity GenerationIdentity
	Role               TLSRole
	SubjectID          ids.ID
	CertificateDER     []byte
	CertificateSHA256  ids.Digest
}

// ProtocolPublicationIdentity is the content of a generation's identity
// file: what a CLI needs to reach the control socket and pin its server.
type ProtocolPublicationIdentity struct {
	GenerationIdentity              GenerationIdentity
	TLSCACertificateDER             []byte
	TrustManifestSHA256             ids.Digest
	CoordinatorTLSCertificateSHA256 ids.Digest
}

// ProtocolCredentialRole is the role a protocol signing key serves.
type ProtocolCredentialRole uint32

// Protocol credential roles, in variant order.
const (
	RoleSessionCoordinator ProtocolCredentialRole = iota
	RoleAgentSandbox
	numCredentialRoles
)

// ProtocolCredential binds an Ed25519 key to a role in one generation. It is
// issued by the trust manifest's protocol issuer key. SubjectID is the
// CoordinatorID for RoleSessionCoordinator and the SandboxID for
// RoleAgentSandbox.
type ProtocolCredential struct {
	CredentialID       CredentialID
	GenerationIdentity GenerationIdentity
	Role               ProtocolCredentialRole
	SubjectID          ids.ID
	PublicKey          PublicKey
	IssuerSignature    Signature
}

// SessionBinding binds a session to its CLI and to the session anchor key
// that signs the developer's decisions.
type SessionBinding struct {
	GenerationIdentity     GenerationIdentity
	CLIID                  ids.CLIID
	SessionID              ids.SessionID
	SessionAnchorPublicKey PublicKey
}

// SessionRequestCapability lets the sandbox credential make requests on
// behalf of one session; the coordinator credential signs it.
type SessionRequestCapability struct {
	CapabilityID            CapabilityID
	SessionBinding          SessionBinding
	CoordinatorCredentialID CredentialID
	SandboxCredentialID     CredentialID
	CoordinatorSignature    Signature
}

// SandboxCredentialBundle is what the Agent Sandbox receives: the trust
// manifest, the coordinator credential it verifies results with, and its
// own credential and signing key.
type SandboxCredentialBundle struct {
	GenerationIdentity            GenerationIdentity
	TrustManifest                 TrustManifest
	CoordinatorProtocolCredential ProtocolCredential
	SandboxProtocolCredential     ProtocolCredential
	SandboxPrivateKey             PrivateKey
}

func (r TLSRole) String() string {
	switch r {
	case TLSRoleSessionCoordinator:
		return "SessionCoordinator"
	case TLSRoleClientCLI:
		return "ClientCLI"
	}
	return fmt.Sprintf("TLSRole(%d)", uint32(r))
}

func (r ProtocolCredentialRole) String() string {
	switch r {
	case RoleSessionCoordinator:
		return "SessionCoordinator"
	case RoleAgentSandbox:
		return "AgentSandbox"
	}
	return fmt.Sprintf("ProtocolCredentialRole(%d)", uint32(r))
}

// --- GenerationIdentity

func (g *GenerationIdentity) check() (string, error) {
	if err := checkProfile(g.AgentProfile); err != nil {
		return "agent_profile", err
	}
	if g.DomainID == (ids.DomainID{}) {
		return "domain_id", invalid("digest is all zero")
	}
	if err := nonzero16(g.GenerationID); err != nil {
		return "generation_id", err
	}
	if g.ConfigurationFingerprint == (ids.Digest{}) {
		return "configuration_fingerprint", invalid("digest is all zero")
	}
	if err := nonzero16(g.CoordinatorID); err != nil {
		return "coordinator_id", err
	}
	if err := nonzero16(g.SandboxID); err != nil {
		return "sandbox_id", err
	}
	if [16]byte(g.CoordinatorID) == [16]byte(g.SandboxID) {
		return "sandbox_id", invalid("equals coordinator_id")
	}
	return "", nil
}

// Validate checks the profile name, that no ID or digest is zero, and that
// the coordinator and sandbox IDs differ.
func (g *GenerationIdentity) Validate() error {
	if field, err := g.check(); err != nil {
		return fieldError("generation-identity", field, err)
	}
	return nil
}

// MarshalPostcard writes agent_profile, domain_id, generation_id,
// configuration_fingerprint, coordinator_id, sandbox_id.
func (g *GenerationIdentity) MarshalPostcard(e *postcard.Encoder) {
	e.String(g.AgentProfile)
	e.Fixed(g.DomainID[:])
	e.Fixed(g.GenerationID[:])
	e.Fixed(g.ConfigurationFingerprint[:])
	e.Fixed(g.CoordinatorID[:])
	e.Fixed(g.SandboxID[:])
}

// UnmarshalPostcard reads what MarshalPostcard writes and validates it.
func (g *GenerationIdentity) UnmarshalPostcard(d *postcard.Decoder) {
	g.AgentProfile = d.String()
	d.Fixed(g.DomainID[:])
	d.Fixed(g.GenerationID[:])
	d.Fixed(g.ConfigurationFingerprint[:])
	d.Fixed(g.CoordinatorID[:])
	d.Fixed(g.SandboxID[:])
	if d.Err() == nil {
		if field, err := g.check(); err != nil {
			d.Fail("generation_identity."+field, err)
		}
	}
}

// --- TrustManifest

// Validate checks the generation identity and that no key or digest is zero.
func (m *TrustManifest) Validate() error {
	if field, err := m.check(); err != nil {
		return fieldError(SignatureTrustManifest, field, err)
	}
	return nil
}

func (m *TrustManifest) check() (string, error) {
	if field, err := m.GenerationIdentity.check(); err != nil {
		return "generation_identity." + field, err
	}
	if m.TLSCASHA256 == (ids.Digest{}) {
		return "tls_ca_sha256", invalid("digest is all zero")
	}
	if m.ProtocolIssuerPublicKey == (PublicKey{}) {
		return "protocol_issuer_public_key", invalid("key is all zero")
	}
	return "", nil
}

// MarshalPostcard writes protocol_version, generation_identity,
// tls_ca_sha256, protocol_issuer_public_key, issuer_signature.
func (m *TrustManifest) MarshalPostcard(e *postcard.Encoder) {
	m.marshalUnsigned(e)
	e.Fixed(m.IssuerSignature[:])
}

func (m *TrustManifest) marshalUnsigned(e *postcard.Encoder) {
	writeVersion(e)
	m.GenerationIdentity.MarshalPostcard(e)
	e.Fixed(m.TLSCASHA256[:])
	e.Fixed(m.ProtocolIssuerPublicKey[:])
}

// UnmarshalPostcard reads what MarshalPostcard writes.
func (m *TrustManifest) UnmarshalPostcard(d *postcard.Decoder) {
	readVersion(d)
	m.GenerationIdentity.UnmarshalPostcard(d)
	d.Fixed(m.TLSCASHA256[:])
	d.Fixed(m.ProtocolIssuerPublicKey[:])
	d.Fixed(m.IssuerSignature[:])
	if d.Err() == nil {
		if field, err := m.check(); err != nil {
			d.Fail(field, err)
		}
	}
}

// SignedBytes is what the issuer signs: the encoding of every field before
// issuer_signature.
func (m *TrustManifest) SignedBytes() []byte {
	var e postcard.Encoder
	m.marshalUnsigned(&e)
	return e.Bytes()
}

// Digest is SHA-256 over the complete encoding, signature included.
func (m *TrustManifest) Digest() ids.Digest { return digest(postcard.Marshal(m)) }

// --- TLSCredential

func (c *TLSCredential) check() (string, error) {
	if field, err := c.GenerationIdentity.check(); err != nil {
		return "generation_identity." + field, err
	}
	if c.Role >= numTLSRoles {
		return "role", invalid("unknown role %d", c.Role)
	}
	if err := nonzero16(c.SubjectID); err != nil {
		return "subject_id", err
	}
	if err := checkBounded(c.CertificateDER, 1, MaxDERBytes); err != nil {
		return "certificate_der", err
	}
	if sha256.Sum256(c.CertificateDER) != c.CertificateSHA256 {
		return "certificate_sha256", invalid("differs from SHA-256 of certificate_der")
	}
	return "", nil
}

// Validate checks the fields and that CertificateSHA256 is the digest of
// CertificateDER.
func (c *TLSCredential) Validate() error {
	if field, err := c.check(); err != nil {
		return fieldError("tls-credential", field, err)
	}
	return nil
}

// MarshalPostcard writes generation_identity, role, subject_id,
// certificate_der, certificate_sha256.
func (c *TLSCredential) MarshalPostcard(e *postcard.Encoder) {
	c.GenerationIdentity.MarshalPostcard(e)
	e.Variant(uint32(c.Role))
	e.Fixed(c.SubjectID[:])
	e.ByteString(c.CertificateDER)
	e.Fixed(c.CertificateSHA256[:])
}

// UnmarshalPostcard reads what MarshalPostcard writes and checks the digest.
func (c *TLSCredential) UnmarshalPostcard(d *postcard.Decoder) {
	c.GenerationIdentity.UnmarshalPostcard(d)
	c.Role = TLSRole(d.Variant(uint32(numTLSRoles)))
	readID(d, (*[16]byte)(&c.SubjectID), "subject_id")
	c.CertificateDER = readBounded(d, "certificate_der", 1, MaxDERBytes)
	d.Fixed(c.CertificateSHA256[:])
	if d.Err() == nil {
		if field, err := c.check(); err != nil {
			d.Fail(field, err)
		}
	}
}

// --- ProtocolPublicationIdentity

func (p *ProtocolPublicationIdentity) check() (string, error) {
	if field, err := p.GenerationIdentity.check(); err != nil {
		return "generation_identity." + field, err
	}
	if err := checkBounded(p.TLSCACertificateDER, 1, MaxDERBytes); err != nil {
		return "tls_ca_certificate_der", err
	}
	if p.TrustManifestSHA256 == (ids.Digest{}) {
		return "trust_manifest_sha256", invalid("digest is all zero")
	}
	if p.CoordinatorTLSCertificateSHA256 == (ids.Digest{}) {
		return "coordinator_tls_certificate_sha256", invalid("digest is all zero")
	}
	return "", nil
}

// Validate checks the fields.
func (p *ProtocolPublicationIdentity) Validate() error {
	if field, err := p.check(); err != nil {
		return fieldError("protocol-publication-identity", field, err)
	}
	return nil
}

// MarshalPostcard writes protocol_version, generation_identity,
// tls_ca_certificate_der, trust_manifest_sha256,
// coordinator_tls_certificate_sha256.
func (p *ProtocolPublicationIdentity) MarshalPostcard(e *postcard.Encoder) {
	writeVersion(e)
	p.GenerationIdentity.MarshalPostcard(e)
	e.ByteString(p.TLSCACertificateDER)
	e.Fixed(p.TrustManifestSHA256[:])
	e.Fixed(p.CoordinatorTLSCertificateSHA256[:])
}

// UnmarshalPostcard reads what MarshalPostcard writes.
func (p *ProtocolPublicationIdentity) UnmarshalPostcard(d *postcard.Decoder) {
	readVersion(d)
	p.GenerationIdentity.UnmarshalPostcard(d)
	p.TLSCACertificateDER = readBounded(d, "tls_ca_certificate_der", 1, MaxDERBytes)
	d.Fixed(p.TrustManifestSHA256[:])
	d.Fixed(p.CoordinatorTLSCertificateSHA256[:])
	if d.Err() == nil {
		if field, err := p.check(); err != nil {
			d.Fail(field, err)
		}
	}
}

// --- ProtocolCredential

func (c *ProtocolCredential) check() (string, error) {
	if field, err := c.GenerationIdentity.check(); err != nil {
		return "generation_identity." + field, err
	}
	if c.Role >= numCredentialRoles {
		return "role", invalid("unknown role %d", c.Role)
	}
	if err := nonzero16(c.SubjectID); err != nil {
		return "subject_id", err
	}
	if c.PublicKey == (PublicKey{}) {
		return "public_key", invalid("key is all zero")
	}
	return "", nil
}

// Validate checks the fields. It does not check the ID or the signature;
// VerifyProtocolCredential does.
func (c *ProtocolCredential) Validate() error {
	if field, err := c.check(); err != nil {
		return fieldError(SignatureProtocolCredential, field, err)
	}
	return nil
}

// MarshalPostcard writes protocol_version, credential_id,
// generation_identity, role, subject_id, public_key, issuer_signature.
func (c *ProtocolCredential) MarshalPostcard(e *postcard.Encoder) {
	c.marshalUnsigned(e)
	e.Fixed(c.IssuerSignature[:])
}

func (c *ProtocolCredential) marshalUnsigned(e *postcard.Encoder) {
	writeVersion(e)
	e.Fixed(c.CredentialID[:])
	c.GenerationIdentity.MarshalPostcard(e)
	e.Variant(uint32(c.Role))
	e.Fixed(c.SubjectID[:])
	e.Fixed(c.PublicKey[:])
}

// UnmarshalPostcard reads what MarshalPostcard writes.
func (c *ProtocolCredential) UnmarshalPostcard(d *postcard.Decoder) {
	readVersion(d)
	d.Fixed(c.CredentialID[:])
	c.GenerationIdentity.UnmarshalPostcard(d)
	c.Role = ProtocolCredentialRole(d.Variant(uint32(numCredentialRoles)))
	readID(d, (*[16]byte)(&c.SubjectID), "subject_id")
	d.Fixed(c.PublicKey[:])
	d.Fixed(c.IssuerSignature[:])
	if d.Err() == nil {
		if field, err := c.check(); err != nil {
			d.Fail(field, err)
		}
	}
}

// ClaimBytes is the ID preimage: protocol_version, generation_identity,
// role, subject_id, public_key (every field but credential_id and
// issuer_signature), minimally encoded in field order.
func (c *ProtocolCredential) ClaimBytes() []byte {
	var e postcard.Encoder
	writeVersion(&e)
	c.GenerationIdentity.MarshalPostcard(&e)
	e.Variant(uint32(c.Role))
	e.Fixed(c.SubjectID[:])
	e.Fixed(c.PublicKey[:])
	return e.Bytes()
}

// ComputeID is SHA-256 of ClaimBytes.
func (c *ProtocolCredential) ComputeID() CredentialID { return CredentialID(digest(c.ClaimBytes())) }

// SignedBytes is what the issuer signs under SignatureProtocolCredential:
// the encoding of every field before issuer_signature (credential_id
// included).
func (c *ProtocolCredential) SignedBytes() []byte {
	var e postcard.Encoder
	c.marshalUnsigned(&e)
	return e.Bytes()
}

// --- SessionBinding

func (b *SessionBinding) check() (string, error) {
	if field, err := b.GenerationIdentity.check(); err != nil {
		return "generation_identity." + field, err
	}
	if err := nonzero16(b.CLIID); err != nil {
		return "cli_id", err
	}
	if err := nonzero16(b.SessionID); err != nil {
		return "session_id", err
	}
	if b.SessionAnchorPublicKey == (PublicKey{}) {
		return "session_anchor_public_key", invalid("key is all zero")
	}
	return "", nil
}

// Validate checks the fields.
func (b *SessionBinding) Validate() error {
	if field, err := b.check(); err != nil {
		return fieldError("session-binding", field, err)
	}
	return nil
}

// MarshalPostcard writes generation_identity, cli_id, session_id,
// session_anchor_public_key.
func (b *SessionBinding) MarshalPostcard(e *postcard.Encoder) {
	b.GenerationIdentity.MarshalPostcard(e)
	e.Fixed(b.CLIID[:])
	e.Fixed(b.SessionID[:])
	e.Fixed(b.SessionAnchorPublicKey[:])
}

// UnmarshalPostcard reads what MarshalPostcard writes.
func (b *SessionBinding) UnmarshalPostcard(d *postcard.Decoder) {
	b.GenerationIdentity.UnmarshalPostcard(d)
	d.Fixed(b.CLIID[:])
	d.Fixed(b.SessionID[:])
	d.Fixed(b.SessionAnchorPublicKey[:])
	if d.Err() == nil {
		if field, err := b.check(); err != nil {
			d.Fail("session_binding."+field, err)
		}
	}
}

// --- SessionRequestCapability

func (c *SessionRequestCapability) check() (string, error) {
	if field, err := c.SessionBinding.check(); err != nil {
		return "session_binding." + field, err
	}
	if c.CoordinatorCredentialID == c.SandboxCredentialID {
		return "sandbox_credential_id", invalid("equals coordinator_credential_id")
	}
	return "", nil
}

// Validate checks the fields. VerifyCapability checks the ID and signature.
func (c *SessionRequestCapability) Validate() error {
	if field, err := c.check(); err != nil {
		return fieldError(SignatureSessionRequestCapability, field, err)
	}
	return nil
}

// MarshalPostcard writes protocol_version, capability_id, session_binding,
// coordinator_credential_id, sandbox_credential_id, coordinator_signature.
func (c *SessionRequestCapability) MarshalPostcard(e *postcard.Encoder) {
	c.marshalUnsigned(e)
	e.Fixed(c.CoordinatorSignature[:])
}

func (c *SessionRequestCapability) marshalUnsigned(e *postcard.Encoder) {
	writeVersion(e)
	e.Fixed(c.CapabilityID[:])
	c.SessionBinding.MarshalPostcard(e)
	e.Fixed(c.CoordinatorCredentialID[:])
	e.Fixed(c.SandboxCredentialID[:])
}

// UnmarshalPostcard reads what MarshalPostcard writes.
func (c *SessionRequestCapability) UnmarshalPostcard(d *postcard.Decoder) {
	readVersion(d)
	d.Fixed(c.CapabilityID[:])
	c.SessionBinding.UnmarshalPostcard(d)
	d.Fixed(c.CoordinatorCredentialID[:])
	d.Fixed(c.SandboxCredentialID[:])
	d.Fixed(c.CoordinatorSignature[:])
	if d.Err() == nil {
		if field, err := c.check(); err != nil {
			d.Fail(field, err)
		}
	}
}

// ClaimBytes is the ID preimage: protocol_version, session_binding,
// coordinator_credential_id, sandbox_credential_id.
func (c *SessionRequestCapability) ClaimBytes() []byte {
	var e postcard.Encoder
	writeVersion(&e)
	c.SessionBinding.MarshalPostcard(&e)
	e.Fixed(c.CoordinatorCredentialID[:])
	e.Fixed(c.SandboxCredentialID[:])
	return e.Bytes()
}

// ComputeID is SHA-256 of ClaimBytes.
func (c *SessionRequestCapability) ComputeID() CapabilityID {
	return CapabilityID(digest(c.ClaimBytes()))
}

// SignedBytes is what the coordinator credential signs under
// SignatureSessionRequestCapability: every field before
// coordinator_signature.
func (c *SessionRequestCapability) SignedBytes() []byte {
	var e postcard.Encoder
	c.marshalUnsigned(&e)
	return e.Bytes()
}

// --- SandboxCredentialBundle

// Validate checks every part and that the private key is present. Verify
// checks the signatures and that the key matches the sandbox credential.
func (b *SandboxCredentialBundle) Validate() error {
	const rec = "sandbox-credential-bundle"
	if field, err := b.GenerationIdentity.check(); err != nil {
		return fieldError(rec, "generation_identity."+field, err)
	}
	if field, err := b.TrustManifest.check(); err != nil {
		return fieldError(rec, "trust_manifest."+field, err)
	}
	if field, err := b.CoordinatorProtocolCredential.check(); err != nil {
		return fieldError(rec, "coordinator_protocol_credential."+field, err)
	}
	if field, err := b.SandboxProtocolCredential.check(); err != nil {
		return fieldError(rec, "sandbox_protocol_credential."+field, err)
	}
	if b.SandboxPrivateKey.IsZero() {
		return fieldError(rec, "sandbox_private_key", invalid("key is absent"))
	}
	return nil
}

// MarshalPostcard writes protocol_version, generation_identity,
// trust_manifest, coordinator_protocol_credential,
// sandbox_protocol_credential, and sandbox_private_key as its 32-byte
// Ed25519 seed.
func (b *SandboxCredentialBundle) MarshalPostcard(e *postcard.Encoder) {
	writeVersion(e)
	b.GenerationIdentity.MarshalPostcard(e)
	b.TrustManifest.MarshalPostcard(e)
	b.CoordinatorProtocolCredential.MarshalPostcard(e)
	b.SandboxProtocolCredential.MarshalPostcard(e)
	seed := b.SandboxPrivateKey.seed()
	e.Fixed(seed[:])
	clear(seed[:])
}

// UnmarshalPostcard reads what MarshalPostcard writes.
func (b *SandboxCredentialBundle) UnmarshalPostcard(d *postcard.Decoder) {
	readVersion(d)
	b.GenerationIdentity.UnmarshalPostcard(d)
	b.TrustManifest.UnmarshalPostcard(d)
	b.CoordinatorProtocolCredential.UnmarshalPostcard(d)
	b.SandboxProtocolCredential.UnmarshalPostcard(d)
	var seed [32]byte
	d.Fixed(seed[:])
	if d.Err() == nil {
		b.SandboxPrivateKey = NewPrivateKey(seed)
	}
	clear(seed[:])
}

// String describes the bundle without its private key.
func (b SandboxCredentialBundle) String() string {
	return fmt.Sprintf("sandbox credential bundle (generation %v, sandbox credential %v, %v)",
		b.GenerationIdentity.GenerationID, b.SandboxProtocolCredential.CredentialID, b.SandboxPrivateKey)
}

// GoString is String, so %#v never prints the key.
func (b SandboxCredentialBundle) GoString() string { return b.String() }
