package domainstore

import (
	"fmt"
	"reflect"

	"lazaret.dev/pkg/hostid"
	"lazaret.dev/pkg/store"
)

// Env is what a transition check needs besides the two records.
type Env struct {
	// Boot is the current boot ID. Every process identity written now
	// (newly staged or committed) and every identity an active state relies
	// on must carry it: only a current pidfs identity is authority.
	Boot hostid.BootID
	// Proof is required by, and only by, transitions to Clean.
	Proof *store.AbsenceProof
}

func refuse(class error, record, key, field, format string, args ...any) error {
	return &store.RecordError{Record: record, Key: key, Field: field, Class: class, Err: fmt.Errorf(format, args...)}
}

// CheckDomain guards the Domain record: valid, and immutable once written.
func CheckDomain(prev, next *Domain) error {
	if err := next.Validate(); err != nil {
		return err
	}
	if prev != nil && *prev != *next {
		return refuse(store.ErrEvidenceChanged, "domain", "domain "+next.DomainID.String(), "", "the Domain record is immutable")
	}
	return nil
}

// domainPhaseEdges are the per-generation Domain phase steps of the
// protocol model (Lazaret.tla): StartNewDomain creates a generation in
// Starting; PublishDomain, BeginTeardown, FinishTeardown, FailDomain (and the
// hard-loss actions), BeginRecovery and FinishRecovery move it. A new run
// after Absent is a new generation, so Absent is final here.
var domainPhaseEdges = map[DomainPhase][]DomainPhase{
	PhaseStarting:   {PhaseReady, PhaseFailed},
	PhaseReady:      {PhaseStopping, PhaseFailed},
	PhaseStopping:   {PhaseAbsent, PhaseFailed},
	PhaseFailed:     {PhaseRecovering},
	PhaseRecovering: {PhaseAbsent},
}

// sessionPhaseEdges are the session_phase steps of the protocol model.
var sessionPhaseEdges = map[SessionPhase][]SessionPhase{
	SessionNew:           {SessionWaiting, SessionRegistering, SessionFailed},
	SessionWaiting:       {SessionRegistering, SessionClosed, SessionFailed},
	SessionRegistering:   {SessionAttached, SessionClosed, SessionFailed},
	SessionAttached:      {SessionPrompting, SessionHostExecuting, SessionClosed, SessionFailed},
	SessionPrompting:     {SessionAttached, SessionHostExecuting, SessionClosed, SessionFailed},
	SessionHostExecuting: {SessionAttached, SessionClosed, SessionFailed},
}

// reachable reports whether to is reachable from from in zero or more
// steps. The store records model values without redefining the model, so a
// durable write may skip phases the writer never persists, but it can
// never record a value the model cannot reach from the recorded one.
func reachable[T comparable](edges map[T][]T, from, to T) bool {
	seen := map[T]bool{from: true}
	queue := []T{from}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		if cur == to {
			return true
		}
		for _, n := range edges[cur] {
			if !seen[n] {
				seen[n] = true
				queue = append(queue, n)
			}
		}
	}
	return false
}

// CheckGeneration guards Generation writes: created in Starting; every
// identity field immutable; durable_decision moves only to a value the
// protocol model can reach from the recorded one.
func CheckGeneration(prev, next *Generation) error {
	if err := next.Validate(); err != nil {
		return err
	}
	const rec = "generation"
	key := generationKey(next.GenerationID)
	if prev == nil {
		if next.DurableDecision != PhaseStarting {
			return refuse(store.ErrIllegalTransition, rec, key, "durable_decision", "a generation is created in Starting, not %v", next.DurableDecision)
		}
		return nil
	}
	a, b := *prev, *next
	a.DurableDecision, b.DurableDecision = 0, 0
	if a != b {
		return refuse(store.ErrEvidenceChanged, rec, key, "", "identity fields of a generation are immutable")
	}
	if !reachable(domainPhaseEdges, prev.DurableDecision, next.DurableDecision) {
		return refuse(store.ErrIllegalTransition, rec, key, "durable_decision", "%v cannot follow %v", next.DurableDecision, prev.DurableDecision)
	}
	return nil
}

