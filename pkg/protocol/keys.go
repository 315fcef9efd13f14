package protocol

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"

	"lazaret.dev/pkg/ids"
)

// Signature input names that are not mailbox record kinds. Mailbox records
// use RecordKind.Name.
const (
	SignatureTrustManifest            = "trust-manifest"
	SignatureProtocolCredential       = "protocol-credential"
	SignatureSessionRequestCapability = "session-request-capability"
)

// signaturePrefix starts every signature input.
const signaturePrefix = "lazaret/v1/"

// SignatureInput returns "lazaret/v1/" || name || u64be(len(payload)) ||
// payload, the exact bytes an Ed25519 protocol signature covers.
func SignatureInput(name string, payload []byte) []byte {
	b := make([]byte, 0, len(signaturePrefix)+len(name)+8+len(payload))
	b = append(b, signaturePrefix...)
	b = append(b, name...)
	b = binary.BigEndian.AppendUint64(b, uint64(len(payload)))
	return append(b, payload...)
}

// PrivateKey is an Ed25519 private key. Its printed and logged forms show
// only the public key; the key material is reachable only through a pointer
// so that even reflection-based printing of a struct that holds it in an
// unexported field shows an address, never the key.
type PrivateKey struct {
	m *keyMaterial
}

type keyMaterial struct {
	key ed25519.PrivateKey
}

// NewPrivateKey derives the key from its 32-byte Ed25519 seed.
func NewPrivateKey(seed [32]byte) PrivateKey {
	return PrivateKey{m: &keyMaterial{key: ed25519.NewKeyFromSeed(seed[:])}}
}

// GenerateKey draws a seed from r (crypto/rand.Reader in production).
func GenerateKey(r io.Reader) (PrivateKey, error) {
	var seed [32]byte
	if _, err := io.ReadFull(r, seed[:]); err != nil {
		return PrivateKey{}, fmt.Errorf("reading ed25519 seed: %w", err)
	}
	return NewPrivateKey(seed), nil
}

// IsZero reports whether k holds no key.
func (k PrivateKey) IsZero() bool { return k.m == nil }

// Public returns the public key; the zero PrivateKey has the zero PublicKey.
func (k PrivateKey) Public() PublicKey {
	var p PublicKey
	if k.m != nil {
		copy(p[:], k.m.key[32:])
	}
	return p
}

// seed returns the 32-byte seed, the encoding of the key on the wire.
func (k PrivateKey) seed() [32]byte {
	var s [32]byte
	if k.m != nil {
		copy(s[:], k.m.key.Seed())
	}
	return s
}

// ed25519Key returns the key for crypto/tls and crypto/x509.
func (k PrivateKey) ed25519Key() ed25519.PrivateKey {
	if k.m == nil {
		return nil
	}
	return k.m.key
}

// Sign signs the signature input for name and payload. It panics on the zero
// PrivateKey, a programming error.
func (k PrivateKey) Sign(name string, payload []byte) Signature {
	var s Signature
	copy(s[:], ed25519.Sign(k.m.key, SignatureInput(name, payload)))
	return s
}

// Verify reports whether sig is the signature of pub over the signature
// input for name and payload.
func Verify(pub PublicKey, name string, payload []byte, sig Signature) bool {
	return ed25519.Verify(pub[:], SignatureInput(name, payload), sig[:])
}

// String names the key by its public half.
func (k PrivateKey) String() string {
	if k.m == nil {
		return "ed25519 private key (none)"
	}
	return "ed25519 private key (redacted, public " + k.Public().String() + ")"
}

// GoString is String, so %#v redacts too.
func (k PrivateKey) GoString() string { return k.String() }

// Format prints String for every verb, so no verb shows the key.
func (k PrivateKey) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, k.String()) }

// LogValue keeps the key out of slog output.
func (k PrivateKey) LogValue() slog.Value { return slog.StringValue(k.String()) }

// digest is SHA-256.
func digest(b []byte) ids.Digest { return sha256.Sum256(b) }
