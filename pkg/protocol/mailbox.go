package protocol

import (
	"fmt"

	"lazaret.dev/pkg/ids"
	"lazaret.dev/pkg/postcard"
)

// RecordKind is the variant of a SignedProtocolRecord: which record its
// payload bytes encode and who signs it.
type RecordKind uint32

// Signed record kinds, in variant order.
const (
	RecordMailboxRequest      RecordKind = iota // signed by the AgentSandbox credential
	RecordMailboxCancellation                   // signed by the AgentSandbox credential
	RecordMailboxResultAck                      // signed by the AgentSandbox credential
	RecordDeveloperDecision                     // signed by the session anchor key
	RecordMailboxResult                         // signed by the SessionCoordinator credential
	RecordMailboxResultChunk                    // signed by the SessionCoordinator credential
	numRecordKinds
)

var recordNames = [numRecordKinds]string{
	"mailbox-request",
	"mailbox-cancellation",
	"mailbox-result-ack",
	"developer-decision",
	"mailbox-result",
	"mailbox-result-chunk",
}

// Name is the lower-kebab record name used in the signature input.
func (k RecordKind) Name() string {
	if k < numRecordKinds {
		return recordNames[k]
	}
	return fmt.Sprintf("record-kind-%d", uint32(k))
}

func (k RecordKind) String() string { return k.Name() }

// SignedProtocolRecord is a mailbox record in transit: a union whose variant
// says which record PayloadBytes encodes, with the Ed25519 signature over
// SignatureInput(Kind.Name(), PayloadBytes).
type SignedProtocolRecord struct {
	Kind         RecordKind
	PayloadBytes []byte
	Signature    Signature
}

// SignedRecord is a record that travels inside a SignedProtocolRecord.
type SignedRecord interface {
	Record
	RecordKind() RecordKind
}

// MailboxRequest asks for a host command on behalf of one session.
// CommandArgv is a host argv: element 0 is an absolute path, no shell, no
// PATH lookup. Justification is at most MaxJustificationBytes of NUL-free
// UTF-8 and may be empty.
type MailboxRequest struct {
	SessionBinding      SessionBinding
	RequestID           ids.RequestID
	SessionCapability   SessionRequestCapability
	SandboxCredentialID CredentialID
	CommandArgv         []string
	Justification       string
}

// MailboxCancellation withdraws a pending request.
type MailboxCancellation struct {
	SessionBinding      SessionBinding
	RequestID           ids.RequestID
	SessionCapability   SessionRequestCapability
	SandboxCredentialID CredentialID
}

// MailboxResultAck acknowledges result chunks. HighestContiguousSequence is
// Option<u32>: nil before any chunk arrived, else the highest n such that
// chunks 0..n all arrived.
type MailboxResultAck struct {
	SessionBinding            SessionBinding
	RequestID                 ids.RequestID
	RequestSHA256             ids.Digest
	SessionCapability         SessionRequestCapability
	SandboxCredentialID       CredentialID
	HighestContiguousSequence *uint32
}

// DeveloperDecisionKind is the developer's answer to a prompt.
type DeveloperDecisionKind uint32

// Decisions, in variant order.
const (
	DecisionApprove DeveloperDecisionKind = iota
	DecisionDeny
	numDecisions
)

// DeveloperDecision is the developer's signed answer. ApprovedCommandArgv
// is Option<argv>: present (nonempty, a host argv; the request's or an
// edited one) exactly for DecisionApprove, absent (nil) for DecisionDeny.
type DeveloperDecision struct {
	SessionBinding      SessionBinding
	RequestID           ids.RequestID
	RequestSHA256       ids.Digest
	Decision            DeveloperDecisionKind
	ApprovedCommandArgv []string
}

// EscalationOutcome is how a request ended.
type EscalationOutcome uint32

// Outcomes, in variant order.
const (
	OutcomeCompleted EscalationOutcome = iota
	OutcomeDenied
	OutcomeTimedOut
	OutcomeCancelled
	OutcomeFailed
	numOutcomes
)

// ResultStream names a host command output stream.
type ResultStream uint32

// Streams, in variant order.
const (
	StreamStdout ResultStream = iota
	StreamStderr
	numStreams
)

