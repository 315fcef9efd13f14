package protocol

import (
	"crypto/sha256"
	"hash"

	"lazaret.dev/pkg/ids"
)

// Verifier checks signed mailbox records for one generation. It holds the
// verified trust manifest and the coordinator and sandbox credentials; the
// Host Coordinator and the guest each build one (the guest from its
// SandboxCredentialBundle).
//
// Every Verify method first checks the record kind and the signature over
// the carried payload bytes under the expected key, and only then decodes
// the payload; it then checks the generation, binding, capability chain,
// request ID and request digest as the record kind requires. Failures are
// *Error values whose Kind says what failed.
type Verifier struct {
	manifest    TrustManifest
	coordinator ProtocolCredential
	sandbox     ProtocolCredential
}

// NewVerifier verifies the manifest against its published digest and both
// credentials against the manifest, and returns a Verifier that trusts them.
func NewVerifier(manifest TrustManifest, manifestSHA256 ids.Digest, coordinator, sandbox ProtocolCredential) (*Verifier, error) {
	if d := manifest.Digest(); d != manifestSHA256 {
		return nil, newError(KindTrustManifest, SignatureTrustManifest, "", "digest %v, want %v", d, manifestSHA256)
	}
	if err := VerifyTrustManifest(&manifest); err != nil {
		return nil, err
	}
	if err := VerifyProtocolCredential(&coordinator, &manifest, RoleSessionCoordinator); err != nil {
		return nil, err
	}
	if err := VerifyProtocolCredential(&sandbox, &manifest, RoleAgentSandbox); err != nil {
		return nil, err
	}
	return &Verifier{manifest: manifest, coordinator: coordinator, sandbox: sandbox}, nil
}

// Verifier verifies the bundle and returns a Verifier for its generation.
func (b *SandboxCredentialBundle) Verifier(manifestSHA256 ids.Digest) (*Verifier, error) {
	if err := b.Verify(manifestSHA256); err != nil {
		return nil, err
	}
	return NewVerifier(b.TrustManifest, manifestSHA256, b.CoordinatorProtocolCredential, b.SandboxProtocolCredential)
}

// Generation is the generation identity the verifier trusts.
func (v *Verifier) Generation() GenerationIdentity { return v.manifest.GenerationIdentity }

// Coordinator is the trusted SessionCoordinator credential.
func (v *Verifier) Coordinator() ProtocolCredential { return v.coordinator }

// Sandbox is the trusted AgentSandbox credential.
func (v *Verifier) Sandbox() ProtocolCredential { return v.sandbox }

// SessionLookup returns the registered binding of a session.
type SessionLookup func(ids.SessionID) (SessionBinding, bool)

// PendingRequest is what every later record of a request must repeat: its
// session binding, request ID, and request digest (SHA-256 of the exact
// signed MailboxRequest payload bytes).
type PendingRequest struct {
	SessionBinding SessionBinding
	RequestID      ids.RequestID
	RequestSHA256  ids.Digest
}

// VerifiedRequest is a MailboxRequest that passed VerifyRequest.
type VerifiedRequest struct {
	Request       MailboxRequest
	RequestSHA256 ids.Digest
}

// Pending returns the request's PendingRequest.
func (r *VerifiedRequest) Pending() PendingRequest {
	return PendingRequest{SessionBinding: r.Request.SessionBinding, RequestID: r.Request.RequestID, RequestSHA256: r.RequestSHA256}
}

// NewPendingRequest is the sender's PendingRequest for a request it signed.
func NewPendingRequest(signed *SignedProtocolRecord, req *MailboxRequest) PendingRequest {
	return PendingRequest{SessionBinding: req.SessionBinding, RequestID: req.RequestID, RequestSHA256: RequestSHA256(signed)}
}

