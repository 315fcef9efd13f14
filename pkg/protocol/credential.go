package protocol

import (
	"crypto/sha256"

	"lazaret.dev/pkg/ids"
)

// NewTrustManifest signs a manifest for gen that names the TLS CA
// certificate and issuer's public key.
func NewTrustManifest(gen GenerationIdentity, tlsCACertificateDER []byte, issuer PrivateKey) (TrustManifest, error) {
	m := TrustManifest{
		GenerationIdentity:      gen,
		TLSCASHA256:             sha256.Sum256(tlsCACertificateDER),
		ProtocolIssuerPublicKey: issuer.Public(),
	}
	if issuer.IsZero() {
		return TrustManifest{}, fieldError(SignatureTrustManifest, "protocol_issuer_public_key", invalid("no issuer key"))
	}
	if err := m.Validate(); err != nil {
		return TrustManifest{}, err
	}
	m.IssuerSignature = issuer.Sign(SignatureTrustManifest, m.SignedBytes())
	return m, nil
}

// VerifyTrustManifest checks the manifest's fields and its issuer signature.
// The manifest names its own issuer key, so a receiver must also know the
// manifest is the published one: compare Digest with the
// trust_manifest_sha256 it obtained from the runtime root (VerifyPublication
// does).
func VerifyTrustManifest(m *TrustManifest) error {
	if err := m.Validate(); err != nil {
		return err
	}
	if !Verify(m.ProtocolIssuerPublicKey, SignatureTrustManifest, m.SignedBytes(), m.IssuerSignature) {
		return newError(KindSignature, SignatureTrustManifest, "issuer_signature", "not signed by protocol_issuer_public_key")
	}
	return nil
}

// IssueProtocolCredential issues a credential for pub in role. The subject
// is the generation's coordinator ID for RoleSessionCoordinator and its
// sandbox ID for RoleAgentSandbox.
func IssueProtocolCredential(issuer PrivateKey, gen GenerationIdentity, role ProtocolCredentialRole, pub PublicKey) (ProtocolCredential, error) {
	c := ProtocolCredential{GenerationIdentity: gen, Role: role, PublicKey: pub}
	switch role {
	case RoleSessionCoordinator:
		c.SubjectID = ids.ID(gen.CoordinatorID)
	case RoleAgentSandbox:
		c.SubjectID = ids.ID(gen.SandboxID)
	}
	if issuer.IsZero() {
		return ProtocolCredential{}, fieldError(SignatureProtocolCredential, "issuer_signature", invalid("no issuer key"))
	}
	if err := c.Validate(); err != nil {
		return ProtocolCredential{}, err
	}
	c.CredentialID = c.ComputeID()
	c.IssuerSignature = issuer.Sign(SignatureProtocolCredential, c.SignedBytes())
	return c, nil
}

// VerifyProtocolCredential checks that c is a credential of role issued by
// the manifest's issuer for the manifest's generation: fields, ID, subject,
// and signature.
func VerifyProtocolCredential(c *ProtocolCredential, manifest *TrustManifest, role ProtocolCredentialRole) error {
	const rec = SignatureProtocolCredential
	if err := c.Validate(); err != nil {
		return err
	}
	if c.GenerationIdentity != manifest.GenerationIdentity {
		return newError(KindGeneration, rec, "generation_identity", "credential belongs to generation %v, want %v",
			c.GenerationIdentity.GenerationID, manifest.GenerationIdentity.GenerationID)
	}
	if c.Role != role {
		return newError(KindCredential, rec, "role", "role %v, want %v", c.Role, role)
	}
	want := ids.ID(c.GenerationIdentity.CoordinatorID)
	if role == RoleAgentSandbox {
		want = ids.ID(c.GenerationIdentity.SandboxID)
	}
	if c.SubjectID != want {
		return newError(KindCredential, rec, "subject_id", "subject %v is not the generation's %v ID %v", c.SubjectID, role, want)
	}
	if id := c.ComputeID(); id != c.CredentialID {
		return newError(KindCredential, rec, "credential_id", "%v is not the claim digest %v", c.CredentialID, id)
	}
	if !Verify(manifest.ProtocolIssuerPublicKey, rec, c.SignedBytes(), c.IssuerSignature) {
		return newError(KindSignature, rec, "issuer_signature", "not signed by the trust manifest's protocol issuer")
	}
	return nil
}