// CheckSession guards Session writes: identity fields immutable;
// session_phase moves only to a value the protocol model can reach.
func CheckSession(prev, next *Session) error {
	if err := next.Validate(); err != nil {
		return err
	}
	if prev == nil {
		return nil
	}
	const rec = "session"
	a, b := *prev, *next
	a.SessionPhase, b.SessionPhase = 0, 0
	if a != b {
		return refuse(store.ErrEvidenceChanged, rec, next.Key(), "", "identity fields of a session are immutable")
	}
	if !reachable(sessionPhaseEdges, prev.SessionPhase, next.SessionPhase) {
		return refuse(store.ErrIllegalTransition, rec, next.Key(), "session_phase", "%v cannot follow %v", next.SessionPhase, prev.SessionPhase)
	}
	return nil
}

// mailboxEdges are the Mailbox state steps: recorded in Intent before its
// directories exist, Committed once they do, ReleaseIntent before removal,
// Clean after absence is proven. Its paths are planned values, not
// acquired evidence, so an Intent mailbox may also become Clean.
var mailboxEdges = map[ParticipantState][]ParticipantState{
	StateIntent:        {StateCommitted, StateReleaseIntent, StateClean},
	StateCommitted:     {StateReleaseIntent},
	StateReleaseIntent: {StateClean},
}

// CheckMailbox guards Mailbox writes: created in Intent, paths immutable,
// state only along mailboxEdges, Clean only with an absence proof.
func CheckMailbox(prev, next *Mailbox, env Env) error {
	if err := next.Validate(); err != nil {
		return err
	}
	const rec = "mailbox"
	key := generationKey(next.GenerationID)
	if prev == nil {
		if next.State != StateIntent {
			return refuse(store.ErrIllegalTransition, rec, key, "state", "a mailbox is created in Intent, not %v", next.State)
		}
		return nil
	}
	a, b := *prev, *next
	a.State, b.State = 0, 0
	if a != b {
		return refuse(store.ErrEvidenceChanged, rec, key, "", "mailbox paths are immutable")
	}
	if prev.State == next.State {
		return nil
	}
	if !contains(mailboxEdges[prev.State], next.State) {
		return refuse(store.ErrIllegalTransition, rec, key, "state", "%v cannot follow %v", next.State, prev.State)
	}
	if next.State == StateClean && !env.Proof.Valid() {
		return refuse(store.ErrAbsenceProofRequired, rec, key, "state", "%v to Clean", prev.State)
	}
	return nil
}

