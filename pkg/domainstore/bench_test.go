package domainstore

import (
	"testing"

	"lazaret.dev/pkg/ids"
)

// BenchmarkParticipantTransition measures one checked participant write
// (a bare Intent gaining its staged snapshot), committed with fsync.
func BenchmarkParticipantTransition(b *testing.B) {
	s := openTestStore(b, b.TempDir())
	gens := make([]ids.GenerationID, b.N)
	err := s.Update(func(tx *Tx) error {
		for i := range gens {
			gens[i] = ids.GenerationID(ids.New())
			if err := tx.PutGeneration(genWith(gens[i], PhaseStarting)); err != nil {
				return err
			}
			p := *part(RoleSandbox, StateIntent, nil)
			p.GenerationID = gens[i]
			if err := tx.PutParticipant(p, nil); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		p := *part(RoleSandbox, StateIntent, staging(RoleSandbox))
		p.GenerationID = gens[i]
		if err := s.Update(func(tx *Tx) error { return tx.PutParticipant(p, nil) }); err != nil {
			b.Fatal(err)
		}
	}
}

// fillStore writes n generations, each with all seven participants active,
// a session with a Running terminal, and a committed mailbox.
func fillStore(b *testing.B, s *Store, n int) {
	b.Helper()
	err := s.Update(func(tx *Tx) error {
		for i := 0; i < n; i++ {
			gid := ids.GenerationID(ids.New())
			if err := tx.PutGeneration(genWith(gid, PhaseStarting)); err != nil {
				return err
			}
			for _, role := range Roles() {
				for _, p := range []*Participant{part(role, StateIntent, nil), part(role, StateIntent, staging(role)), part(role, role.ActiveState(), full(role))} {
					q := *p
					q.GenerationID = gid
					if q.Ownership != nil && q.Ownership.Network != nil {
						q.Ownership = clone(q.Ownership)
						e := NewReadinessEvidence(testDomain, gid, testSidecar, *q.Ownership.Network.ReadinessFingerprint)
						q.Ownership.Network.ReadinessEvidence = &e
					}
					if err := tx.PutParticipant(q, nil); err != nil {
						return err
					}
				}
			}
			sid := ids.SessionID(ids.New())
			if err := tx.PutSession(Session{GenerationID: gid, SessionID: sid, CLIID: ids.CLIID{1}, SessionAnchorID: ids.Digest{2}, SessionPhase: SessionAttached}); err != nil {
				return err
			}
			for _, st := range []*SessionTerminal{term(TerminalIntent, func(t *SessionTerminal) { running(t); t.ExecClient = staged(10) }), term(TerminalRunning, running)} {
				st.GenerationID, st.SessionID = gid, sid
				if err := tx.PutTerminal(*st, nil); err != nil {
					return err
				}
			}
			if err := tx.PutMailbox(Mailbox{GenerationID: gid, IdentityPath: "/run/l/id", InboxPath: "/run/l/in", OutboxPath: "/run/l/out", State: StateIntent}, nil); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
}

// BenchmarkRecoveryScan measures the recovery scan (decode and verify every
// row) of a store holding 1,000 generations.
func BenchmarkRecoveryScan(b *testing.B) {
	s := openTestStore(b, b.TempDir())
	fillStore(b, s, 1000)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var c Contents
		if err := s.View(func(tx *Tx) error { var e error; c, e = tx.Scan(); return e }); err != nil {
			b.Fatal(err)
		}
		if len(c.Generations) != 1000 {
			b.Fatalf("%d generations", len(c.Generations))
		}
	}
}

// BenchmarkOpenAndRecoveryScan adds opening the store (header check, the
// page check in a child process, metadata gate) to the scan.
func BenchmarkOpenAndRecoveryScan(b *testing.B) {
	root := b.TempDir()
	s := openTestStore(b, root)
	fillStore(b, s, 1000)
	s.Close()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s, err := Open(root, testDomain, Options{Boot: &testBoot})
		if err != nil {
			b.Fatal(err)
		}
		if err := s.View(func(tx *Tx) error { _, e := tx.Scan(); return e }); err != nil {
			b.Fatal(err)
		}
		s.Close()
	}
}
