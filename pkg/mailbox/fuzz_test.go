package mailbox

import (
	"bytes"
	"testing"

	"lazaret.dev/pkg/protocol"
)

// FuzzParseName: every accepted name formats back to itself.
func FuzzParseName(f *testing.F) {
	f.Add("101112131415161718191a1b1c1d1e1f.request.00000000")
	f.Add("a0a1a2a3a4a5a6a7a8a9aaabacadaeaf.chunk.deadbeef")
	f.Add("a0a1a2a3a4a5a6a7a8a9aaabacadaeaf.ack.0000000g")
	f.Add(".tmp.x")
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseName(s)
		if err != nil {
			return
		}
		if n.String() != s {
			t.Fatalf("ParseName(%q) formats as %q", s, n.String())
		}
	})
}

// FuzzParseRecord: the mailbox file parser accepts only canonical envelopes
// of the named kind, and never panics.
func FuzzParseRecord(f *testing.F) {
	valid, _ := protocol.Encode(&protocol.SignedProtocolRecord{Kind: protocol.RecordMailboxResultChunk, PayloadBytes: []byte("abc")})
	f.Add(uint8(KindChunk), valid)
	f.Add(uint8(KindRequest), valid)
	f.Add(uint8(KindResult), []byte{0x04, 0x00})
	f.Add(uint8(KindAck), []byte{0x02, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, kind uint8, raw []byte) {
		n := Name{RequestID: testID(1), Kind: Kind(kind%5 + 1)}
		rec, err := ParseRecord(n, raw)
		if err != nil {
			return
		}
		if rec.Kind != n.Kind.RecordKind() {
			t.Fatalf("accepted a %v record under a %v name", rec.Kind, n.Kind)
		}
		again, err := protocol.Encode(&rec)
		if err != nil || !bytes.Equal(again, raw) {
			t.Fatalf("accepted a non-canonical envelope %x (re-encodes as %x, %v)", raw, again, err)
		}
	})
}