// MailboxResult ends a request. ExitCode (Option<u8>) is present exactly
// for OutcomeCompleted, the host command's exit status; a command killed by
// a signal is OutcomeFailed. ChunkCount is the number of chunks sent;
// StdoutSHA256 and StderrSHA256 are SHA-256 over the concatenated bytes of
// that stream's chunks in sequence order (SHA-256 of nothing when empty).
type MailboxResult struct {
	SessionBinding          SessionBinding
	RequestID               ids.RequestID
	RequestSHA256           ids.Digest
	CoordinatorCredentialID CredentialID
	Outcome                 EscalationOutcome
	ExitCode                *uint8
	ChunkCount              uint32
	StdoutSHA256            ids.Digest
	StderrSHA256            ids.Digest
}

// MailboxResultChunk carries 1 to MaxChunkBytes of one output stream.
// Sequence numbers count all chunks of a result from 0 without gaps.
type MailboxResultChunk struct {
	SessionBinding          SessionBinding
	RequestID               ids.RequestID
	RequestSHA256           ids.Digest
	CoordinatorCredentialID CredentialID
	Sequence                uint32
	Stream                  ResultStream
	Bytes                   []byte
}

// RecordKind implements SignedRecord.
func (*MailboxRequest) RecordKind() RecordKind { return RecordMailboxRequest }

// RecordKind implements SignedRecord.
func (*MailboxCancellation) RecordKind() RecordKind { return RecordMailboxCancellation }

// RecordKind implements SignedRecord.
func (*MailboxResultAck) RecordKind() RecordKind { return RecordMailboxResultAck }

// RecordKind implements SignedRecord.
func (*DeveloperDecision) RecordKind() RecordKind { return RecordDeveloperDecision }

// RecordKind implements SignedRecord.
func (*MailboxResult) RecordKind() RecordKind { return RecordMailboxResult }

// RecordKind implements SignedRecord.
func (*MailboxResultChunk) RecordKind() RecordKind { return RecordMailboxResultChunk }

// --- SignedProtocolRecord

// Validate checks the kind and the payload size.
func (s *SignedProtocolRecord) Validate() error {
	if s.Kind >= numRecordKinds {
		return fieldError("signed-protocol-record", "variant", invalid("unknown record kind %d", uint32(s.Kind)))
	}
	if err := checkBounded(s.PayloadBytes, 1, MaxSignedPayloadBytes); err != nil {
		return fieldError("signed-protocol-record", "payload_bytes", err)
	}
	return nil
}

// MarshalPostcard writes the variant index, payload_bytes, signature.
func (s *SignedProtocolRecord) MarshalPostcard(e *postcard.Encoder) {
	e.Variant(uint32(s.Kind))
	e.ByteString(s.PayloadBytes)
	e.Fixed(s.Signature[:])
}

// UnmarshalPostcard reads what MarshalPostcard writes. It does not decode
// the payload: verify the signature first.
func (s *SignedProtocolRecord) UnmarshalPostcard(d *postcard.Decoder) {
	s.Kind = RecordKind(d.Variant(uint32(numRecordKinds)))
	s.PayloadBytes = readBounded(d, "payload_bytes", 1, MaxSignedPayloadBytes)
	d.Fixed(s.Signature[:])
}

// Sign validates and encodes r and signs the payload with key.
func Sign(key PrivateKey, r SignedRecord) (SignedProtocolRecord, error) {
	payload, err := Encode(r)
	if err != nil {
		return SignedProtocolRecord{}, err
	}
	if len(payload) > MaxSignedPayloadBytes {
		return SignedProtocolRecord{}, fieldError(r.RecordKind().Name(), "", invalid("encoding of %d bytes exceeds the signed payload limit of %d", len(payload), MaxSignedPayloadBytes))
	}
	kind := r.RecordKind()
	return SignedProtocolRecord{Kind: kind, PayloadBytes: payload, Signature: key.Sign(kind.Name(), payload)}, nil
}

// RequestSHA256 is the request digest every later record of a request
// carries: SHA-256 over the exact payload bytes of the signed MailboxRequest.
func RequestSHA256(signedRequest *SignedProtocolRecord) ids.Digest {
	return digest(signedRequest.PayloadBytes)
}

// --- shared request fields

func checkRequestHead(binding *SessionBinding, requestID ids.RequestID) (string, error) {
	if field, err := binding.check(); err != nil {
		return "session_binding." + field, err
	}
	if err := nonzero16(requestID); err != nil {
		return "request_id", err
	}
	return "", nil
}