func contains[T comparable](s []T, v T) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// CheckParticipant guards Participant writes. prev is nil when the
// participant is being created. The rules, from the schema's Participant
// ownership section:
//
//   - A participant is created in Intent. Ownership None is the single
//     encoding of a bare Intent and never returns once a snapshot exists.
//   - Intent admits a non-empty partial snapshot of the role's variant.
//     Acquisition is monotonic: optional fields only absent to present,
//     process slots only Unassigned to Staged to the identical Committed.
//     A direct existing-process slot (Network RS, Helper RS, Sandbox HC)
//     may enter Committed without staging only in the write that creates
//     the snapshot. Recorded evidence is never replaced or cleared.
//   - The one active state of the role (LeaseHeld, Prepared or Committed)
//     is entered only from a non-bare Intent and requires every physical
//     field of the role and current Committed ownership in every slot; an
//     active record is immutable.
//   - ReleaseIntent is entered from a non-bare Intent or the active state
//     and preserves all evidence. PreparedLower alone changes lease_state
//     to ReleaseIntent there and may add released_state_anchor in that same
//     write; within ReleaseIntent nothing changes.
//   - Clean is entered from ReleaseIntent or a bare Intent, only with an
//     absence proof, and carries the explicit empty snapshot.
//   - PreparedLower's lease_state moves absent, Intent, LeaseHeld,
//     ReleaseIntent; LeaseHeld is never entered from an absent lease phase.
func CheckParticipant(prev, next *Participant, env Env) error {
	if err := next.Validate(); err != nil {
		return err
	}
	const rec = "participant"
	key := next.Key()
	if prev != nil && (prev.GenerationID != next.GenerationID || prev.Role != next.Role) {
		return refuse(store.ErrReferenceMismatch, rec, key, "", "record for %s cannot replace %s", next.Key(), prev.Key())
	}
	var nextSnap, prevSnap *snapshotView
	if next.Ownership != nil {
		nextSnap, _ = next.Ownership.snapshot() // validated above
	}
	prevState := StateIntent
	if prev != nil {
		prevState = prev.State
		if prev.Ownership != nil {
			var err error
			if prevSnap, err = prev.Ownership.snapshot(); err != nil {
				return refuse(store.ErrInvalidRecord, rec, key, "ownership", "recorded ownership: %v", err)
			}
		}
	}
	if prev == nil && next.State != StateIntent {
		return refuse(store.ErrIllegalTransition, rec, key, "state", "a participant is created in Intent, not %v", next.State)
	}
	if prevSnap != nil && nextSnap == nil {
		return refuse(store.ErrEvidenceChanged, rec, key, "ownership", "ownership cannot return to None once a snapshot exists")
	}
	bare := prevSnap == nil && prevState == StateIntent
	if prev != nil && reflect.DeepEqual(prev, next) {
		if next.State.IsActive() {
			return requireActive(next, nextSnap, env)
		}
		return nil
	}

	switch {
	case next.State == StateIntent:
		if prevState != StateIntent {
			return refuse(store.ErrIllegalTransition, rec, key, "state", "%v cannot return to Intent", prevState)
		}
		if nextSnap != nil && nextSnap.isEmpty() {
			return refuse(store.ErrInvalidRecord, rec, key, "ownership", "an Intent snapshot must be non-empty (a bare Intent has ownership None)")
		}
		return acquire(next, prevSnap, nextSnap, env)

	case next.State.IsActive():
		switch {
		case prevState == next.State:
			return refuse(store.ErrEvidenceChanged, rec, key, "ownership", "a %v participant is immutable", next.State)
		case prevState != StateIntent:
			return refuse(store.ErrIllegalTransition, rec, key, "state", "%v cannot follow %v", next.State, prevState)
		case bare:
			return refuse(store.ErrIllegalTransition, rec, key, "state", "a bare Intent cannot move directly to %v", next.State)
		}
		if err := acquire(next, prevSnap, nextSnap, env); err != nil {
			return err
		}
		return requireActive(next, nextSnap, env)

	case next.State == StateReleaseIntent:
		switch {
		case prevState == StateReleaseIntent:
			return refuse(store.ErrEvidenceChanged, rec, key, "ownership", "release evidence is immutable within ReleaseIntent")
		case prevState == StateClean:
			return refuse(store.ErrIllegalTransition, rec, key, "state", "ReleaseIntent cannot follow Clean")
		case bare, prevSnap == nil:
			return refuse(store.ErrIllegalTransition, rec, key, "state", "a bare Intent has nothing to release; it becomes Clean after absence proof")
		}
		return preserveForRelease(next, prevSnap, nextSnap)

	case next.State == StateClean:
		switch {
		case prevState == StateClean:
			return refuse(store.ErrEvidenceChanged, rec, key, "ownership", "a Clean participant is immutable")
		case prevState != StateReleaseIntent && !bare:
			return refuse(store.ErrIllegalTransition, rec, key, "state", "Clean follows only ReleaseIntent or a bare Intent, not %v", prevState)
		case !env.Proof.Valid():
			return refuse(store.ErrAbsenceProofRequired, rec, key, "state", "%v to Clean", prevState)
		case nextSnap == nil || !nextSnap.isEmpty():
			return refuse(store.ErrInvalidRecord, rec, key, "ownership", "Clean requires the explicit empty snapshot of the role: every physical field absent, every process slot Unassigned")
		}
		return nil
	}
	return refuse(store.ErrIllegalTransition, rec, key, "state", "%v cannot follow %v", next.State, prevState)
}