// open checks kind and signature, then decodes the payload into r.
func open(rec *SignedProtocolRecord, r SignedRecord, key PublicKey, signer string) error {
	want := r.RecordKind()
	name := want.Name()
	if rec == nil {
		return newError(KindMalformed, name, "", "no record")
	}
	if rec.Kind != want {
		return newError(KindRecordKind, name, "", "record is %v", rec.Kind)
	}
	if err := checkBounded(rec.PayloadBytes, 1, MaxSignedPayloadBytes); err != nil {
		return &Error{Kind: KindMalformed, Record: name, Field: "payload_bytes", Err: err}
	}
	if !Verify(key, name, rec.PayloadBytes, rec.Signature) {
		return newError(KindSignature, name, "signature", "not signed by the %s", signer)
	}
	if err := Decode(rec.PayloadBytes, r); err != nil {
		return &Error{Kind: KindMalformed, Record: name, Err: err}
	}
	return nil
}

// checkSandboxClaim checks what every sandbox-signed record carries: the
// sandbox credential ID, the generation, and a capability that chains to
// the trusted credentials and is bound to the record's own binding.
func (v *Verifier) checkSandboxClaim(name string, binding *SessionBinding, capability *SessionRequestCapability, sandboxID CredentialID) error {
	if sandboxID != v.sandbox.CredentialID {
		return newError(KindCredential, name, "sandbox_credential_id", "%v is not the sandbox credential %v", sandboxID, v.sandbox.CredentialID)
	}
	if err := v.checkGeneration(name, binding); err != nil {
		return err
	}
	if err := VerifyCapability(capability, &v.coordinator, &v.sandbox); err != nil {
		return &Error{Kind: KindCapability, Record: name, Field: "session_capability", Err: err}
	}
	if capability.SessionBinding != *binding {
		return newError(KindCapability, name, "session_capability.session_binding", "capability is bound to another session binding")
	}
	return nil
}

func (v *Verifier) checkGeneration(name string, binding *SessionBinding) error {
	if binding.GenerationIdentity != v.manifest.GenerationIdentity {
		return newError(KindGeneration, name, "session_binding.generation_identity", "record belongs to generation %v, want %v",
			binding.GenerationIdentity.GenerationID, v.manifest.GenerationIdentity.GenerationID)
	}
	return nil
}

// checkPending checks binding, request ID and request digest against p.
func checkPending(name string, p *PendingRequest, binding *SessionBinding, requestID ids.RequestID, requestSHA256 *ids.Digest) error {
	if *binding != p.SessionBinding {
		return newError(KindBinding, name, "session_binding", "differs from the request's session binding")
	}
	if requestID != p.RequestID {
		return newError(KindRequest, name, "request_id", "%v, want %v", requestID, p.RequestID)
	}
	if requestSHA256 != nil && *requestSHA256 != p.RequestSHA256 {
		return newError(KindRequestDigest, name, "request_sha256", "%v, want %v", *requestSHA256, p.RequestSHA256)
	}
	return nil
}

func lookup(name string, sessions SessionLookup, binding *SessionBinding) error {
	if sessions == nil {
		return newError(KindBinding, name, "session_binding", "no session registry")
	}
	registered, ok := sessions(binding.SessionID)
	if !ok {
		return newError(KindBinding, name, "session_binding.session_id", "session %v is not registered", binding.SessionID)
	}
	if registered != *binding {
		return newError(KindBinding, name, "session_binding", "differs from the registered binding of session %v", binding.SessionID)
	}
	return nil
}

// VerifyRequest checks a MailboxRequest for the Host Coordinator: signed by
// the AgentSandbox credential, the generation, the capability chain, the
// registered session binding, and finally consumes the request ID in guard,
// so a replayed request fails with KindReplay. The returned digest is
// SHA-256 of rec.PayloadBytes.
func (v *Verifier) VerifyRequest(rec *SignedProtocolRecord, sessions SessionLookup, guard *ReplayGuard) (VerifiedRequest, error) {
	var r MailboxRequest
	name := r.RecordKind().Name()
	if err := open(rec, &r, v.sandbox.PublicKey, "AgentSandbox credential"); err != nil {
		return VerifiedRequest{}, err
	}
	if err := v.checkSandboxClaim(name, &r.SessionBinding, &r.SessionCapability, r.SandboxCredentialID); err != nil {
		return VerifiedRequest{}, err
	}
	if err := lookup(name, sessions, &r.SessionBinding); err != nil {
		return VerifiedRequest{}, err
	}
	if guard == nil {
		return VerifiedRequest{}, newError(KindReplay, name, "request_id", "no replay guard")
	}
	if err := guard.Consume(r.SessionBinding.GenerationIdentity.GenerationID, r.RequestID); err != nil {
		return VerifiedRequest{}, err
	}
	return VerifiedRequest{Request: r, RequestSHA256: RequestSHA256(rec)}, nil
}