func checkCapabilityField(c *SessionRequestCapability, sandboxID CredentialID) (string, error) {
	if field, err := c.check(); err != nil {
		return "session_capability." + field, err
	}
	if sandboxID == (CredentialID{}) {
		return "sandbox_credential_id", invalid("digest is all zero")
	}
	return "", nil
}

// --- MailboxRequest

func (r *MailboxRequest) check() (string, error) {
	if field, err := checkRequestHead(&r.SessionBinding, r.RequestID); err != nil {
		return field, err
	}
	if field, err := checkCapabilityField(&r.SessionCapability, r.SandboxCredentialID); err != nil {
		return field, err
	}
	if err := checkArgv(r.CommandArgv, hostArgv); err != nil {
		return "command_argv", err
	}
	if err := checkText(r.Justification, MaxJustificationBytes); err != nil {
		return "justification", err
	}
	return "", nil
}

// Validate checks every field's rule.
func (r *MailboxRequest) Validate() error {
	if field, err := r.check(); err != nil {
		return fieldError(RecordMailboxRequest.Name(), field, err)
	}
	return nil
}

// MarshalPostcard writes protocol_version, session_binding, request_id,
// session_capability, sandbox_credential_id, command_argv, justification.
func (r *MailboxRequest) MarshalPostcard(e *postcard.Encoder) {
	writeVersion(e)
	r.SessionBinding.MarshalPostcard(e)
	e.Fixed(r.RequestID[:])
	r.SessionCapability.MarshalPostcard(e)
	e.Fixed(r.SandboxCredentialID[:])
	writeArgv(e, r.CommandArgv)
	e.String(r.Justification)
}

// UnmarshalPostcard reads what MarshalPostcard writes.
func (r *MailboxRequest) UnmarshalPostcard(d *postcard.Decoder) {
	readVersion(d)
	r.SessionBinding.UnmarshalPostcard(d)
	readID(d, (*[16]byte)(&r.RequestID), "request_id")
	r.SessionCapability.UnmarshalPostcard(d)
	d.Fixed(r.SandboxCredentialID[:])
	r.CommandArgv = readArgv(d, "command_argv", hostArgv)
	r.Justification = readJustification(d)
	failCheck(d, r.check)
}

// failCheck records the first rule a decoded record breaks.
func failCheck(d *postcard.Decoder, check func() (string, error)) {
	if d.Err() == nil {
		if field, err := check(); err != nil {
			d.Fail(field, err)
		}
	}
}

// --- MailboxCancellation

func (r *MailboxCancellation) check() (string, error) {
	if field, err := checkRequestHead(&r.SessionBinding, r.RequestID); err != nil {
		return field, err
	}
	return checkCapabilityField(&r.SessionCapability, r.SandboxCredentialID)
}

// Validate checks every field's rule.
func (r *MailboxCancellation) Validate() error {
	if field, err := r.check(); err != nil {
		return fieldError(RecordMailboxCancellation.Name(), field, err)
	}
	return nil
}

// MarshalPostcard writes protocol_version, session_binding, request_id,
// session_capability, sandbox_credential_id.
func (r *MailboxCancellation) MarshalPostcard(e *postcard.Encoder) {
	writeVersion(e)
	r.SessionBinding.MarshalPostcard(e)
	e.Fixed(r.RequestID[:])
	r.SessionCapability.MarshalPostcard(e)
	e.Fixed(r.SandboxCredentialID[:])
}

// UnmarshalPostcard reads what MarshalPostcard writes.
func (r *MailboxCancellation) UnmarshalPostcard(d *postcard.Decoder) {
	readVersion(d)
	r.SessionBinding.UnmarshalPostcard(d)
	readID(d, (*[16]byte)(&r.RequestID), "request_id")
	r.SessionCapability.UnmarshalPostcard(d)
	d.Fixed(r.SandboxCredentialID[:])
	failCheck(d, r.check)
}

// --- MailboxResultAck

func (r *MailboxResultAck) check() (string, error) {
	if field, err := checkRequestHead(&r.SessionBinding, r.RequestID); err != nil {
		return field, err
	}
	return checkCapabilityField(&r.SessionCapability, r.SandboxCredentialID)
}

// Validate checks every field's rule.
func (r *MailboxResultAck) Validate() error {
	if field, err := r.check(); err != nil {
		return fieldError(RecordMailboxResultAck.Name(), field, err)
	}
	return nil
}