// acquire checks monotonic acquisition from prevSnap (nil: None) to
// nextSnap (nil only when still bare).
func acquire(next *Participant, prevSnap, nextSnap *snapshotView, env Env) error {
	const rec = "participant"
	key := next.Key()
	if nextSnap == nil {
		return nil
	}
	creating := prevSnap == nil
	for i, nf := range nextSnap.fields {
		var pf fieldView
		if !creating {
			pf = prevSnap.fields[i]
		}
		if nf.name == "released_state_anchor" && nf.present {
			return refuse(store.ErrIllegalTransition, rec, key, "ownership.released_state_anchor", "is added only with the move to ReleaseIntent")
		}
		if nf.name == "lease_state" {
			if err := leaseStep(rec, key, pf, nf); err != nil {
				return err
			}
			continue
		}
		if pf.present && (!nf.present || !reflect.DeepEqual(pf.value, nf.value)) {
			return refuse(store.ErrEvidenceChanged, rec, key, "ownership."+nf.name, "recorded %v cannot be replaced or cleared", pf.value)
		}
	}
	for i, ns := range nextSnap.slots {
		prevO := hostid.PersistedHostProcessOwnership{}
		if !creating {
			prevO = prevSnap.slots[i].o
		}
		if err := slotStep(rec, key, "ownership."+ns.name, prevO, ns.o, ns.slot.Direct() && creating, env); err != nil {
			return err
		}
	}
	return nil
}

// leaseStep checks PreparedLower's lease phase outside ReleaseIntent.
func leaseStep(rec, key string, pf, nf fieldView) error {
	field := "ownership.lease_state"
	if !nf.present {
		if pf.present {
			return refuse(store.ErrEvidenceChanged, rec, key, field, "recorded %v cannot be cleared", pf.value)
		}
		return nil
	}
	to := nf.value.(LeaseState)
	if to == LeaseReleaseIntent {
		return refuse(store.ErrIllegalTransition, rec, key, field, "the lease moves to ReleaseIntent only with the participant")
	}
	if !pf.present {
		if to != LeaseIntent {
			return refuse(store.ErrIllegalTransition, rec, key, field, "the catalog lease cannot be acquired from an absent lease phase; record Intent first")
		}
		return nil
	}
	from := pf.value.(LeaseState)
	if from == to || (from == LeaseIntent && to == LeaseHeld) {
		return nil
	}
	return refuse(store.ErrIllegalTransition, rec, key, field, "%v cannot follow %v", to, from)
}

// slotStep checks one process slot: the ownership step rules, and that any
// identity written now is from the current boot.
func slotStep(rec, key, field string, prev, next hostid.PersistedHostProcessOwnership, direct bool, env Env) error {
	if err := hostid.CheckOwnershipStep(prev, next, direct); err != nil {
		class := store.ErrEvidenceChanged
		if err == hostid.ErrCommitNotStaged {
			class = store.ErrIllegalTransition
		}
		return &store.RecordError{Record: rec, Key: key, Field: field, Class: class, Err: err}
	}
	if prev != next && next.Identity.Authority.BootID != env.Boot {
		return refuse(store.ErrInvalidRecord, rec, key, field, "identity is from boot %x, not the current boot %x", next.Identity.Authority.BootID[:], env.Boot[:])
	}
	return nil
}

// requireActive checks the serviceable role/state table.
func requireActive(p *Participant, s *snapshotView, env Env) error {
	const rec = "participant"
	key := p.Key()
	if s == nil {
		return refuse(store.ErrMissingEvidence, rec, key, "ownership", "%v %v requires a complete snapshot", p.Role, p.State)
	}
	for _, f := range s.fields {
		switch f.name {
		case "released_state_anchor":
			if f.present {
				return refuse(store.ErrInvalidRecord, rec, key, "ownership."+f.name, "is present only in ReleaseIntent")
			}
			continue
		case "lease_state":
			if !f.present || f.value.(LeaseState) != LeaseHeld {
				return refuse(store.ErrMissingEvidence, rec, key, "ownership.lease_state", "%v %v requires lease_state LeaseHeld", p.Role, p.State)
			}
			continue
		}
		if !f.present {
			return refuse(store.ErrMissingEvidence, rec, key, "ownership."+f.name, "%v %v requires it", p.Role, p.State)
		}
	}
	for _, sl := range s.slots {
		if !sl.o.IsCommitted() {
			return refuse(store.ErrMissingEvidence, rec, key, "ownership."+sl.name, "%v %v requires current Committed ownership, found %v", p.Role, p.State, sl.o.Phase)
		}
		if sl.o.Identity.Authority.BootID != env.Boot {
			return refuse(store.ErrMissingEvidence, rec, key, "ownership."+sl.name, "committed identity is from boot %x, not the current boot", sl.o.Identity.Authority.BootID[:])
		}
	}
	return nil
}