// VerifyCancellation checks a MailboxCancellation: signed by the
// AgentSandbox credential, the generation, the capability chain and the
// registered session binding. Matching it to a live request is the
// caller's.
func (v *Verifier) VerifyCancellation(rec *SignedProtocolRecord, sessions SessionLookup) (MailboxCancellation, error) {
	var r MailboxCancellation
	name := r.RecordKind().Name()
	if err := open(rec, &r, v.sandbox.PublicKey, "AgentSandbox credential"); err != nil {
		return MailboxCancellation{}, err
	}
	if err := v.checkSandboxClaim(name, &r.SessionBinding, &r.SessionCapability, r.SandboxCredentialID); err != nil {
		return MailboxCancellation{}, err
	}
	if err := lookup(name, sessions, &r.SessionBinding); err != nil {
		return MailboxCancellation{}, err
	}
	return r, nil
}

// VerifyResultAck checks a MailboxResultAck against the pending request:
// signed by the AgentSandbox credential, the capability chain, the binding,
// request ID and request digest.
func (v *Verifier) VerifyResultAck(rec *SignedProtocolRecord, p *PendingRequest) (MailboxResultAck, error) {
	var r MailboxResultAck
	name := r.RecordKind().Name()
	if err := open(rec, &r, v.sandbox.PublicKey, "AgentSandbox credential"); err != nil {
		return MailboxResultAck{}, err
	}
	if err := v.checkSandboxClaim(name, &r.SessionBinding, &r.SessionCapability, r.SandboxCredentialID); err != nil {
		return MailboxResultAck{}, err
	}
	if err := checkPending(name, p, &r.SessionBinding, r.RequestID, &r.RequestSHA256); err != nil {
		return MailboxResultAck{}, err
	}
	return r, nil
}

// VerifyDecision checks a DeveloperDecision: signed by the session anchor
// key of the pending request's binding, the generation, binding, request ID
// and request digest.
func (v *Verifier) VerifyDecision(rec *SignedProtocolRecord, p *PendingRequest) (DeveloperDecision, error) {
	var r DeveloperDecision
	name := r.RecordKind().Name()
	if err := open(rec, &r, p.SessionBinding.SessionAnchorPublicKey, "session anchor key"); err != nil {
		return DeveloperDecision{}, err
	}
	if err := v.checkGeneration(name, &r.SessionBinding); err != nil {
		return DeveloperDecision{}, err
	}
	if err := checkPending(name, p, &r.SessionBinding, r.RequestID, &r.RequestSHA256); err != nil {
		return DeveloperDecision{}, err
	}
	return r, nil
}

// VerifyResult checks a MailboxResult for the guest: signed by the
// SessionCoordinator credential and naming it, the generation, binding,
// request ID and request digest. Check it against the received chunks with
// ResultCollector.Check.
func (v *Verifier) VerifyResult(rec *SignedProtocolRecord, p *PendingRequest) (MailboxResult, error) {
	var r MailboxResult
	name := r.RecordKind().Name()
	if err := open(rec, &r, v.coordinator.PublicKey, "SessionCoordinator credential"); err != nil {
		return MailboxResult{}, err
	}
	if err := v.checkCoordinatorClaim(name, &r.SessionBinding, r.CoordinatorCredentialID); err != nil {
		return MailboxResult{}, err
	}
	if err := checkPending(name, p, &r.SessionBinding, r.RequestID, &r.RequestSHA256); err != nil {
		return MailboxResult{}, err
	}
	return r, nil
}

