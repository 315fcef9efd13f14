package domainstore

import (
	"bytes"
	"testing"

	"lazaret.dev/pkg/store/codec"
)

// fuzzRecord decodes b as a T; whatever decodes must re-encode to exactly
// b (the canonical property) and must not make validation panic.
func fuzzRecord[T any](t *testing.T, b []byte, validate func(*T) error) {
	var v T
	if err := codec.Unmarshal(b, &v); err != nil {
		return
	}
	again, err := codec.Marshal(v)
	if err != nil {
		// A decoded value that cannot be re-encoded is possible only for
		// invalid unions, which validation must then reject.
		if validate(&v) == nil {
			t.Fatalf("valid record does not re-encode: %v", err)
		}
		return
	}
	if !bytes.Equal(again, b) {
		t.Fatalf("accepted non-canonical input\n in  %x\n out %x", b, again)
	}
	_ = validate(&v)
}

func seedParticipants(f *testing.F) {
	for _, role := range Roles() {
		for _, p := range []*Participant{part(role, StateIntent, nil), part(role, StateIntent, staging(role)), part(role, role.ActiveState(), full(role)), part(role, StateClean, EmptyOwnership(role))} {
			b, err := codec.Marshal(*p)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
		}
	}
}

func FuzzParticipantDecode(f *testing.F) {
	seedParticipants(f)
	f.Fuzz(func(t *testing.T, b []byte) { fuzzRecord(t, b, VerifyParticipant) })
}

func FuzzSessionTerminalDecode(f *testing.F) {
	for _, tm := range []*SessionTerminal{term(TerminalIntent, nil), term(TerminalRunning, running), term(TerminalClean, nil)} {
		b, _ := codec.Marshal(*tm)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) { fuzzRecord(t, b, VerifySessionTerminal) })
}

func FuzzGenerationDecode(f *testing.F) {
	b, _ := codec.Marshal(*testGeneration(PhaseReady))
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) { fuzzRecord(t, b, (*Generation).Validate) })
}

func FuzzSessionAndMailboxDecode(f *testing.F) {
	b, _ := codec.Marshal(Session{GenerationID: testGen, SessionID: testSession, SessionPhase: SessionAttached})
	f.Add(b)
	b, _ = codec.Marshal(Mailbox{GenerationID: testGen, IdentityPath: "/a", InboxPath: "/b", OutboxPath: "/c", State: StateIntent})
	f.Add(b)
	b, _ = codec.Marshal(testDomainRecord)
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		fuzzRecord(t, b, (*Session).Validate)
		fuzzRecord(t, b, (*Mailbox).Validate)
		fuzzRecord(t, b, (*Domain).Validate)
	})
}