// MarshalPostcard writes protocol_version, session_binding, request_id,
// request_sha256, session_capability, sandbox_credential_id,
// highest_contiguous_sequence as Option<u32>.
func (r *MailboxResultAck) MarshalPostcard(e *postcard.Encoder) {
	writeVersion(e)
	r.SessionBinding.MarshalPostcard(e)
	e.Fixed(r.RequestID[:])
	e.Fixed(r.RequestSHA256[:])
	r.SessionCapability.MarshalPostcard(e)
	e.Fixed(r.SandboxCredentialID[:])
	if r.HighestContiguousSequence == nil {
		e.None()
	} else {
		e.Some()
		e.U32(*r.HighestContiguousSequence)
	}
}

// UnmarshalPostcard reads what MarshalPostcard writes.
func (r *MailboxResultAck) UnmarshalPostcard(d *postcard.Decoder) {
	readVersion(d)
	r.SessionBinding.UnmarshalPostcard(d)
	readID(d, (*[16]byte)(&r.RequestID), "request_id")
	d.Fixed(r.RequestSHA256[:])
	r.SessionCapability.UnmarshalPostcard(d)
	d.Fixed(r.SandboxCredentialID[:])
	r.HighestContiguousSequence = nil
	if d.Option() && d.Err() == nil {
		v := d.U32()
		r.HighestContiguousSequence = &v
	}
	failCheck(d, r.check)
}

// --- DeveloperDecision

func (r *DeveloperDecision) check() (string, error) {
	if field, err := checkRequestHead(&r.SessionBinding, r.RequestID); err != nil {
		return field, err
	}
	switch r.Decision {
	case DecisionApprove:
		if err := checkArgv(r.ApprovedCommandArgv, hostArgv); err != nil {
			return "approved_command_argv", err
		}
	case DecisionDeny:
		if r.ApprovedCommandArgv != nil {
			return "approved_command_argv", invalid("must be absent for Deny")
		}
	default:
		return "decision", invalid("unknown decision %d", uint32(r.Decision))
	}
	return "", nil
}

// Validate checks every field's rule.
func (r *DeveloperDecision) Validate() error {
	if field, err := r.check(); err != nil {
		return fieldError(RecordDeveloperDecision.Name(), field, err)
	}
	return nil
}

// MarshalPostcard writes protocol_version, session_binding, request_id,
// request_sha256, decision, approved_command_argv as Option<argv>.
func (r *DeveloperDecision) MarshalPostcard(e *postcard.Encoder) {
	writeVersion(e)
	r.SessionBinding.MarshalPostcard(e)
	e.Fixed(r.RequestID[:])
	e.Fixed(r.RequestSHA256[:])
	e.Variant(uint32(r.Decision))
	if r.ApprovedCommandArgv == nil {
		e.None()
	} else {
		e.Some()
		writeArgv(e, r.ApprovedCommandArgv)
	}
}

// UnmarshalPostcard reads what MarshalPostcard writes.
func (r *DeveloperDecision) UnmarshalPostcard(d *postcard.Decoder) {
	readVersion(d)
	r.SessionBinding.UnmarshalPostcard(d)
	readID(d, (*[16]byte)(&r.RequestID), "request_id")
	d.Fixed(r.RequestSHA256[:])
	r.Decision = DeveloperDecisionKind(d.Variant(uint32(numDecisions)))
	r.ApprovedCommandArgv = nil
	if d.Option() && d.Err() == nil {
		r.ApprovedCommandArgv = readArgv(d, "approved_command_argv", hostArgv)
	}
	failCheck(d, r.check)
}

// --- MailboxResult

func (r *MailboxResult) check() (string, error) {
	if field, err := checkRequestHead(&r.SessionBinding, r.RequestID); err != nil {
		return field, err
	}
	if r.CoordinatorCredentialID == (CredentialID{}) {
		return "coordinator_credential_id", invalid("digest is all zero")
	}
	if r.Outcome >= numOutcomes {
		return "outcome", invalid("unknown outcome %d", uint32(r.Outcome))
	}
	if (r.Outcome == OutcomeCompleted) != (r.ExitCode != nil) {
		return "exit_code", invalid("must be present exactly for Completed")
	}
	return "", nil
}

// Validate checks every field's rule.
func (r *MailboxResult) Validate() error {
	if field, err := r.check(); err != nil {
		return fieldError(RecordMailboxResult.Name(), field, err)
	}
	return nil
}

