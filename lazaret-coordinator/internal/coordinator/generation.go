package coordinator

import (
	"crypto/sha256"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"

	"lazaret.dev/pkg/anchor"
	"lazaret.dev/pkg/catalog"
	"lazaret.dev/pkg/config"
	"lazaret.dev/pkg/control"
	"lazaret.dev/pkg/domainstore"
	"lazaret.dev/pkg/escalation"
	"lazaret.dev/pkg/hostid"
	"lazaret.dev/pkg/ids"
	"lazaret.dev/pkg/image/idmap"
	"lazaret.dev/pkg/image/prepare"
	imgstore "lazaret.dev/pkg/image/store"
	"lazaret.dev/pkg/protocol"
	"lazaret.dev/pkg/store"
)

// helpers are the absolute paths of the programs a generation runs.
type helpers struct {
	Anchor, Supervisor, Guest, Runsc string
	Platform                         string
}

// generation is one run of a Domain: its identities, its records and what
// it acquired.
type generation struct {
	log   *slog.Logger
	cfg   *config.ResolvedDomainConfiguration
	store *domainstore.Store
	help  helpers

	domain      ids.DomainID
	id          ids.GenerationID
	coordinator ids.CoordinatorID
	sandboxID   ids.SandboxID
	sidecarID   ids.SidecarID
	// escalationTimeouts bound host escalation requests (timeouts.go).
	escalationTimeouts escalation.Timeouts
	fingerprint        ids.Digest
	ident              protocol.GenerationIdentity

	// self is the HC's own pidfs identity (the direct edges it records);
	// selfPidfd keeps the descriptor it was read from.
	self      hostid.PidfsProcessIdentityV1
	selfPidfd int

	runtimeRoot string
	paths       control.Paths
	dir         string // <domain dir>/gen-<generation hex>
	idMap       idmap.Map

	mu           sync.Mutex
	participants map[domainstore.Role]domainstore.Participant
	done         []Step

	images   *imgstore.Store
	preparer *prepare.Preparer
	artifact catalog.PreparedArtifact
	leased   bool
	imageCfg imageConfig

	anchor   *anchor.Anchor
	released *anchor.ReleaseEvidence

	trust   *trustAnchor
	view    workspaceView
	network networkView
	sandbox *sandbox

	staged *control.Staged
	pub    *control.Publication

	// trace records the protocol events when tracing is on (tracer.go).
	trace *tracer
}

// Generation directory layout (docs/COORDINATOR.md).
func (g *generation) path(name string) string { return filepath.Join(g.dir, name) }

func (g *generation) rootfsDir() string  { return g.path("rootfs") }
func (g *generation) runscRoot() string  { return g.path("runsc") }
func (g *generation) bundleDir() string  { return g.path("bundle") }
func (g *generation) controlDir() string { return g.path("control") }
func (g *generation) etcDir() string     { return g.path("etc") }
func (g *generation) sessionDir() string { return g.path("sessions") }

// containerID is the runsc container ID of the generation's sandbox.
func (g *generation) containerID() string { return "lazaret-" + g.id.String() }

// put writes one participant record after the store's transition check
// and keeps it as the current record.
func (g *generation) put(p domainstore.Participant, proof *store.AbsenceProof) error {
	if err := g.store.Update(func(tx *domainstore.Tx) error { return tx.PutParticipant(p, proof) }); err != nil {
		return fmt.Errorf("recording the %v participant as %v: %w", p.Role, p.State, err)
	}
	g.mu.Lock()
	g.participants[p.Role] = p
	g.mu.Unlock()
	g.log.Info("participant recorded", "role", p.Role.String(), "state", p.State.String())
	return nil
}

// current returns the recorded participant of role, and whether one exists.
func (g *generation) current(role domainstore.Role) (domainstore.Participant, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	p, ok := g.participants[role]
	return p, ok
}

// intent records a bare Intent for role: recorded before anything of it is
// acquired.
func (g *generation) intent(role domainstore.Role) error {
	return g.put(domainstore.Participant{GenerationID: g.id, Role: role, State: domainstore.StateIntent}, nil)
}