// IssueSessionCapability lets the sandbox credential make requests for the
// session of binding; coordinatorKey is the private key of coordinator.
func IssueSessionCapability(coordinatorKey PrivateKey, coordinator, sandbox *ProtocolCredential, binding SessionBinding) (SessionRequestCapability, error) {
	const rec = SignatureSessionRequestCapability
	if coordinatorKey.IsZero() || coordinatorKey.Public() != coordinator.PublicKey {
		return SessionRequestCapability{}, newError(KindCredential, rec, "coordinator_signature", "signing key is not the coordinator credential's key")
	}
	if coordinator.Role != RoleSessionCoordinator || sandbox.Role != RoleAgentSandbox {
		return SessionRequestCapability{}, newError(KindCredential, rec, "", "credential roles are %v and %v, want SessionCoordinator and AgentSandbox", coordinator.Role, sandbox.Role)
	}
	if binding.GenerationIdentity != coordinator.GenerationIdentity || binding.GenerationIdentity != sandbox.GenerationIdentity {
		return SessionRequestCapability{}, newError(KindGeneration, rec, "session_binding.generation_identity", "binding and credentials name different generations")
	}
	c := SessionRequestCapability{
		SessionBinding:          binding,
		CoordinatorCredentialID: coordinator.CredentialID,
		SandboxCredentialID:     sandbox.CredentialID,
	}
	if err := c.Validate(); err != nil {
		return SessionRequestCapability{}, err
	}
	c.CapabilityID = c.ComputeID()
	c.CoordinatorSignature = coordinatorKey.Sign(rec, c.SignedBytes())
	return c, nil
}

// VerifyCapability checks the capability chain: its ID, that it names the
// coordinator and sandbox credentials, and that the coordinator credential
// signed it. Both credentials must already be verified.
func VerifyCapability(c *SessionRequestCapability, coordinator, sandbox *ProtocolCredential) error {
	const rec = SignatureSessionRequestCapability
	if err := c.Validate(); err != nil {
		return err
	}
	if c.SessionBinding.GenerationIdentity != coordinator.GenerationIdentity {
		return newError(KindGeneration, rec, "session_binding.generation_identity", "capability belongs to generation %v, want %v",
			c.SessionBinding.GenerationIdentity.GenerationID, coordinator.GenerationIdentity.GenerationID)
	}
	if id := c.ComputeID(); id != c.CapabilityID {
		return newError(KindCapability, rec, "capability_id", "%v is not the claim digest %v", c.CapabilityID, id)
	}
	if c.CoordinatorCredentialID != coordinator.CredentialID {
		return newError(KindCapability, rec, "coordinator_credential_id", "%v is not the coordinator credential %v", c.CoordinatorCredentialID, coordinator.CredentialID)
	}
	if c.SandboxCredentialID != sandbox.CredentialID {
		return newError(KindCapability, rec, "sandbox_credential_id", "%v is not the sandbox credential %v", c.SandboxCredentialID, sandbox.CredentialID)
	}
	if !Verify(coordinator.PublicKey, rec, c.SignedBytes(), c.CoordinatorSignature) {
		return newError(KindSignature, rec, "coordinator_signature", "not signed by the coordinator credential %v", coordinator.CredentialID)
	}
	return nil
}

// NewSandboxCredentialBundle issues the sandbox's protocol credential for
// sandboxKey with the generation protocol issuer key and assembles the
// bundle. The manifest must be issuer's and coordinator must be verified.
func NewSandboxCredentialBundle(issuer PrivateKey, manifest TrustManifest, coordinator ProtocolCredential, sandboxKey PrivateKey) (SandboxCredentialBundle, error) {
	const rec = "sandbox-credential-bundle"
	if issuer.IsZero() || issuer.Public() != manifest.ProtocolIssuerPublicKey {
		return SandboxCredentialBundle{}, newError(KindCredential, rec, "trust_manifest", "issuer key is not the manifest's protocol issuer")
	}
	if sandboxKey.IsZero() {
		return SandboxCredentialBundle{}, fieldError(rec, "sandbox_private_key", invalid("key is absent"))
	}
	sandbox, err := IssueProtocolCredential(issuer, manifest.GenerationIdentity, RoleAgentSandbox, sandboxKey.Public())
	if err != nil {
		return SandboxCredentialBundle{}, err
	}
	b := SandboxCredentialBundle{
		GenerationIdentity:            manifest.GenerationIdentity,
		TrustManifest:                 manifest,
		CoordinatorProtocolCredential: coordinator,
		SandboxProtocolCredential:     sandbox,
		SandboxPrivateKey:             sandboxKey,
	}
	if err := b.Verify(manifest.Digest()); err != nil {
		return SandboxCredentialBundle{}, err
	}
	return b, nil
}

