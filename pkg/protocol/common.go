package protocol

import (
	"encoding/hex"
	"fmt"
	"strings"
	"unicode/utf8"

	"lazaret.dev/pkg/ids"
	"lazaret.dev/pkg/postcard"
)

// Version is the only protocol_version of v1 records. It is written as a u32
// varint (the single byte 0x01).
const Version uint32 = 1

// Size limits. Decoders refuse larger values before allocating for them.
const (
	// MaxChunkBytes bounds MailboxResultChunk.bytes.
	MaxChunkBytes = 64 << 10
	// MaxTerminalBytes bounds TerminalInput, TerminalOutput and
	// NonInteractiveOutput bytes.
	MaxTerminalBytes = 64 << 10
	// MaxArgvElements bounds the number of argv elements.
	MaxArgvElements = 1024
	// MaxArgvBytes bounds the sum of the byte lengths of argv elements.
	MaxArgvBytes = 64 << 10
	// MaxJustificationBytes bounds MailboxRequest.justification.
	MaxJustificationBytes = 4 << 10
	// MaxDERBytes bounds every certificate and CSR.
	MaxDERBytes = 16 << 10
	// MaxBatchMessages bounds InteractiveSessionBatch.messages.
	MaxBatchMessages = 256
	// MaxSignedPayloadBytes bounds SignedProtocolRecord.payload_bytes. It
	// holds the largest valid record of every kind (a request with maximal
	// argv and justification, a chunk with MaxChunkBytes).
	MaxSignedPayloadBytes = 96 << 10
	// maxProfileBytes is the longest agent profile name.
	maxProfileBytes = 64
)

// PublicKey is an Ed25519 public key, a 32-byte fixed array on the wire.
type PublicKey [32]byte

// Signature is an Ed25519 signature, a 64-byte fixed array on the wire.
type Signature [64]byte

// CredentialID is a ProtocolCredential ID: SHA-256 over the credential's
// claim fields without credential_id and issuer_signature.
type CredentialID ids.Digest

// CapabilityID is a SessionRequestCapability ID: SHA-256 over the
// capability's fields without capability_id and coordinator_signature.
type CapabilityID ids.Digest

func (k PublicKey) String() string    { return hex.EncodeToString(k[:]) }
func (s Signature) String() string    { return hex.EncodeToString(s[:]) }
func (c CredentialID) String() string { return hex.EncodeToString(c[:]) }
func (c CapabilityID) String() string { return hex.EncodeToString(c[:]) }

// Record is a protocol record: it validates itself and has a strict Postcard
// encoding.
type Record interface {
	postcard.Marshaler
	postcard.Unmarshaler
	// Validate reports the first field that breaks the record's rules.
	Validate() error
}

// Encode validates r and returns its minimal encoding.
func Encode(r Record) ([]byte, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	hint := 256
	if h, ok := r.(sizeHinter); ok {
		hint = h.sizeHint()
	}
	e := postcard.NewEncoder(hint)
	r.MarshalPostcard(e)
	return e.Bytes(), nil
}

// sizeHinter is a record that can estimate its encoded size, so that
// Encode allocates once.
type sizeHinter interface{ sizeHint() int }

// recordOverhead bounds the encoding of a record's fixed fields (binding,
// capability, IDs and digests).
const recordOverhead = 1024

// Decode reads exactly one minimal encoding of a valid record from b into r.
// Errors are postcard.DecodeError values naming the field and byte offset.
func Decode(b []byte, r Record) error {
	return postcard.Unmarshal(b, r)
}

// invalid returns a rule violation that wraps postcard.ErrInvalidValue.
func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", postcard.ErrInvalidValue, fmt.Sprintf(format, args...))
}

// fieldError names the field of a record that failed validation.
func fieldError(record, field string, err error) error {
	return &Error{Kind: KindMalformed, Record: record, Field: field, Err: err}
}

// writeVersion writes the constant protocol_version.
func writeVersion(e *postcard.Encoder) { e.U32(Version) }

// readVersion reads protocol_version and refuses anything but Version.
func readVersion(d *postcard.Decoder) {
	v := d.U32()
	if d.Err() == nil && v != Version {
		d.Fail("protocol_version", invalid("version %d is not supported, want %d", v, Version))
	}
}

