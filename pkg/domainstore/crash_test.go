package domainstore

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"lazaret.dev/pkg/ids"
	"lazaret.dev/pkg/store"
)

// The crash test re-executes this test binary as a writer that runs
// generations through their lifecycles (and recovers whatever an earlier,
// killed writer left behind) until it is SIGKILLed at a random moment.
// After every kill the store is reopened: it must pass the page check and
// every row must satisfy the record invariants.
const crashEnv = "LAZARET_DOMAINSTORE_CRASH_WRITER"

func TestCrashWriterChild(t *testing.T) {
	root := os.Getenv(crashEnv)
	if root == "" {
		t.Skip("runs only as the crash test's writer process")
	}
	seed, _ := strconv.ParseUint(os.Getenv(crashEnv+"_SEED"), 10, 64)
	s, err := Open(root, testDomain, Options{Boot: &testBoot})
	if err != nil {
		fmt.Fprintln(os.Stderr, "writer open:", err)
		os.Exit(3)
	}
	w := &writer{s: s, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
	for {
		if err := w.recoverAll(); err != nil {
			fmt.Fprintln(os.Stderr, "writer recovery:", err)
			os.Exit(4)
		}
		if err := w.lifecycle(); err != nil {
			fmt.Fprintln(os.Stderr, "writer lifecycle:", err)
			os.Exit(5)
		}
	}
}

type writer struct {
	s   *Store
	rng *rand.Rand
}

func (w *writer) put(f func(tx *Tx) error) error { return w.s.Update(f) }

// lifecycle starts a generation, records and acquires every participant, a
// session with a terminal and the mailbox, in many small transactions, then
// tears it all down and deletes the generation. Along the way it attempts
// illegal writes, which must be refused.
func (w *writer) lifecycle() error {
	gid := ids.GenerationID(ids.New())
	g := genWith(gid, PhaseStarting)
	if err := w.put(func(tx *Tx) error { return tx.PutGeneration(g) }); err != nil {
		return err
	}
	with := func(p *Participant) Participant {
		q := *p
		q.GenerationID = gid
		if q.Ownership != nil && q.Ownership.Network != nil && q.Ownership.Network.ReadinessEvidence != nil {
			q.Ownership = clone(q.Ownership)
			e := NewReadinessEvidence(testDomain, gid, testSidecar, *q.Ownership.Network.ReadinessFingerprint)
			q.Ownership.Network.ReadinessEvidence = &e
		}
		return q
	}
	for _, role := range Roles() {
		for _, p := range []*Participant{part(role, StateIntent, nil), part(role, StateIntent, staging(role)), part(role, role.ActiveState(), full(role))} {
			if err := w.put(func(tx *Tx) error { return tx.PutParticipant(with(p), nil) }); err != nil {
				return err
			}
		}
		if w.rng.IntN(4) == 0 {
			err := w.put(func(tx *Tx) error {
				return tx.PutParticipant(with(part(role, StateClean, EmptyOwnership(role))), proof)
			})
			if !errors.Is(err, store.ErrIllegalTransition) {
				return fmt.Errorf("illegal Clean write: %v", err)
			}
		}
	}
	sid := ids.SessionID(ids.New())
	sess := Session{GenerationID: gid, SessionID: sid, CLIID: ids.CLIID{1}, SessionAnchorID: ids.Digest{2}, SessionPhase: SessionRegistering}
	tm := func(st TerminalState, f func(*SessionTerminal)) SessionTerminal {
		x := *term(st, f)
		x.GenerationID, x.SessionID = gid, sid
		return x
	}
	mb := Mailbox{GenerationID: gid, IdentityPath: "/run/l/identity", InboxPath: "/run/l/in", OutboxPath: "/run/l/out", State: StateIntent}
	steps := []func(tx *Tx) error{
		func(tx *Tx) error { return tx.PutMailbox(mb, nil) },
		func(tx *Tx) error { m := mb; m.State = StateCommitted; return tx.PutMailbox(m, nil) },
		func(tx *Tx) error { return tx.PutGeneration(genWith(gid, PhaseReady)) },
		func(tx *Tx) error { return tx.PutSession(sess) },
		func(tx *Tx) error { s := sess; s.SessionPhase = SessionAttached; return tx.PutSession(s) },
		func(tx *Tx) error { return tx.PutTerminal(tm(TerminalIntent, nil), nil) },
		func(tx *Tx) error {
			return tx.PutTerminal(tm(TerminalIntent, func(t *SessionTerminal) { running(t); t.ExecClient = staged(10) }), nil)
		},
		func(tx *Tx) error { return tx.PutTerminal(tm(TerminalRunning, running), nil) },
	}
	for _, st := range steps {
		if err := w.put(st); err != nil {
			return err
		}
	}
	if w.rng.IntN(2) == 0 {
		return nil // leave it live; the next writer recovers it
	}
	if err := w.put(func(tx *Tx) error { return tx.PutGeneration(genWith(gid, PhaseStopping)) }); err != nil {
		return err
	}
	return w.recoverAll()
}

// recoverAll releases every generation that is not Absent, the way a
// bootstrap recovery would, in several transactions, and deletes it.
func (w *writer) recoverAll() error {
	var c Contents
	if err := w.s.View(func(tx *Tx) error { var e error; c, e = tx.Scan(); return e }); err != nil {
		return err
	}
	for _, g := range c.Generations {
		gid := g.Generation.GenerationID
		if g.Generation.DurableDecision != PhaseAbsent && g.Generation.DurableDecision != PhaseRecovering {
			gen := g.Generation
			gen.DurableDecision = PhaseFailed
			if g.Generation.DurableDecision != PhaseFailed {
				if err := w.put(func(tx *Tx) error { return tx.PutGeneration(gen) }); err != nil {
					return err
				}
			}
			gen.DurableDecision = PhaseRecovering
			if err := w.put(func(tx *Tx) error { return tx.PutGeneration(gen) }); err != nil {
				return err
			}
		}
		for _, t := range g.Terminals {
			if err := w.releaseTerminal(t); err != nil {
				return err
			}
		}
		for _, sess := range g.Sessions {
			if sess.SessionPhase != SessionClosed && sess.SessionPhase != SessionFailed {
				s := sess
				s.SessionPhase = SessionFailed
				if err := w.put(func(tx *Tx) error { return tx.PutSession(s) }); err != nil {
					return err
				}
			}
		}
		if m := g.Mailbox; m != nil && m.State != StateClean {
			if m.State == StateCommitted {
				r := *m
				r.State = StateReleaseIntent
				if err := w.put(func(tx *Tx) error { return tx.PutMailbox(r, nil) }); err != nil {
					return err
				}
			}
			c := *m
			c.State = StateClean
			if err := w.put(func(tx *Tx) error { return tx.PutMailbox(c, proof) }); err != nil {
				return err
			}
		}
		for i := len(g.Participants) - 1; i >= 0; i-- {
			if err := w.releaseParticipant(g.Participants[i]); err != nil {
				return err
			}
		}
		if g.Generation.DurableDecision != PhaseAbsent {
			gen := g.Generation
			gen.DurableDecision = PhaseAbsent
			if err := w.put(func(tx *Tx) error { return tx.PutGeneration(gen) }); err != nil {
				return err
			}
		}
		if err := w.put(func(tx *Tx) error { return tx.DeleteGeneration(gid) }); err != nil {
			return err
		}
	}
	return nil
}

func (w *writer) releaseParticipant(p Participant) error {
	if p.State == StateClean {
		return nil
	}
	if p.Ownership != nil && p.State != StateReleaseIntent {
		r := p
		r.State = StateReleaseIntent
		r.Ownership = clone(p.Ownership)
		if pl := r.Ownership.PreparedLower; pl != nil && pl.LeaseState != nil {
			pl.LeaseState = ptr(LeaseReleaseIntent)
		}
		if err := w.put(func(tx *Tx) error { return tx.PutParticipant(r, nil) }); err != nil {
			return err
		}
		// A second release write that changes evidence must be refused.
		bad := r
		bad.Ownership = EmptyOwnership(p.Role)
		if err := w.put(func(tx *Tx) error { return tx.PutParticipant(bad, nil) }); !errors.Is(err, store.ErrEvidenceChanged) {
			return fmt.Errorf("evidence-clearing ReleaseIntent write: %v", err)
		}
	}
	c := Participant{GenerationID: p.GenerationID, Role: p.Role, State: StateClean, Ownership: EmptyOwnership(p.Role)}
	return w.put(func(tx *Tx) error { return tx.PutParticipant(c, proof) })
}

func (w *writer) releaseTerminal(t SessionTerminal) error {
	if t.State == TerminalClean {
		return nil
	}
	if !(t.State == TerminalIntent && bareTerminal(&t)) && t.State != TerminalReleaseIntent {
		r := t
		r.State = TerminalReleaseIntent
		if err := w.put(func(tx *Tx) error { return tx.PutTerminal(r, nil) }); err != nil {
			return err
		}
	}
	c := SessionTerminal{GenerationID: t.GenerationID, SessionID: t.SessionID, State: TerminalClean}
	return w.put(func(tx *Tx) error { return tx.PutTerminal(c, proof) })
}

func TestCrashConsistency(t *testing.T) {
	iterations, budget := 200, 60*time.Second
	if testing.Short() {
		iterations, budget = 25, 15*time.Second
	}
	root := t.TempDir()
	s := openTestStore(t, root)
	s.Close()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	deadline := time.Now().Add(budget)
	done, wrote := 0, 0
	for ; done < iterations && time.Now().Before(deadline); done++ {
		cmd := exec.Command(exe, "-test.run=^TestCrashWriterChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), crashEnv+"="+root, crashEnv+"_SEED="+strconv.FormatUint(rng.Uint64(), 10))
		var stderr limited
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(5+rng.IntN(120)) * time.Millisecond)
		cmd.Process.Signal(syscall.SIGKILL)
		werr := cmd.Wait()
		var ee *exec.ExitError
		if !errors.As(werr, &ee) || ee.ExitCode() != -1 {
			t.Fatalf("iteration %d: writer ended by itself (%v): %s", done, werr, stderr.String())
		}
		s, err := Open(root, testDomain, Options{Boot: &testBoot})
		if err != nil {
			t.Fatalf("iteration %d: reopening after SIGKILL: %v", done, err)
		}
		var c Contents
		err = s.View(func(tx *Tx) error { var e error; c, e = tx.Scan(); return e })
		s.Close()
		if err != nil {
			t.Fatalf("iteration %d: stored rows violate the invariants: %v", done, err)
		}
		if len(c.Generations) > 0 {
			wrote++
		}
	}
	t.Logf("%d kills, %d left at least one generation behind", done, wrote)
	if done < 10 {
		t.Fatalf("only %d iterations within %v", done, budget)
	}
}

type limited struct{ b []byte }

func (l *limited) Write(p []byte) (int, error) {
	if len(l.b) < 8192 {
		l.b = append(l.b, p...)
	}
	return len(p), nil
}

func (l *limited) String() string { return string(l.b) }
