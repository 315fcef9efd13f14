package catalog

import (
	"lazaret.dev/pkg/store"
)

// CheckPrepareOperation guards prepare-operation writes: created in Intent
// (no device or inode: the stage does not exist yet); the exact same
// operation moves to Owned with both present; nothing else changes, and
// Owned is final.
func CheckPrepareOperation(prev, next *PrepareOperation) error {
	if err := next.Validate(); err != nil {
		return err
	}
	const rec = "prepare operation"
	if prev == nil {
		if next.StageState != StageIntent {
			return refuse(store.ErrIllegalTransition, rec, next.Key(), "stage_state", "an operation is recorded in Intent before its stage is created, not %v", next.StageState)
		}
		return nil
	}
	a, b := *prev, *next
	a.StageState, b.StageState = 0, 0
	a.Device, a.Inode, b.Device, b.Inode = nil, nil, nil, nil
	if a != b {
		return refuse(store.ErrEvidenceChanged, rec, next.Key(), "", "an operation's artifact, source, policy and stage path are immutable")
	}
	switch {
	case prev.StageState == next.StageState && prev.StageState == StageIntent:
		return nil
	case prev.StageState == StageOwned && next.StageState == StageOwned:
		if *prev.Device != *next.Device || *prev.Inode != *next.Inode {
			return refuse(store.ErrEvidenceChanged, rec, next.Key(), "device", "the owned stage's device and inode cannot be replaced")
		}
		return nil
	case prev.StageState == StageIntent && next.StageState == StageOwned:
		return nil
	}
	return refuse(store.ErrIllegalTransition, rec, next.Key(), "stage_state", "%v cannot follow %v", next.StageState, prev.StageState)
}

// CheckArtifact guards artifact writes. An artifact is created Available
// only by publishing an Owned operation (see Tx.Publish). All fields but
// the state are immutable; Available moves to Reclaiming only while no
// lease exists (leased reports whether one does); Reclaiming is final
// until the record is deleted.
func CheckArtifact(prev, next *PreparedArtifact, leased bool) error {
	if err := next.Validate(); err != nil {
		return err
	}
	const rec = "prepared artifact"
	if prev == nil {
		if next.State != ArtifactAvailable {
			return refuse(store.ErrIllegalTransition, rec, next.Key(), "state", "an artifact is published Available, not %v", next.State)
		}
		return nil
	}
	a, b := *prev, *next
	a.State, b.State = 0, 0
	if a != b {
		return refuse(store.ErrEvidenceChanged, rec, next.Key(), "", "an artifact's identity, path, device and inode are immutable")
	}
	switch {
	case prev.State == next.State:
		return nil
	case prev.State == ArtifactAvailable && next.State == ArtifactReclaiming:
		if leased {
			return refuse(store.ErrIllegalTransition, rec, next.Key(), "state", "a leased artifact cannot be reclaimed")
		}
		return nil
	}
	return refuse(store.ErrIllegalTransition, rec, next.Key(), "state", "%v cannot follow %v", next.State, prev.State)
}
