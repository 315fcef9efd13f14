package coordinator

import (
	"crypto/sha256"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"

	"lazaret.dev/pkg/config"
	"lazaret.dev/pkg/control"
	"lazaret.dev/pkg/domainstore"
	"lazaret.dev/pkg/escalation"
	"lazaret.dev/pkg/hostid"
	"lazaret.dev/pkg/ids"
	"lazaret.dev/pkg/image/idmap"
	"lazaret.dev/pkg/protocol"
	"lazaret.dev/pkg/store"
)

// helpers are the absolute paths of the programs a generation runs.
type helpers struct {
	Anchor, Supervisor, Guest, Runsc string
	Platform                         string
}

// scope is what every participant of one generation shares: its
// identities, its resolved configuration, its directory, its log and its
// records in the Domain Store. Serve fills it in before the first step
// and nothing changes its fields after that, so participants read them
// without a lock; the record cache (participants) has a lock of its own.
// Recovery fills in only the records, the identities and the paths: cfg
// and help are then empty.
type scope struct {
	log   *slog.Logger
	cfg   *config.ResolvedDomainConfiguration
	store *domainstore.Store
	help  helpers
	trace *tracer // nil-safe: records nothing unless tracing is on

	domain      ids.DomainID
	id          ids.GenerationID
	coordinator ids.CoordinatorID
	sandboxID   ids.SandboxID
	sidecarID   ids.SidecarID
	fingerprint ids.Digest
	ident       protocol.GenerationIdentity
	// broker is the credential broker's material (broker.go); nil when
	// the profile brokers nothing, and in recovery.
	broker *brokerMaterial
	// escalationTimeouts bound host escalation requests (timeouts.go).
	escalationTimeouts escalation.Timeouts

	// self is the HC's own pidfs identity, recorded as the direct edge of
	// what it supervises. The pidfd it was read from is Serve's, closed
	// when Serve returns.
	self hostid.PidfsProcessIdentityV1

	runtimeRoot string
	storageRoot string
	paths       control.Paths
	dir         string // <domain dir>/gen-<generation hex>
	idMap       idmap.Map

	mu           sync.Mutex
	participants map[domainstore.Role]domainstore.Participant
}

// Generation directory layout (docs/COORDINATOR.md).
func (s *scope) path(name string) string { return filepath.Join(s.dir, name) }

func (s *scope) rootfsDir() string  { return s.path("rootfs") }
func (s *scope) runscRoot() string  { return s.path("runsc") }
func (s *scope) bundleDir() string  { return s.path("bundle") }
func (s *scope) controlDir() string { return s.path("control") }
func (s *scope) etcDir() string     { return s.path("etc") }
func (s *scope) sessionDir() string { return s.path("sessions") }

// makeDirs creates the generation's directory and the directories below
// it that the steps fill in.
func (s *scope) makeDirs() error {
	if err := mkdirPrivate(s.dir); err != nil {
		return err
	}
	for _, d := range []string{s.runscRoot(), s.bundleDir(), s.controlDir(), s.etcDir(), s.sessionDir()} {
		if err := mkdirPrivate(d); err != nil {
			return err
		}
	}
	return nil
}

// containerID is the runsc container ID of the generation's sandbox.
func (s *scope) containerID() string { return "lazaret-" + s.id.String() }

// put writes one participant record after the store's transition check
// and keeps it as the current record.
func (s *scope) put(p domainstore.Participant, proof *store.AbsenceProof) error {
	if err := s.store.Update(func(tx *domainstore.Tx) error { return tx.PutParticipant(p, proof) }); err != nil {
		return fmt.Errorf("recording the %v participant as %v: %w", p.Role, p.State, err)
	}
	s.mu.Lock()
	s.participants[p.Role] = p
	s.mu.Unlock()
	s.log.Info("participant recorded", "role", p.Role.String(), "state", p.State.String())
	return nil
}

// current returns the recorded participant of role, and whether one exists.
func (s *scope) current(role domainstore.Role) (domainstore.Participant, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.participants[role]
	return p, ok
}

// intent records a bare Intent for role: recorded before anything of it is
// acquired.
func (s *scope) intent(role domainstore.Role) error {
	return s.put(domainstore.Participant{GenerationID: s.id, Role: role, State: domainstore.StateIntent}, nil)
}