// update records the current participant of role changed by fn, in state.
func (g *generation) update(role domainstore.Role, state domainstore.ParticipantState, fn func(o *domainstore.ParticipantOwnership)) error {
	p, ok := g.current(role)
	if !ok {
		return fmt.Errorf("the %v participant was never recorded", role)
	}
	o := cloneOwnership(role, p.Ownership)
	fn(o)
	p.Ownership = o
	p.State = state
	return g.put(p, nil)
}

// releaseIntent moves role to ReleaseIntent, keeping all evidence; a bare
// Intent has nothing to release and stays as it is until clean.
func (g *generation) releaseIntent(role domainstore.Role, fn func(o *domainstore.ParticipantOwnership)) error {
	p, ok := g.current(role)
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
	return g.put(p, nil)
}

// clean records role Clean with proof.
func (g *generation) clean(role domainstore.Role, method string) error {
	p, ok := g.current(role)
	if !ok || p.State == domainstore.StateClean {
		return nil
	}
	p.State = domainstore.StateClean
	p.Ownership = domainstore.EmptyOwnership(role)
	return g.put(p, store.ProvenAbsent(method))
}

// cloneOwnership returns a copy of o (the role's empty variant when nil)
// whose variant struct can be changed without touching the recorded one.
func cloneOwnership(role domainstore.Role, o *domainstore.ParticipantOwnership) *domainstore.ParticipantOwnership {
	if o == nil {
		o = &domainstore.ParticipantOwnership{}
		switch role {
		case domainstore.RolePreparedLower:
			o.PreparedLower = &domainstore.PreparedLowerOwnership{}
		case domainstore.RoleStateAnchor:
			o.StateAnchor = &domainstore.StateAnchorOwnership{}
		case domainstore.RoleGitRouting:
			o.GitRouting = &domainstore.GitRoutingOwnership{}
		case domainstore.RoleNetwork:
			o.Network = &domainstore.NetworkOwnership{}
		case domainstore.RoleHelper:
			o.Helper = &domainstore.HelperOwnership{}
		case domainstore.RoleSandbox:
			o.Sandbox = &domainstore.SandboxOwnership{}
		case domainstore.RolePublication:
			o.Publication = &domainstore.PublicationOwnership{}
		}
		return o
	}
	c := *o
	switch {
	case o.PreparedLower != nil:
		v := *o.PreparedLower
		c.PreparedLower = &v
	case o.StateAnchor != nil:
		v := *o.StateAnchor
		c.StateAnchor = &v
	case o.GitRouting != nil:
		v := *o.GitRouting
		c.GitRouting = &v
	case o.Network != nil:
		v := *o.Network
		c.Network = &v
	case o.Helper != nil:
		v := *o.Helper
		c.Helper = &v
	case o.Sandbox != nil:
		v := *o.Sandbox
		c.Sandbox = &v
	case o.Publication != nil:
		v := *o.Publication
		c.Publication = &v
	}
	return &c
}

// setPhase records the generation's durable decision.
func (g *generation) setPhase(phase domainstore.DomainPhase) error {
	err := g.store.Update(func(tx *domainstore.Tx) error {
		rec, err := tx.Generation(g.id)
		if err != nil {
			return err
		}
		rec.DurableDecision = phase
		return tx.PutGeneration(rec)
	})
	if err != nil {
		return fmt.Errorf("recording generation phase %v: %w", phase, err)
	}
	g.log.Info("generation phase", "phase", phase.String())
	return nil
}

// ptr returns a pointer to a copy of v.
func ptr[T any](v T) *T { return &v }

// anchorDigest is the session_anchor_id of a session anchor public key.
func anchorDigest(k protocol.PublicKey) ids.Digest { return ids.Digest(sha256.Sum256(k[:])) }

// mkdirPrivate creates dir with mode 0700 (its parent must exist).
func mkdirPrivate(dir string) error {
	if err := os.Mkdir(dir, 0o700); err != nil {
		return fmt.Errorf("creating directory %q: %w", dir, err)
	}
	return nil
}
