package hostid

import (
	"errors"
	"fmt"
	"sync"

	"lazaret.dev/pkg/ids"
	"lazaret.dev/pkg/postcard"
)

// MessageVersion is ProcessOwnershipMessageVersion. The zero value is
// invalid; V1 is Postcard variant 0.
type MessageVersion uint8

// V1 is the only process-ownership message version.
const V1 MessageVersion = 1

func (v MessageVersion) String() string {
	if v == V1 {
		return "V1"
	}
	return fmt.Sprintf("unknown(%d)", uint8(v))
}

// StagedProcessOwnership binds one process acquisition to its Domain,
// generation, generation-scoped Session Coordinator ID, exact ownership slot
// and complete pidfs identity.
type StagedProcessOwnership struct {
	Version       MessageVersion
	DomainID      ids.DomainID
	GenerationID  ids.GenerationID
	CoordinatorID ids.CoordinatorID
	Slot          Slot
	Identity      PidfsProcessIdentityV1
}

// ProcessOwnershipCommitAck echoes the exact staged value it commits.
type ProcessOwnershipCommitAck struct {
	Version   MessageVersion
	Committed StagedProcessOwnership
}

// Errors of the launch barrier; test with errors.Is.
var (
	ErrUnknownVersion   = errors.New("unknown process-ownership message version")
	ErrInvalidStaged    = errors.New("invalid staged process ownership")
	ErrAckMismatch      = errors.New("acknowledgment does not echo the pending staged ownership")
	ErrAckDuplicate     = errors.New("acknowledgment for a barrier that was already released")
	ErrBarrierAbandoned = errors.New("acknowledgment arrived after the barrier was abandoned")
)

// Validate checks the version, the slot and the identity of a staged value.
func (s *StagedProcessOwnership) Validate() error {
	if s.Version != V1 {
		return fmt.Errorf("staged ownership version %v: %w", s.Version, ErrUnknownVersion)
	}
	if !s.Slot.Valid() {
		return fmt.Errorf("staged ownership slot %v: %w", s.Slot, ErrInvalidStaged)
	}
	if s.GenerationID == (ids.GenerationID{}) || s.CoordinatorID == (ids.CoordinatorID{}) || s.DomainID == (ids.DomainID{}) {
		return fmt.Errorf("staged ownership has a zero domain, generation or coordinator ID: %w", ErrInvalidStaged)
	}
	if err := StagedOwnership(s.Identity).Validate(); err != nil {
		return fmt.Errorf("staged ownership identity: %w: %w", ErrInvalidStaged, err)
	}
	return nil
}

// Ownership returns the durable Staged ownership the value stands for.
func (s *StagedProcessOwnership) Ownership() PersistedHostProcessOwnership {
	return StagedOwnership(s.Identity)
}

type barrierState uint8

const (
	barrierPending barrierState = iota
	barrierReleased
	barrierAbandoned
)

// Barrier is one pending launch barrier: the receiver side of a staged
// acquisition waiting for its commit acknowledgment. Exactly one matching
// v1 acknowledgment releases it. A mismatched or unknown-version
// acknowledgment is rejected and leaves it pending; once released every
// further acknowledgment is a duplicate; once abandoned (the launch failed
// or timed out) every acknowledgment is late. Accept must only be fed
// acknowledgments read from the authenticated generation channel; the
// barrier does not authenticate.
type Barrier struct {
	mu     sync.Mutex
	staged StagedProcessOwnership
	state  barrierState
	done   chan struct{}
}

// NewBarrier returns a pending barrier for staged.
func NewBarrier(staged StagedProcessOwnership) (*Barrier, error) {
	if err := staged.Validate(); err != nil {
		return nil, fmt.Errorf("creating launch barrier: %w", err)
	}
	return &Barrier{staged: staged, done: make(chan struct{})}, nil
}

// Staged returns the value the barrier waits for.
func (b *Barrier) Staged() StagedProcessOwnership { return b.staged }

// Done is closed when the barrier is released.
func (b *Barrier) Done() <-chan struct{} { return b.done }

// Accept offers ack to the barrier. It returns nil exactly once: for the
// first acknowledgment that is v1 and echoes the staged value exactly.
func (b *Barrier) Accept(ack ProcessOwnershipCommitAck) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch b.state {
	case barrierReleased:
		return fmt.Errorf("slot %v: %w", b.staged.Slot, ErrAckDuplicate)
	case barrierAbandoned:
		return fmt.Errorf("slot %v: %w", b.staged.Slot, ErrBarrierAbandoned)
	}
	if ack.Version != V1 {
		return fmt.Errorf("acknowledgment version %v: %w", ack.Version, ErrUnknownVersion)
	}
	if ack.Committed.Version != V1 {
		return fmt.Errorf("acknowledged staged version %v: %w", ack.Committed.Version, ErrUnknownVersion)
	}
	if ack.Committed != b.staged {
		return fmt.Errorf("slot %v: %w", b.staged.Slot, ErrAckMismatch)
	}
	b.state = barrierReleased
	close(b.done)
	return nil
}

// Abandon gives up a pending barrier; later acknowledgments are rejected as
// late. It reports whether the barrier was still pending (false means it had
// already been released, and the acquisition stands).
func (b *Barrier) Abandon() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state != barrierPending {
		return false
	}
	b.state = barrierAbandoned
	return true
}

// Released reports whether the barrier has been released.
func (b *Barrier) Released() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.state == barrierReleased
}

// MarshalPostcard writes the version as variant 0 for V1 (any other version
// is written as its own index minus one so that tests can produce it).
func (v MessageVersion) MarshalPostcard(e *postcard.Encoder) {
	e.Variant(uint32(v) - 1)
}

func decodeVersion(d *postcard.Decoder, field string) MessageVersion {
	if d.Err() != nil {
		return 0
	}
	v := d.U32()
	if d.Err() == nil && v != 0 {
		d.Fail(field, ErrUnknownVersion)
		return 0
	}
	return V1
}

// MarshalPostcard writes version, domain_id, generation_id, coordinator_id,
// slot, identity.
func (s *StagedProcessOwnership) MarshalPostcard(e *postcard.Encoder) {
	s.Version.MarshalPostcard(e)
	e.Fixed(s.DomainID[:])
	e.Fixed(s.GenerationID[:])
	e.Fixed(s.CoordinatorID[:])
	e.Variant(uint32(s.Slot) - 1)
	s.Identity.MarshalPostcard(e)
}

// UnmarshalPostcard reads what MarshalPostcard writes; an unknown version
// fails with ErrUnknownVersion.
func (s *StagedProcessOwnership) UnmarshalPostcard(d *postcard.Decoder) {
	s.Version = decodeVersion(d, "version")
	d.Fixed(s.DomainID[:])
	d.Fixed(s.GenerationID[:])
	d.Fixed(s.CoordinatorID[:])
	s.Slot = Slot(d.Variant(uint32(slotCount)) + 1)
	s.Identity.UnmarshalPostcard(d)
}

// MarshalPostcard writes version, committed.
func (a *ProcessOwnershipCommitAck) MarshalPostcard(e *postcard.Encoder) {
	a.Version.MarshalPostcard(e)
	a.Committed.MarshalPostcard(e)
}

// UnmarshalPostcard reads what MarshalPostcard writes.
func (a *ProcessOwnershipCommitAck) UnmarshalPostcard(d *postcard.Decoder) {
	a.Version = decodeVersion(d, "version")
	a.Committed.UnmarshalPostcard(d)
}