// preserveForRelease checks a move into ReleaseIntent from Intent or the
// active state: every field and slot unchanged, except PreparedLower's
// lease_state (a recorded phase becomes ReleaseIntent) and its
// released_state_anchor (may be added).
func preserveForRelease(next *Participant, prevSnap, nextSnap *snapshotView) error {
	const rec = "participant"
	key := next.Key()
	for i, nf := range nextSnap.fields {
		pf := prevSnap.fields[i]
		switch nf.name {
		case "lease_state":
			if !pf.present {
				if nf.present {
					return refuse(store.ErrIllegalTransition, rec, key, "ownership.lease_state", "no lease phase was recorded, so none can be released")
				}
				continue
			}
			if !nf.present || nf.value.(LeaseState) != LeaseReleaseIntent {
				return refuse(store.ErrIllegalTransition, rec, key, "ownership.lease_state", "the recorded lease phase %v must become ReleaseIntent with the participant", pf.value)
			}
			continue
		case "released_state_anchor":
			continue // absent before (outside ReleaseIntent); may be added now
		}
		if pf.present != nf.present || (pf.present && !reflect.DeepEqual(pf.value, nf.value)) {
			return refuse(store.ErrEvidenceChanged, rec, key, "ownership."+nf.name, "ReleaseIntent preserves all evidence")
		}
	}
	for i, ns := range nextSnap.slots {
		if prevSnap.slots[i].o != ns.o {
			return refuse(store.ErrEvidenceChanged, rec, key, "ownership."+ns.name, "ReleaseIntent preserves all evidence, including %v", prevSnap.slots[i].o)
		}
	}
	return nil
}

// bareTerminal reports whether a terminal has acquired nothing.
// Bare reports whether t records nothing acquired: such an Intent becomes
// Clean directly, with an absence proof.
func (t *SessionTerminal) Bare() bool { return bareTerminal(t) }

func bareTerminal(t *SessionTerminal) bool {
	return t.ContainerID == nil && t.PtyMaster == nil && t.GuestProcess == nil &&
		t.HostCoordinator.IsUnassigned() && t.ExecClient.IsUnassigned()
}

// CheckSessionTerminal guards SessionTerminal writes: created in Intent;
// Intent acquires container_id, pty_master and guest_process monotonically
// and its two process slots through the ownership union (the Host
// Coordinator is a direct edge, the exec client must be staged); Running
// requires all three identities and current Committed HC and exec client
// and is immutable; ReleaseIntent (from a non-bare Intent or Running)
// retains everything and is immutable; Clean (from ReleaseIntent or a bare
// Intent, with an absence proof) has everything absent and both slots
// Unassigned.
func CheckSessionTerminal(prev, next *SessionTerminal, env Env) error {
	if err := next.Validate(); err != nil {
		return err
	}
	const rec = "session terminal"
	key := next.Key()
	if prev == nil {
		if next.State != TerminalIntent {
			return refuse(store.ErrIllegalTransition, rec, key, "state", "a session terminal is created in Intent, not %v", next.State)
		}
		prev = &SessionTerminal{GenerationID: next.GenerationID, SessionID: next.SessionID, State: TerminalIntent}
	} else if prev.GenerationID != next.GenerationID || prev.SessionID != next.SessionID {
		return refuse(store.ErrReferenceMismatch, rec, key, "", "record for %s cannot replace %s", next.Key(), prev.Key())
	}
	if reflect.DeepEqual(prev, next) {
		if next.State == TerminalRunning {
			return requireRunning(next, env)
		}
		return nil
	}
	bare := prev.State == TerminalIntent && bareTerminal(prev)
	switch next.State {
	case TerminalIntent, TerminalRunning:
		if prev.State == TerminalRunning && next.State == TerminalRunning {
			return refuse(store.ErrEvidenceChanged, rec, key, "", "a Running terminal is immutable")
		}
		if prev.State != TerminalIntent {
			return refuse(store.ErrIllegalTransition, rec, key, "state", "%v cannot follow %v", next.State, prev.State)
		}
		if err := acquireTerminal(prev, next, env); err != nil {
			return err
		}
		if next.State == TerminalRunning {
			return requireRunning(next, env)
		}
		return nil
	case TerminalReleaseIntent:
		switch {
		case prev.State == TerminalReleaseIntent:
			return refuse(store.ErrEvidenceChanged, rec, key, "", "release evidence is immutable within ReleaseIntent")
		case prev.State == TerminalClean:
			return refuse(store.ErrIllegalTransition, rec, key, "state", "ReleaseIntent cannot follow Clean")
		case bare:
			return refuse(store.ErrIllegalTransition, rec, key, "state", "a bare Intent has nothing to release; it becomes Clean after absence proof")
		}
		a, b := *prev, *next
		a.State, b.State = 0, 0
		if !reflect.DeepEqual(a, b) {
			return refuse(store.ErrEvidenceChanged, rec, key, "", "ReleaseIntent retains all recorded evidence")
		}
		return nil
	case TerminalClean:
		switch {
		case prev.State != TerminalReleaseIntent && !bare:
			return refuse(store.ErrIllegalTransition, rec, key, "state", "Clean follows only ReleaseIntent or a bare Intent, not %v", prev.State)
		case !env.Proof.Valid():
			return refuse(store.ErrAbsenceProofRequired, rec, key, "state", "%v to Clean", prev.State)
		case !bareTerminal(next):
			return refuse(store.ErrInvalidRecord, rec, key, "", "Clean requires container_id, pty_master and guest_process absent and both process slots Unassigned")
		}
		return nil
	}
	return refuse(store.ErrIllegalTransition, rec, key, "state", "%v cannot follow %v", next.State, prev.State)
}

