package domainstore

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"

	"lazaret.dev/pkg/ids"
	"lazaret.dev/pkg/store"
)

var testDomainRecord = Domain{DomainID: testDomain, ProfileName: "default", CanonicalWorkspace: "/home/u/src"}

func openTestStore(t testing.TB, root string) *Store {
	t.Helper()
	s, err := Create(root, testDomainRecord, Options{Boot: &testBoot})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func genWith(id ids.GenerationID, d DomainPhase) Generation {
	g := *testGeneration(d)
	g.GenerationID = id
	return g
}

func TestStoreLifecycle(t *testing.T) {
	root := t.TempDir()
	s := openTestStore(t, root)
	if got := s.Path(); got != filepath.Join(root, "domains", testDomain.String()+".db") {
		t.Fatalf("path %q", got)
	}
	err := s.Update(func(tx *Tx) error { return tx.PutGeneration(genWith(testGen, PhaseStarting)) })
	if err != nil {
		t.Fatal(err)
	}
	// One generation, walked through every participant's whole life.
	for _, role := range Roles() {
		steps := []struct {
			p     *Participant
			proof *store.AbsenceProof
		}{
			{part(role, StateIntent, nil), nil},
			{part(role, StateIntent, staging(role)), nil},
			{part(role, role.ActiveState(), full(role)), nil},
		}
		for _, st := range steps {
			if err := s.Update(func(tx *Tx) error { return tx.PutParticipant(*st.p, st.proof) }); err != nil {
				t.Fatalf("%v %v: %v", role, st.p.State, err)
			}
		}
	}
	sess := Session{GenerationID: testGen, SessionID: testSession, CLIID: ids.CLIID{1}, SessionAnchorID: ids.Digest{2}, SessionPhase: SessionAttached}
	mb := Mailbox{GenerationID: testGen, IdentityPath: "/run/l/identity", InboxPath: "/run/l/in", OutboxPath: "/run/l/out", State: StateIntent}
	err = s.Update(func(tx *Tx) error {
		if err := tx.PutSession(sess); err != nil {
			return err
		}
		if err := tx.PutTerminal(*term(TerminalIntent, nil), nil); err != nil {
			return err
		}
		if err := tx.PutTerminal(*term(TerminalIntent, func(t *SessionTerminal) { running(t); t.ExecClient = staged(10) }), nil); err != nil {
			return err
		}
		if err := tx.PutTerminal(*term(TerminalRunning, running), nil); err != nil {
			return err
		}
		return tx.PutMailbox(mb, nil)
	})
	if err != nil {
		t.Fatal(err)
	}
	var c Contents
	if err := s.View(func(tx *Tx) error { var e error; c, e = tx.Scan(); return e }); err != nil {
		t.Fatal(err)
	}
	if len(c.Generations) != 1 || len(c.Generations[0].Participants) != 7 || len(c.Generations[0].Terminals) != 1 || c.Generations[0].Mailbox == nil {
		t.Fatalf("scan = %+v", c)
	}
	if err := s.Update(func(tx *Tx) error { return tx.DeleteGeneration(testGen) }); !errors.Is(err, store.ErrIllegalTransition) {
		t.Fatalf("delete of a live generation = %v", err)
	}

	// Tear down in reverse.
	err = s.Update(func(tx *Tx) error {
		for _, step := range []func() error{
			func() error { g := genWith(testGen, PhaseStopping); return tx.PutGeneration(g) },
			func() error { return tx.PutTerminal(*term(TerminalReleaseIntent, running), nil) },
			func() error { return tx.PutTerminal(*term(TerminalClean, nil), proof) },
			func() error { s := sess; s.SessionPhase = SessionClosed; return tx.PutSession(s) },
			func() error { m := mb; m.State = StateClean; return tx.PutMailbox(m, proof) },
		} {
			if err := step(); err != nil {
				return err
			}
		}
		for i := len(Roles()) - 1; i >= 0; i-- {
			role := Roles()[i]
			if err := tx.PutParticipant(*part(role, StateReleaseIntent, releasing(role)), nil); err != nil {
				return err
			}
			if err := tx.PutParticipant(*part(role, StateClean, EmptyOwnership(role)), proof); err != nil {
				return err
			}
		}
		return tx.PutGeneration(genWith(testGen, PhaseAbsent))
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Update(func(tx *Tx) error { return tx.PutParticipant(*part(RoleSandbox, StateIntent, nil), nil) }); !errors.Is(err, store.ErrEvidenceChanged) {
		t.Fatalf("Clean participant rewritten as bare Intent: %v", err)
	}
	err = s.Update(func(tx *Tx) error {
		if err := tx.PutGeneration(genWith(testGen2, PhaseStarting)); err != nil {
			return err
		}
		return tx.PutGeneration(genWith(testGen2, PhaseAbsent))
	})
	if err != nil {
		t.Fatal(err)
	}
	p2 := *part(RoleSandbox, StateIntent, nil)
	p2.GenerationID = testGen2
	if err := s.Update(func(tx *Tx) error { return tx.PutParticipant(p2, nil) }); !errors.Is(err, store.ErrIllegalTransition) {
		t.Fatalf("participant added to an Absent generation: %v", err)
	}
	if err := s.Update(func(tx *Tx) error { return tx.DeleteGeneration(testGen2) }); err != nil {
		t.Fatal(err)
	}
	if err := s.Update(func(tx *Tx) error { return tx.DeleteGeneration(testGen) }); err != nil {
		t.Fatal(err)
	}
	if err := s.View(func(tx *Tx) error { var e error; c, e = tx.Scan(); return e }); err != nil || len(c.Generations) != 0 {
		t.Fatalf("after delete: %+v, %v", c, err)
	}
}

// TestRefusedWriteChangesNothing: a transaction whose later write is
// refused keeps none of its earlier writes.
func TestRefusedWriteChangesNothing(t *testing.T) {
	s := openTestStore(t, t.TempDir())
	if err := s.Update(func(tx *Tx) error { return tx.PutGeneration(genWith(testGen, PhaseStarting)) }); err != nil {
		t.Fatal(err)
	}
	before := readAll(t, s)
	err := s.Update(func(tx *Tx) error {
		if err := tx.PutParticipant(*part(RoleSandbox, StateIntent, nil), nil); err != nil {
			return err
		}
		if err := tx.PutGeneration(genWith(testGen, PhaseReady)); err != nil {
			return err
		}
		return tx.PutParticipant(*part(RoleSandbox, StateCommitted, full(RoleSandbox)), nil)
	})
	if !errors.Is(err, store.ErrIllegalTransition) {
		t.Fatalf("= %v", err)
	}
	if after := readAll(t, s); !equalMaps(before, after) {
		t.Fatal("refused transaction left writes behind")
	}
}

func readAll(t *testing.T, s *Store) map[string]string {
	t.Helper()
	m := map[string]string{}
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
			return b.ForEach(func(k, v []byte) error { m[string(name)+"/"+string(k)] = string(v); return nil })
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func TestCrossRecordChecks(t *testing.T) {
	s := openTestStore(t, t.TempDir())
	mustUpdate := func(f func(tx *Tx) error) error { return s.Update(f) }
	if err := mustUpdate(func(tx *Tx) error { return tx.PutParticipant(*part(RoleSandbox, StateIntent, nil), nil) }); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("participant without generation = %v", err)
	}
	other := genWith(testGen, PhaseStarting)
	other.DomainID = ids.DomainID{0xee}
	if err := mustUpdate(func(tx *Tx) error { return tx.PutGeneration(other) }); !errors.Is(err, store.ErrReferenceMismatch) {
		t.Fatalf("generation of another domain = %v", err)
	}
	if err := mustUpdate(func(tx *Tx) error { return tx.PutGeneration(genWith(testGen, PhaseStarting)) }); err != nil {
		t.Fatal(err)
	}
	helper := edit(staging(RoleHelper), func(o *ParticipantOwnership) { o.Helper.NetworkSidecarID = &ids.SidecarID{0x77} })
	if err := mustUpdate(func(tx *Tx) error { return tx.PutParticipant(*part(RoleHelper, StateIntent, helper), nil) }); !errors.Is(err, store.ErrReferenceMismatch) {
		t.Fatalf("helper with another sidecar = %v", err)
	}
	netOther := edit(staging(RoleNetwork), func(o *ParticipantOwnership) {
		e := NewReadinessEvidence(ids.DomainID{0xee}, testGen, testSidecar, *digest(0xf1))
		o.Network.ReadinessEvidence = &e
	})
	if err := mustUpdate(func(tx *Tx) error { return tx.PutParticipant(*part(RoleNetwork, StateIntent, netOther), nil) }); !errors.Is(err, store.ErrReferenceMismatch) {
		t.Fatalf("evidence of another domain = %v", err)
	}
	netSidecar := edit(staging(RoleNetwork), func(o *ParticipantOwnership) {
		e := NewReadinessEvidence(testDomain, testGen, ids.SidecarID{0x77}, *digest(0xf1))
		o.Network.ReadinessEvidence = &e
	})
	if err := mustUpdate(func(tx *Tx) error { return tx.PutParticipant(*part(RoleNetwork, StateIntent, netSidecar), nil) }); !errors.Is(err, store.ErrReferenceMismatch) {
		t.Fatalf("evidence of another sidecar = %v", err)
	}
	if err := mustUpdate(func(tx *Tx) error { return tx.PutTerminal(*term(TerminalIntent, nil), nil) }); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("terminal without session = %v", err)
	}
}

func TestDomainMismatch(t *testing.T) {
	root := t.TempDir()
	s := openTestStore(t, root)
	s.Close()
	d := testDomainRecord
	d.ProfileName = "other"
	if _, err := Create(root, d, Options{Boot: &testBoot}); !errors.Is(err, store.ErrExists) {
		t.Fatalf("create with another profile = %v", err)
	}
	// A Domain Store file renamed to another Domain's name is refused.
	other := ids.DomainID{0xee}
	if err := os.Rename(Path(root, testDomain), Path(root, other)); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(root, other, Options{Boot: &testBoot}); !errors.Is(err, store.ErrReferenceMismatch) {
		t.Fatalf("renamed store = %v", err)
	}
}

// TestCorruptRowRefused: a row that is not the canonical encoding of a
// valid record is reported with its key, never silently used.
func TestCorruptRowRefused(t *testing.T) {
	s := openTestStore(t, t.TempDir())
	if err := s.Update(func(tx *Tx) error { return tx.PutGeneration(genWith(testGen, PhaseStarting)) }); err != nil {
		t.Fatal(err)
	}
	cases := map[string][]byte{
		"garbage":                 {0xff},
		"unknown field":           mustEncode(t, map[string]any{"generation_id": testGen[:], "role": "Sandbox", "state": "Intent", "extra": 1}),
		"short generation":        mustEncode(t, map[string]any{"generation_id": testGen[:15], "role": "Sandbox", "state": "Intent"}),
		"unknown state name":      mustEncode(t, map[string]any{"generation_id": testGen[:], "role": "Sandbox", "state": "Running"}),
		"missing state":           mustEncode(t, map[string]any{"generation_id": testGen[:], "role": "Sandbox"}),
		"active without evidence": mustEncode(t, map[string]any{"generation_id": testGen[:], "role": "Sandbox", "state": "Committed"}),
	}
	for name, raw := range cases {
		t.Run(name, func(t *testing.T) {
			err := s.db.Update(func(tx *bolt.Tx) error {
				return tx.Bucket(bucketParticipants).Put(participantKey(testGen, RoleSandbox), raw)
			})
			if err != nil {
				t.Fatal(err)
			}
			err = s.View(func(tx *Tx) error { _, e := tx.Scan(); return e })
			if err == nil {
				t.Fatal("scan accepted the row")
			}
			var re *store.RecordError
			if !errors.As(err, &re) {
				t.Fatalf("error %T: %v", err, err)
			}
			if err := s.Update(func(tx *Tx) error { return tx.PutParticipant(*part(RoleSandbox, StateIntent, nil), nil) }); err == nil {
				t.Fatal("write over an unreadable row accepted")
			}
		})
	}
}

func mustEncode(t *testing.T, v any) []byte {
	t.Helper()
	b, err := encodeForTest(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
