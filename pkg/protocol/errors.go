package protocol

import "fmt"

// Kind classifies a verification or validation failure.
type Kind int

// Failure kinds. Each has a sentinel Err* value for errors.Is.
const (
	// KindMalformed: the bytes do not decode, or a field breaks its rule.
	KindMalformed Kind = iota + 1
	// KindRecordKind: a signed record is not of the expected kind.
	KindRecordKind
	// KindSignature: a signature does not verify under the expected key.
	KindSignature
	// KindCredential: a credential has the wrong ID, role, subject, issuer
	// or generation, or is not the one the receiver trusts.
	KindCredential
	// KindGeneration: a generation identity differs from the receiver's.
	KindGeneration
	// KindBinding: a session binding differs from the registered one.
	KindBinding
	// KindCapability: a session request capability does not chain to the
	// coordinator and sandbox credentials or to the request's binding.
	KindCapability
	// KindRequest: a record names another request ID.
	KindRequest
	// KindRequestDigest: request_sha256 differs from the request's digest.
	KindRequestDigest
	// KindSequence: result chunks are not contiguous from 0.
	KindSequence
	// KindStreamDigest: a stream digest differs from the received bytes.
	KindStreamDigest
	// KindChunkCount: chunk_count differs from the chunks received.
	KindChunkCount
	// KindReplay: a request ID was already consumed in its generation.
	KindReplay
	// KindReplayCapacity: the replay guard is full and refuses new IDs.
	KindReplayCapacity
	// KindCertificate: a certificate, CSR or TLS peer is not acceptable.
	KindCertificate
	// KindTrustManifest: a trust manifest differs from the published one.
	KindTrustManifest
)

var kindNames = [...]string{
	KindMalformed:      "malformed record",
	KindRecordKind:     "unexpected record kind",
	KindSignature:      "invalid signature",
	KindCredential:     "untrusted credential",
	KindGeneration:     "generation identity mismatch",
	KindBinding:        "session binding mismatch",
	KindCapability:     "invalid session request capability",
	KindRequest:        "request ID mismatch",
	KindRequestDigest:  "request digest mismatch",
	KindSequence:       "result chunk out of sequence",
	KindStreamDigest:   "result stream digest mismatch",
	KindChunkCount:     "result chunk count mismatch",
	KindReplay:         "replayed request ID",
	KindReplayCapacity: "replay guard full",
	KindCertificate:    "unacceptable certificate",
	KindTrustManifest:  "trust manifest mismatch",
}

func (k Kind) String() string {
	if k >= KindMalformed && int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("protocol error kind %d", int(k))
}

// Error is a protocol validation or verification failure. Record is the
// lower-kebab record name, Field the field that failed (both may be empty),
// Err the underlying cause.
type Error struct {
	Kind   Kind
	Record string
	Field  string
	Err    error
}

// Sentinels for errors.Is: an *Error matches the sentinel of its Kind.
var (
	ErrMalformed      = &Error{Kind: KindMalformed}
	ErrRecordKind     = &Error{Kind: KindRecordKind}
	ErrSignature      = &Error{Kind: KindSignature}
	ErrCredential     = &Error{Kind: KindCredential}
	ErrGeneration     = &Error{Kind: KindGeneration}
	ErrBinding        = &Error{Kind: KindBinding}
	ErrCapability     = &Error{Kind: KindCapability}
	ErrRequest        = &Error{Kind: KindRequest}
	ErrRequestDigest  = &Error{Kind: KindRequestDigest}
	ErrSequence       = &Error{Kind: KindSequence}
	ErrStreamDigest   = &Error{Kind: KindStreamDigest}
	ErrChunkCount     = &Error{Kind: KindChunkCount}
	ErrReplay         = &Error{Kind: KindReplay}
	ErrReplayCapacity = &Error{Kind: KindReplayCapacity}
	ErrCertificate    = &Error{Kind: KindCertificate}
	ErrTrustManifest  = &Error{Kind: KindTrustManifest}
)

func (e *Error) Error() string {
	s := e.Kind.String()
	if e.Record != "" {
		s += " in " + e.Record
	}
	if e.Field != "" {
		s += " field " + e.Field
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Is reports whether target is the sentinel of e's Kind.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Record == "" && t.Field == "" && t.Err == nil && t.Kind == e.Kind
}

func newError(kind Kind, record, field string, format string, args ...any) *Error {
	return &Error{Kind: kind, Record: record, Field: field, Err: fmt.Errorf(format, args...)}
}