func acquireTerminal(prev, next *SessionTerminal, env Env) error {
	const rec = "session terminal"
	key := next.Key()
	opt := []struct {
		name       string
		pOK, nOK   bool
		pVal, nVal any
	}{
		{"container_id", prev.ContainerID != nil, next.ContainerID != nil, deref(prev.ContainerID), deref(next.ContainerID)},
		{"pty_master", prev.PtyMaster != nil, next.PtyMaster != nil, deref(prev.PtyMaster), deref(next.PtyMaster)},
		{"guest_process", prev.GuestProcess != nil, next.GuestProcess != nil, deref(prev.GuestProcess), deref(next.GuestProcess)},
	}
	for _, f := range opt {
		if f.pOK && (!f.nOK || f.pVal != f.nVal) {
			return refuse(store.ErrEvidenceChanged, rec, key, f.name, "recorded %v cannot be replaced or cleared", f.pVal)
		}
	}
	if err := slotStep(rec, key, "host_coordinator", prev.HostCoordinator, next.HostCoordinator, hostid.SlotSessionTerminalHostCoordinator.Direct(), env); err != nil {
		return err
	}
	return slotStep(rec, key, "exec_client", prev.ExecClient, next.ExecClient, hostid.SlotSessionTerminalExecClient.Direct(), env)
}

func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}

func requireRunning(t *SessionTerminal, env Env) error {
	const rec = "session terminal"
	key := t.Key()
	switch {
	case t.ContainerID == nil:
		return refuse(store.ErrMissingEvidence, rec, key, "container_id", "Running requires it")
	case t.PtyMaster == nil:
		return refuse(store.ErrMissingEvidence, rec, key, "pty_master", "Running requires it")
	case t.GuestProcess == nil:
		return refuse(store.ErrMissingEvidence, rec, key, "guest_process", "Running requires it")
	}
	for _, s := range []struct {
		name string
		o    hostid.PersistedHostProcessOwnership
	}{{"host_coordinator", t.HostCoordinator}, {"exec_client", t.ExecClient}} {
		if !s.o.IsCommitted() {
			return refuse(store.ErrMissingEvidence, rec, key, s.name, "Running requires current Committed ownership, found %v", s.o.Phase)
		}
		if s.o.Identity.Authority.BootID != env.Boot {
			return refuse(store.ErrMissingEvidence, rec, key, s.name, "committed identity is from boot %x, not the current boot", s.o.Identity.Authority.BootID[:])
		}
	}
	return nil
}