// Verify checks the bundle completely: the manifest is the one whose digest
// is manifestSHA256 and is correctly signed, both credentials verify against
// it in their roles, every part names the same generation, and the private
// key belongs to the sandbox credential.
func (b *SandboxCredentialBundle) Verify(manifestSHA256 ids.Digest) error {
	const rec = "sandbox-credential-bundle"
	if err := b.Validate(); err != nil {
		return err
	}
	if d := b.TrustManifest.Digest(); d != manifestSHA256 {
		return newError(KindTrustManifest, rec, "trust_manifest", "digest %v, want %v", d, manifestSHA256)
	}
	if err := VerifyTrustManifest(&b.TrustManifest); err != nil {
		return err
	}
	if b.GenerationIdentity != b.TrustManifest.GenerationIdentity {
		return newError(KindGeneration, rec, "generation_identity", "differs from the trust manifest's")
	}
	if err := VerifyProtocolCredential(&b.CoordinatorProtocolCredential, &b.TrustManifest, RoleSessionCoordinator); err != nil {
		return err
	}
	if err := VerifyProtocolCredential(&b.SandboxProtocolCredential, &b.TrustManifest, RoleAgentSandbox); err != nil {
		return err
	}
	if b.SandboxPrivateKey.Public() != b.SandboxProtocolCredential.PublicKey {
		return newError(KindCredential, rec, "sandbox_private_key", "does not belong to the sandbox credential")
	}
	return nil
}

// NewPublicationIdentity assembles the identity file content for a
// generation whose CA certificate is caDER and whose coordinator serves
// coordinatorTLS.
func NewPublicationIdentity(manifest *TrustManifest, caDER []byte, coordinatorTLS *TLSCredential) (ProtocolPublicationIdentity, error) {
	p := ProtocolPublicationIdentity{
		GenerationIdentity:              manifest.GenerationIdentity,
		TLSCACertificateDER:             caDER,
		TrustManifestSHA256:             manifest.Digest(),
		CoordinatorTLSCertificateSHA256: coordinatorTLS.CertificateSHA256,
	}
	if coordinatorTLS.Role != TLSRoleSessionCoordinator {
		return ProtocolPublicationIdentity{}, newError(KindCertificate, "protocol-publication-identity", "coordinator_tls_certificate_sha256", "credential role is %v", coordinatorTLS.Role)
	}
	if err := VerifyPublication(&p, manifest); err != nil {
		return ProtocolPublicationIdentity{}, err
	}
	return p, nil
}

// VerifyPublication checks that the identity file and the manifest agree:
// the manifest is the published one (digest), its TLS CA is the published
// CA certificate, both name the same generation, and the manifest is
// correctly signed.
func VerifyPublication(p *ProtocolPublicationIdentity, manifest *TrustManifest) error {
	const rec = "protocol-publication-identity"
	if err := p.Validate(); err != nil {
		return err
	}
	if d := manifest.Digest(); d != p.TrustManifestSHA256 {
		return newError(KindTrustManifest, rec, "trust_manifest_sha256", "manifest digest %v, want %v", d, p.TrustManifestSHA256)
	}
	if err := VerifyTrustManifest(manifest); err != nil {
		return err
	}
	if p.GenerationIdentity != manifest.GenerationIdentity {
		return newError(KindGeneration, rec, "generation_identity", "differs from the trust manifest's")
	}
	if d := ids.Digest(sha256.Sum256(p.TLSCACertificateDER)); d != manifest.TLSCASHA256 {
		return newError(KindTrustManifest, rec, "tls_ca_certificate_der", "CA digest %v, manifest names %v", d, manifest.TLSCASHA256)
	}
	return nil
}