// VerifyResultChunk checks a MailboxResultChunk like VerifyResult. Feed
// chunks to a ResultCollector in sequence order.
func (v *Verifier) VerifyResultChunk(rec *SignedProtocolRecord, p *PendingRequest) (MailboxResultChunk, error) {
	var r MailboxResultChunk
	name := r.RecordKind().Name()
	if err := open(rec, &r, v.coordinator.PublicKey, "SessionCoordinator credential"); err != nil {
		return MailboxResultChunk{}, err
	}
	if err := v.checkCoordinatorClaim(name, &r.SessionBinding, r.CoordinatorCredentialID); err != nil {
		return MailboxResultChunk{}, err
	}
	if err := checkPending(name, p, &r.SessionBinding, r.RequestID, &r.RequestSHA256); err != nil {
		return MailboxResultChunk{}, err
	}
	return r, nil
}

func (v *Verifier) checkCoordinatorClaim(name string, binding *SessionBinding, id CredentialID) error {
	if id != v.coordinator.CredentialID {
		return newError(KindCredential, name, "coordinator_credential_id", "%v is not the coordinator credential %v", id, v.coordinator.CredentialID)
	}
	return v.checkGeneration(name, binding)
}

// ResultCollector checks the chunks of one request's result: sequence
// numbers contiguous from 0, and per-stream SHA-256 over the concatenated
// bytes. The Host Coordinator uses it to fill MailboxResult; the guest to
// check it.
type ResultCollector struct {
	pending PendingRequest
	next    uint64
	stdout  hash.Hash
	stderr  hash.Hash
}

// NewResultCollector starts collecting the result of p.
func NewResultCollector(p PendingRequest) *ResultCollector {
	return &ResultCollector{pending: p, stdout: sha256.New(), stderr: sha256.New()}
}

// Add appends the next chunk. It must be for the collector's request and
// carry the next sequence number.
func (c *ResultCollector) Add(chunk *MailboxResultChunk) error {
	const name = "mailbox-result-chunk"
	if err := checkPending(name, &c.pending, &chunk.SessionBinding, chunk.RequestID, &chunk.RequestSHA256); err != nil {
		return err
	}
	if uint64(chunk.Sequence) != c.next {
		return newError(KindSequence, name, "sequence", "chunk %d, want %d", chunk.Sequence, c.next)
	}
	switch chunk.Stream {
	case StreamStdout:
		c.stdout.Write(chunk.Bytes)
	case StreamStderr:
		c.stderr.Write(chunk.Bytes)
	default:
		return newError(KindMalformed, name, "stream", "unknown stream %d", uint32(chunk.Stream))
	}
	c.next++
	return nil
}

// Count is the number of chunks added.
func (c *ResultCollector) Count() uint64 { return c.next }

// HighestContiguous is the value for MailboxResultAck: nil before the first
// chunk, else the last sequence number added.
func (c *ResultCollector) HighestContiguous() *uint32 {
	if c.next == 0 {
		return nil
	}
	v := uint32(c.next - 1)
	return &v
}

// Digests returns SHA-256 over each stream's bytes so far.
func (c *ResultCollector) Digests() (stdout, stderr ids.Digest) {
	c.stdout.Sum(stdout[:0])
	c.stderr.Sum(stderr[:0])
	return stdout, stderr
}

// Check compares a verified result with the chunks received: the request,
// chunk_count and both stream digests.
func (c *ResultCollector) Check(r *MailboxResult) error {
	const name = "mailbox-result"
	if err := checkPending(name, &c.pending, &r.SessionBinding, r.RequestID, &r.RequestSHA256); err != nil {
		return err
	}
	if uint64(r.ChunkCount) != c.next {
		return newError(KindChunkCount, name, "chunk_count", "result names %d chunks, %d received", r.ChunkCount, c.next)
	}
	stdout, stderr := c.Digests()
	if stdout != r.StdoutSHA256 {
		return newError(KindStreamDigest, name, "stdout_sha256", "%v, received bytes hash to %v", r.StdoutSHA256, stdout)
	}
	if stderr != r.StderrSHA256 {
		return newError(KindStreamDigest, name, "stderr_sha256", "%v, received bytes hash to %v", r.StderrSHA256, stderr)
	}
	return nil
}
