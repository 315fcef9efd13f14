package hostid

import (
	"errors"
	"fmt"

	"lazaret.dev/pkg/postcard"
)

// OwnershipPhase is the variant of a PersistedHostProcessOwnership.
type OwnershipPhase uint8

// The three phases. Unassigned is the zero value: a slot nobody has
// touched records that no process ownership has been acquired.
const (
	Unassigned OwnershipPhase = iota
	Staged
	Committed
)

var phaseNames = [...]string{"Unassigned", "Staged", "Committed"}

func (p OwnershipPhase) String() string {
	if int(p) < len(phaseNames) {
		return phaseNames[p]
	}
	return fmt.Sprintf("invalid(%d)", uint8(p))
}

// HostProcessIdentity is the payload of a Committed ownership: the current
// pidfs identity of the owned process.
type HostProcessIdentity struct {
	Identity PidfsProcessIdentityV1
}

// PersistedHostProcessOwnership is the ownership union stored for every
// host-process edge. Identity is meaningful only for Staged and Committed
// and must be zero for Unassigned.
//
// Staged is positive authority only for exact same-handle cleanup and
// PidfsRecoveryMatch; only Committed is serviceable.
type PersistedHostProcessOwnership struct {
	Phase    OwnershipPhase
	Identity PidfsProcessIdentityV1
}

// StagedOwnership returns a Staged ownership of id.
func StagedOwnership(id PidfsProcessIdentityV1) PersistedHostProcessOwnership {
	return PersistedHostProcessOwnership{Phase: Staged, Identity: id}
}

// CommittedOwnership returns a Committed ownership of id.
func CommittedOwnership(id PidfsProcessIdentityV1) PersistedHostProcessOwnership {
	return PersistedHostProcessOwnership{Phase: Committed, Identity: id}
}

// IsUnassigned reports whether no ownership has been acquired.
func (o PersistedHostProcessOwnership) IsUnassigned() bool { return o.Phase == Unassigned }

// IsCommitted reports whether the ownership is serviceable.
func (o PersistedHostProcessOwnership) IsCommitted() bool { return o.Phase == Committed }

func (o PersistedHostProcessOwnership) String() string {
	if o.Phase == Unassigned {
		return "Unassigned"
	}
	return fmt.Sprintf("%v(%v)", o.Phase, o.Identity)
}

// Errors of ownership validation and steps; test with errors.Is.
var (
	ErrInvalidOwnership   = errors.New("invalid process ownership")
	ErrOwnershipRegressed = errors.New("process ownership cannot be replaced, cleared or moved backwards")
	ErrCommitNotStaged    = errors.New("acquired child process edge must be staged before it is committed")
	ErrCommitMismatch     = errors.New("committed identity differs from the staged identity")
)

// Validate checks the union's own rules: a known phase, a zero identity for
// Unassigned and a non-zero authority otherwise.
func (o PersistedHostProcessOwnership) Validate() error {
	switch o.Phase {
	case Unassigned:
		if o.Identity != (PidfsProcessIdentityV1{}) {
			return fmt.Errorf("unassigned ownership carries an identity: %w", ErrInvalidOwnership)
		}
	case Staged, Committed:
		if o.Identity.Authority.BootID == (BootID{}) || o.Identity.Authority.PidfsInode == 0 {
			return fmt.Errorf("%v ownership has an empty pidfs authority: %w", o.Phase, ErrInvalidOwnership)
		}
		if o.Identity.HostPID == 0 {
			return fmt.Errorf("%v ownership has host PID 0: %w", o.Phase, ErrInvalidOwnership)
		}
	default:
		return fmt.Errorf("phase %d: %w", uint8(o.Phase), ErrInvalidOwnership)
	}
	return nil
}

// CheckOwnershipStep checks one durable write of a process slot. Unchanged
// is always allowed. Otherwise the slot moves only Unassigned to Staged, or
// Staged to Committed with the identical identity; direct (an existing
// process that is a current committed owner or supervisor entering a new
// dependent snapshot) additionally allows Unassigned to Committed. Nothing
// moves backwards, is cleared or is replaced.
func CheckOwnershipStep(prev, next PersistedHostProcessOwnership, direct bool) error {
	if err := next.Validate(); err != nil {
		return err
	}
	if prev == next {
		return nil
	}
	switch {
	case prev.Phase == Unassigned && next.Phase == Staged:
		return nil
	case prev.Phase == Unassigned && next.Phase == Committed:
		if direct {
			return nil
		}
		return ErrCommitNotStaged
	case prev.Phase == Staged && next.Phase == Committed:
		if prev.Identity != next.Identity {
			return fmt.Errorf("staged %v, committed %v: %w", prev.Identity, next.Identity, ErrCommitMismatch)
		}
		return nil
	default:
		return fmt.Errorf("%v to %v: %w", prev, next, ErrOwnershipRegressed)
	}
}

// MarshalPostcard writes the union: variant 0 Unassigned, 1 Staged
// (identity), 2 Committed (HostProcessIdentity).
func (o *PersistedHostProcessOwnership) MarshalPostcard(e *postcard.Encoder) {
	e.Variant(uint32(o.Phase))
	if o.Phase != Unassigned {
		o.Identity.MarshalPostcard(e)
	}
}

// UnmarshalPostcard reads what MarshalPostcard writes.
func (o *PersistedHostProcessOwnership) UnmarshalPostcard(d *postcard.Decoder) {
	o.Phase = OwnershipPhase(d.Variant(3))
	o.Identity = PidfsProcessIdentityV1{}
	if d.Err() == nil && o.Phase != Unassigned {
		o.Identity.UnmarshalPostcard(d)
	}
}

// MarshalPostcard writes identity.
func (h *HostProcessIdentity) MarshalPostcard(e *postcard.Encoder) { h.Identity.MarshalPostcard(e) }

// UnmarshalPostcard reads what MarshalPostcard writes.
func (h *HostProcessIdentity) UnmarshalPostcard(d *postcard.Decoder) { h.Identity.UnmarshalPostcard(d) }
