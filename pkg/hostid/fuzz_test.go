package hostid

import (
	"bytes"
	"testing"

	"lazaret.dev/pkg/postcard"
	"lazaret.dev/pkg/store/codec"
)

func FuzzOwnershipCBOR(f *testing.F) {
	for _, o := range []PersistedHostProcessOwnership{{}, StagedOwnership(testIdentity(1)), CommittedOwnership(testIdentity(2))} {
		b, _ := codec.Marshal(o)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var o PersistedHostProcessOwnership
		if err := codec.Unmarshal(b, &o); err != nil {
			return
		}
		if err := o.Validate(); err != nil {
			t.Fatalf("decoded an invalid ownership %v: %v", o, err)
		}
		again, err := codec.Marshal(o)
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("accepted non-canonical %x (re-encoded %x, %v)", b, again, err)
		}
	})
}

func FuzzAckPostcard(f *testing.F) {
	ack := ProcessOwnershipCommitAck{Version: V1, Committed: testStaged()}
	f.Add(postcard.Marshal(&ack))
	f.Fuzz(func(t *testing.T, b []byte) {
		var a ProcessOwnershipCommitAck
		if err := postcard.Unmarshal(b, &a); err != nil {
			return
		}
		if a.Version != V1 || a.Committed.Version != V1 || !a.Committed.Slot.Valid() {
			t.Fatalf("decoded an ack outside v1: %+v", a)
		}
		if again := postcard.Marshal(&a); !bytes.Equal(again, b) {
			t.Fatalf("non-minimal input accepted: %x re-encodes as %x", b, again)
		}
	})
}

func FuzzStatStartTime(f *testing.F) {
	f.Add([]byte("42 (bash) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 987654 20 21"))
	f.Add([]byte("1 ((x)) R"))
	f.Fuzz(func(t *testing.T, b []byte) { _, _ = ParseStatStartTime(b) })
}