// MarshalPostcard writes protocol_version, session_binding, request_id,
// request_sha256, coordinator_credential_id, outcome, exit_code as
// Option<u8>, chunk_count (u32), stdout_sha256, stderr_sha256.
func (r *MailboxResult) MarshalPostcard(e *postcard.Encoder) {
	writeVersion(e)
	r.SessionBinding.MarshalPostcard(e)
	e.Fixed(r.RequestID[:])
	e.Fixed(r.RequestSHA256[:])
	e.Fixed(r.CoordinatorCredentialID[:])
	e.Variant(uint32(r.Outcome))
	writeOptionU8(e, r.ExitCode)
	e.U32(r.ChunkCount)
	e.Fixed(r.StdoutSHA256[:])
	e.Fixed(r.StderrSHA256[:])
}

// UnmarshalPostcard reads what MarshalPostcard writes.
func (r *MailboxResult) UnmarshalPostcard(d *postcard.Decoder) {
	readVersion(d)
	r.SessionBinding.UnmarshalPostcard(d)
	readID(d, (*[16]byte)(&r.RequestID), "request_id")
	d.Fixed(r.RequestSHA256[:])
	d.Fixed(r.CoordinatorCredentialID[:])
	r.Outcome = EscalationOutcome(d.Variant(uint32(numOutcomes)))
	r.ExitCode = readOptionU8(d)
	r.ChunkCount = d.U32()
	d.Fixed(r.StdoutSHA256[:])
	d.Fixed(r.StderrSHA256[:])
	failCheck(d, r.check)
}

// --- MailboxResultChunk

func (r *MailboxResultChunk) check() (string, error) {
	if field, err := checkRequestHead(&r.SessionBinding, r.RequestID); err != nil {
		return field, err
	}
	if r.CoordinatorCredentialID == (CredentialID{}) {
		return "coordinator_credential_id", invalid("digest is all zero")
	}
	if r.Stream >= numStreams {
		return "stream", invalid("unknown stream %d", uint32(r.Stream))
	}
	if err := checkBounded(r.Bytes, 1, MaxChunkBytes); err != nil {
		return "bytes", err
	}
	return "", nil
}

// Validate checks every field's rule.
func (r *MailboxResultChunk) Validate() error {
	if field, err := r.check(); err != nil {
		return fieldError(RecordMailboxResultChunk.Name(), field, err)
	}
	return nil
}

// MarshalPostcard writes protocol_version, session_binding, request_id,
// request_sha256, coordinator_credential_id, sequence (u32), stream, bytes.
func (r *MailboxResultChunk) MarshalPostcard(e *postcard.Encoder) {
	writeVersion(e)
	r.SessionBinding.MarshalPostcard(e)
	e.Fixed(r.RequestID[:])
	e.Fixed(r.RequestSHA256[:])
	e.Fixed(r.CoordinatorCredentialID[:])
	e.U32(r.Sequence)
	e.Variant(uint32(r.Stream))
	e.ByteString(r.Bytes)
}

// UnmarshalPostcard reads what MarshalPostcard writes.
func (r *MailboxResultChunk) UnmarshalPostcard(d *postcard.Decoder) {
	readVersion(d)
	r.SessionBinding.UnmarshalPostcard(d)
	readID(d, (*[16]byte)(&r.RequestID), "request_id")
	d.Fixed(r.RequestSHA256[:])
	d.Fixed(r.CoordinatorCredentialID[:])
	r.Sequence = d.U32()
	r.Stream = ResultStream(d.Variant(uint32(numStreams)))
	r.Bytes = readBounded(d, "bytes", 1, MaxChunkBytes)
	failCheck(d, r.check)
}

func (r *MailboxRequest) sizeHint() int {
	n := recordOverhead + len(r.Justification) + 5*len(r.CommandArgv)
	for _, a := range r.CommandArgv {
		n += len(a)
	}
	return n
}

func (r *MailboxResultChunk) sizeHint() int { return recordOverhead + len(r.Bytes) }

func (r *DeveloperDecision) sizeHint() int {
	n := recordOverhead + 5*len(r.ApprovedCommandArgv)
	for _, a := range r.ApprovedCommandArgv {
		n += len(a)
	}
	return n
}

func (s *SignedProtocolRecord) sizeHint() int { return 80 + len(s.PayloadBytes) }