// update records the current participant of role changed by fn, in state.
func (s *scope) update(role domainstore.Role, state domainstore.ParticipantState, fn func(o *domainstore.ParticipantOwnership)) error {
	p, ok := s.current(role)
	if !ok {
		return fmt.Errorf("the %v participant was never recorded", role)
	}
	o := cloneOwnership(role, p.Ownership)
	fn(o)
	p.Ownership = o
	p.State = state
	return s.put(p, nil)
}

// releaseIntent moves role to ReleaseIntent, keeping all evidence; a bare
// Intent has nothing to release and stays as it is until clean.
func (s *scope) releaseIntent(role domainstore.Role, fn func(o *domainstore.ParticipantOwnership)) error {
	p, ok := s.current(role)
	if !ok || p.State == domainstore.StateReleaseIntent || p.State == domainstore.StateClean {
		return nil
	}
	if p.Ownership == nil {
		return nil
	}
	o := cloneOwnership(role, p.Ownership)
	if fn != nil {
		fn(o)
	}
	p.Ownership = o
	p.State = domainstore.StateReleaseIntent
	return s.put(p, nil)
}

// clean records role Clean with proof.
func (s *scope) clean(role domainstore.Role, method string) error {
	p, ok := s.current(role)
	if !ok || p.State == domainstore.StateClean {
		return nil
	}
	p.State = domainstore.StateClean
	p.Ownership = domainstore.EmptyOwnership(role)
	return s.put(p, store.ProvenAbsent(method))
}

// cloneOwnership returns a copy of o (the role's empty variant when nil)
// whose variant struct can be changed without touching the recorded one.
func cloneOwnership(role domainstore.Role, o *domainstore.ParticipantOwnership) *domainstore.ParticipantOwnership {
	if o == nil {
		return domainstore.EmptyOwnership(role)
	}
	return o.Clone()
}

// setPhase records the generation's durable decision.
func (s *scope) setPhase(phase domainstore.DomainPhase) error {
	err := s.store.Update(func(tx *domainstore.Tx) error {
		rec, err := tx.Generation(s.id)
		if err != nil {
			return err
		}
		rec.DurableDecision = phase
		return tx.PutGeneration(rec)
	})
	if err != nil {
		return fmt.Errorf("recording generation phase %v: %w", phase, err)
	}
	s.log.Info("generation phase", "phase", phase.String())
	return nil
}

// phase reads the generation's durable decision.
func (s *scope) phase() (domainstore.DomainPhase, error) {
	var p domainstore.DomainPhase
	err := s.store.View(func(tx *domainstore.Tx) error {
		rec, err := tx.Generation(s.id)
		p = rec.DurableDecision
		return err
	})
	return p, err
}

// closeSessions records every listed session in phase.
func (s *scope) closeSessions(list []ids.SessionID, phase domainstore.SessionPhase) error {
	return s.store.Update(func(tx *domainstore.Tx) error {
		for _, id := range list {
			rec, err := tx.Session(s.id, id)
			if err != nil {
				return err
			}
			if rec.SessionPhase == domainstore.SessionClosed || rec.SessionPhase == domainstore.SessionFailed {
				continue
			}
			rec.SessionPhase = phase
			if err := tx.PutSession(rec); err != nil {
				return err
			}
		}
		return nil
	})
}

// finish deletes the ended generation's records and its directory.
func (s *scope) finish() error {
	if err := s.store.Update(func(tx *domainstore.Tx) error { return tx.DeleteGeneration(s.id) }); err != nil {
		return fmt.Errorf("deleting the ended generation's records: %w", err)
	}
	if err := os.RemoveAll(s.dir); err != nil {
		return fmt.Errorf("removing the generation directory %q: %w", s.dir, err)
	}
	s.log.Info("generation ended")
	return nil
}

// ptr returns a pointer to a copy of v.
func ptr[T any](v T) *T { return &v }

// committed is the ownership of a process whose identity is recorded and
// that may run.
func committed(id hostid.PidfsProcessIdentityV1) hostid.PersistedHostProcessOwnership {
	return hostid.CommittedOwnership(id)
}

// anchorDigest is the session_anchor_id of a session anchor public key.
func anchorDigest(k protocol.PublicKey) ids.Digest { return ids.Digest(sha256.Sum256(k[:])) }

// mkdirPrivate creates dir with mode 0700 (its parent must exist).
func mkdirPrivate(dir string) error {
	if err := os.Mkdir(dir, 0o700); err != nil {
		return fmt.Errorf("creating directory %q: %w", dir, err)
	}
	return nil
}