// nonzero16 refuses an all-zero 16-byte identifier.
func nonzero16(id [16]byte) error {
	if id == ([16]byte{}) {
		return invalid("identifier is all zero")
	}
	return nil
}

func readID(d *postcard.Decoder, dst *[16]byte, field string) {
	d.Fixed(dst[:])
	if d.Err() == nil {
		if err := nonzero16(*dst); err != nil {
			d.Fail(field, err)
		}
	}
}

// checkProfile applies the profile-name grammar
// [A-Za-z0-9][A-Za-z0-9._-]{0,63}, excluding "." and "..".
func checkProfile(s string) error {
	if s == "" || len(s) > maxProfileBytes {
		return invalid("profile name must be 1 to %d bytes, got %d", maxProfileBytes, len(s))
	}
	if s == "." || s == ".." {
		return invalid("profile name %q is reserved", s)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		alnum := c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
		if alnum || i > 0 && (c == '.' || c == '_' || c == '-') {
			continue
		}
		return invalid("profile name %q has %q at byte %d", s, c, i)
	}
	return nil
}

// checkText requires valid UTF-8 without NUL and at most max bytes.
func checkText(s string, max int) error {
	if len(s) > max {
		return invalid("%d bytes exceed the limit of %d", len(s), max)
	}
	if !utf8.ValidString(s) {
		return invalid("not valid UTF-8")
	}
	if i := strings.IndexByte(s, 0); i >= 0 {
		return invalid("NUL byte at offset %d", i)
	}
	return nil
}

// argvRules says what an argv must satisfy beyond being nonempty, bounded,
// UTF-8 and NUL-free.
type argvRules struct {
	absolute bool // element 0 must be an absolute path
}

var (
	hostArgv    = argvRules{absolute: true}
	sandboxArgv = argvRules{absolute: false}
)

// checkArgv validates an argv: 1 to MaxArgvElements elements, at most
// MaxArgvBytes in total, each UTF-8 and NUL-free, element 0 nonempty and,
// for host commands, absolute.
func checkArgv(argv []string, rules argvRules) error {
	if len(argv) == 0 {
		return invalid("argv is empty")
	}
	if len(argv) > MaxArgvElements {
		return invalid("argv has %d elements, the limit is %d", len(argv), MaxArgvElements)
	}
	total := 0
	for i, a := range argv {
		total += len(a)
		if total > MaxArgvBytes {
			return invalid("argv exceeds %d bytes at element %d", MaxArgvBytes, i)
		}
		if err := checkText(a, MaxArgvBytes); err != nil {
			return fmt.Errorf("element %d: %w", i, err)
		}
	}
	if argv[0] == "" {
		return invalid("element 0 is empty")
	}
	if rules.absolute && argv[0][0] != '/' {
		return invalid("element 0 %q is not an absolute path", argv[0])
	}
	return nil
}

func writeArgv(e *postcard.Encoder, argv []string) {
	e.SeqLen(len(argv))
	for _, a := range argv {
		e.String(a)
	}
}

func readArgv(d *postcard.Decoder, field string, rules argvRules) []string {
	n := d.SeqLen(1)
	if d.Err() != nil {
		return nil
	}
	if n > MaxArgvElements {
		d.Fail(field, invalid("argv has %d elements, the limit is %d", n, MaxArgvElements))
		return nil
	}
	argv := make([]string, n)
	for i := range argv {
		argv[i] = d.String()
	}
	if d.Err() == nil {
		if err := checkArgv(argv, rules); err != nil {
			d.Fail(field, err)
		}
	}
	if d.Err() != nil {
		return nil
	}
	return argv
}

// readBounded reads a byte string of min to max bytes. The decoder has
// already checked that the length does not exceed the remaining input, so a
// hostile length cannot make it allocate beyond the input.
func readBounded(d *postcard.Decoder, field string, min, max int) []byte {
	b := d.ByteString()
	if d.Err() != nil {
		return nil
	}
	if err := checkBounded(b, min, max); err != nil {
		d.Fail(field, err)
		return nil
	}
	return b
}

func checkBounded(b []byte, min, max int) error {
	if len(b) < min || len(b) > max {
		return invalid("%d bytes, want %d to %d", len(b), min, max)
	}
	return nil
}
