// Package ids defines the fixed-size identifiers that Lazaret's records,
// stores and protocol messages share, so that a generation ID in the Domain
// Store and in a signed claim are the same type.
//
// A DomainID is a SHA-256 digest (DomainIdV1). Every other identifier is 16
// random bytes drawn from crypto/rand when its object is created. On the
// Postcard wire every identifier is a fixed-size byte array (no length).
package ids

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
)

// Digest is a SHA-256 digest.
type Digest [32]byte

// DomainID is DomainIdV1: SHA-256 over the selected profile and the
// canonical workspace.
type DomainID Digest

// ID is a 16-byte random identifier.
type ID [16]byte

// Named identifier kinds. They are distinct types so that a session ID can
// never be passed where a request ID is expected.
type (
	GenerationID  ID
	CoordinatorID ID
	SandboxID     ID
	SidecarID     ID
	CLIID         ID
	SessionID     ID
	RequestID     ID
	OperationID   ID
)

// New returns a fresh random identifier. crypto/rand never fails on Linux
// (it blocks until the pool is seeded).
func New() ID {
	var id ID
	if _, err := rand.Read(id[:]); err != nil {
		panic(fmt.Sprintf("reading crypto/rand: %v", err))
	}
	return id
}

// IsZero reports whether every byte is zero.
func (id ID) IsZero() bool { return id == ID{} }

func (id ID) String() string { return hex.EncodeToString(id[:]) }

func (d Digest) String() string { return hex.EncodeToString(d[:]) }

func (d DomainID) String() string { return hex.EncodeToString(d[:]) }

func (id GenerationID) String() string  { return ID(id).String() }
func (id CoordinatorID) String() string { return ID(id).String() }
func (id SandboxID) String() string     { return ID(id).String() }
func (id SidecarID) String() string     { return ID(id).String() }
func (id CLIID) String() string         { return ID(id).String() }
func (id SessionID) String() string     { return ID(id).String() }
func (id RequestID) String() string     { return ID(id).String() }
func (id OperationID) String() string   { return ID(id).String() }

// ParseHex decodes exactly len(dst)*2 lowercase or uppercase hex digits into
// dst; what names the value in the error.
func ParseHex(dst []byte, s, what string) error {
	if len(s) != 2*len(dst) {
		return fmt.Errorf("parsing %s: want %d hex digits, got %d", what, 2*len(dst), len(s))
	}
	if _, err := hex.Decode(dst, []byte(s)); err != nil {
		return fmt.Errorf("parsing %s: %w", what, err)
	}
	return nil
}
