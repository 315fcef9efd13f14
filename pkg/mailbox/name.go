package mailbox

import (
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"lazaret.dev/pkg/ids"
	"lazaret.dev/pkg/protocol"
)

// Kind is the record kind a mailbox file name announces. It must agree with
// the variant of the SignedProtocolRecord inside.
type Kind uint8

// File kinds. The first three travel in the outbox, the last two in the
// inbox.
const (
	KindRequest      Kind = iota + 1 // MailboxRequest, sequence 0
	KindCancellation                 // MailboxCancellation, sequence 0
	KindAck                          // MailboxResultAck, sequence counts the guest's acks from 0
	KindChunk                        // MailboxResultChunk, sequence = the chunk's sequence
	KindResult                       // MailboxResult, sequence 0
)

var kindNames = map[Kind]string{
	KindRequest:      "request",
	KindCancellation: "cancellation",
	KindAck:          "ack",
	KindChunk:        "chunk",
	KindResult:       "result",
}

var recordKinds = map[Kind]protocol.RecordKind{
	KindRequest:      protocol.RecordMailboxRequest,
	KindCancellation: protocol.RecordMailboxCancellation,
	KindAck:          protocol.RecordMailboxResultAck,
	KindChunk:        protocol.RecordMailboxResultChunk,
	KindResult:       protocol.RecordMailboxResult,
}

func (k Kind) String() string {
	if s, ok := kindNames[k]; ok {
		return s
	}
	return fmt.Sprintf("mailbox kind %d", uint8(k))
}

// RecordKind is the SignedProtocolRecord variant a file of kind k carries.
func (k Kind) RecordKind() protocol.RecordKind { return recordKinds[k] }

// Direction says which way a directory carries records.
type Direction uint8

// Directions.
const (
	Outbox Direction = iota + 1 // guest to host
	Inbox                       // host to guest
)

func (d Direction) String() string {
	switch d {
	case Outbox:
		return "outbox"
	case Inbox:
		return "inbox"
	}
	return fmt.Sprintf("mailbox direction %d", uint8(d))
}

// Accepts reports whether files of kind k belong in a directory of
// direction d.
func (d Direction) Accepts(k Kind) bool {
	switch d {
	case Outbox:
		return k == KindRequest || k == KindCancellation || k == KindAck
	case Inbox:
		return k == KindChunk || k == KindResult
	}
	return false
}

// TempPrefix starts every temporary name. Readers skip such names.
const TempPrefix = ".tmp."

// Name is a parsed mailbox file name.
type Name struct {
	RequestID ids.RequestID
	Kind      Kind
	Sequence  uint32
}

// String is the file name: <request ID hex>.<kind>.<sequence as 8 hex digits>.
func (n Name) String() string {
	return fmt.Sprintf("%s.%s.%08x", hex.EncodeToString(n.RequestID[:]), n.Kind, n.Sequence)
}

// ParseName parses a file name strictly: exactly 32 lowercase hex digits of
// a nonzero request ID, a known kind, exactly 8 lowercase hex digits, and
// nothing else. Requests, cancellations and results must carry sequence 0.
func ParseName(s string) (Name, error) {
	parts := strings.Split(s, ".")
	if len(parts) != 3 {
		return Name{}, &NameError{Name: s, Reason: "not of the form <request id>.<kind>.<sequence>"}
	}
	var n Name
	if len(parts[0]) != 32 || !lowerHex(parts[0]) {
		return Name{}, &NameError{Name: s, Reason: "request ID is not 32 lowercase hex digits"}
	}
	hex.Decode(n.RequestID[:], []byte(parts[0]))
	if n.RequestID == (ids.RequestID{}) {
		return Name{}, &NameError{Name: s, Reason: "request ID is all zero"}
	}
	for k, name := range kindNames {
		if parts[1] == name {
			n.Kind = k
		}
	}
	if n.Kind == 0 {
		return Name{}, &NameError{Name: s, Reason: fmt.Sprintf("unknown kind %q", parts[1])}
	}
	if len(parts[2]) != 8 || !lowerHex(parts[2]) {
		return Name{}, &NameError{Name: s, Reason: "sequence is not 8 lowercase hex digits"}
	}
	seq, _ := strconv.ParseUint(parts[2], 16, 32)
	n.Sequence = uint32(seq)
	if n.Sequence != 0 && n.Kind != KindAck && n.Kind != KindChunk {
		return Name{}, &NameError{Name: s, Reason: fmt.Sprintf("a %s file has sequence 0", n.Kind)}
	}
	return n, nil
}

func lowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// less orders names by request, then kind, then sequence, so that a
// request is handled before its cancellation and chunks in sequence order.
func less(a, b Name) bool {
	if a.RequestID != b.RequestID {
		return string(a.RequestID[:]) < string(b.RequestID[:])
	}
	if a.Kind != b.Kind {
		return a.Kind < b.Kind
	}
	return a.Sequence < b.Sequence
}
