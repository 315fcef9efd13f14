package domainstore

import (
	"lazaret.dev/pkg/store"
)

// The invariants below are what every stored record satisfies if it was
// written through the transition checks, whatever happened before: they
// are the state-shape half of those checks, without the previous record
// or the current boot. Scans apply them to every row, so a store that
// holds a record no legal write sequence could produce is reported.

// VerifyParticipant checks the shape of a stored participant.
func VerifyParticipant(p *Participant) error {
	if err := p.Validate(); err != nil {
		return err
	}
	const rec = "participant"
	key := p.Key()
	var snap *snapshotView
	if p.Ownership != nil {
		snap, _ = p.Ownership.snapshot()
	}
	lease := func() (LeaseState, bool) {
		if p.Ownership.PreparedLower == nil || p.Ownership.PreparedLower.LeaseState == nil {
			return 0, false
		}
		return *p.Ownership.PreparedLower.LeaseState, true
	}
	switch {
	case p.State == StateIntent:
		if snap == nil {
			return nil
		}
		if snap.isEmpty() {
			return refuse(store.ErrInvalidRecord, rec, key, "ownership", "an Intent snapshot is non-empty")
		}
		if f := snap.field("released_state_anchor"); f != nil && f.present {
			return refuse(store.ErrInvalidRecord, rec, key, "ownership.released_state_anchor", "is present only in ReleaseIntent")
		}
		if l, ok := lease(); ok && l == LeaseReleaseIntent {
			return refuse(store.ErrInvalidRecord, rec, key, "ownership.lease_state", "is ReleaseIntent while the participant is in Intent")
		}
	case p.State.IsActive():
		if snap == nil {
			return refuse(store.ErrMissingEvidence, rec, key, "ownership", "an active participant has a snapshot")
		}
		// Whether the boot is still current is the reader's question; a
		// stored active record has every slot committed within one boot.
		var env Env
		if len(snap.slots) > 0 {
			env.Boot = snap.slots[0].o.Identity.Authority.BootID
		}
		return requireActive(p, snap, env)
	case p.State == StateReleaseIntent:
		if snap == nil || snap.isEmpty() {
			return refuse(store.ErrInvalidRecord, rec, key, "ownership", "a ReleaseIntent snapshot is non-empty")
		}
		if l, ok := lease(); ok && l != LeaseReleaseIntent {
			return refuse(store.ErrInvalidRecord, rec, key, "ownership.lease_state", "is %v while the participant is in ReleaseIntent", l)
		}
	case p.State == StateClean:
		if snap == nil || !snap.isEmpty() {
			return refuse(store.ErrInvalidRecord, rec, key, "ownership", "a Clean participant carries the explicit empty snapshot")
		}
	}
	return nil
}

// VerifySessionTerminal checks the shape of a stored session terminal.
func VerifySessionTerminal(t *SessionTerminal) error {
	if err := t.Validate(); err != nil {
		return err
	}
	switch t.State {
	case TerminalRunning:
		return requireRunning(t, Env{Boot: t.HostCoordinator.Identity.Authority.BootID})
	case TerminalReleaseIntent:
		if bareTerminal(t) {
			return refuse(store.ErrInvalidRecord, "session terminal", t.Key(), "", "a ReleaseIntent terminal retains evidence")
		}
	case TerminalClean:
		if !bareTerminal(t) {
			return refuse(store.ErrInvalidRecord, "session terminal", t.Key(), "", "a Clean terminal has no evidence")
		}
	}
	return nil
}
