package domainstore

import (
	"lazaret.dev/pkg/phase"
	"lazaret.dev/pkg/store/codec"
)

// Every enumeration is stored as its variant name (a CBOR text string) and
// has an invalid zero value, so a record missing the field fails validation.

// Role is a Participant's role; each role has its own ownership variant.
type Role uint8

// The participant roles, in the start order of a generation.
const (
	RolePreparedLower Role = iota + 1
	RoleStateAnchor
	RoleGitRouting
	RoleNetwork
	RoleHelper
	RoleSandbox
	RolePublication
)

var roleNames = []string{"", "PreparedLower", "StateAnchor", "GitRouting", "Network", "Helper", "Sandbox", "Publication"}

// Roles lists every role in start order.
func Roles() []Role {
	return []Role{RolePreparedLower, RoleStateAnchor, RoleGitRouting, RoleNetwork, RoleHelper, RoleSandbox, RolePublication}
}

func (r Role) String() string                { return codec.EnumName(r, roleNames) }
func (r Role) Valid() bool                   { return codec.EnumValid(r, roleNames) }
func (r Role) MarshalText() ([]byte, error)  { return codec.EnumText(r, roleNames, "participant role") }
func (r *Role) UnmarshalText(b []byte) error { return parseEnum(r, b, roleNames, "participant role") }

// ParticipantState is the physical state of a Participant (and of a
// Mailbox).
type ParticipantState uint8

// Participant states.
const (
	StateIntent ParticipantState = iota + 1
	StateLeaseHeld
	StatePrepared
	StateCommitted
	StateReleaseIntent
	StateClean
)

var stateNames = []string{"", "Intent", "LeaseHeld", "Prepared", "Committed", "ReleaseIntent", "Clean"}

func (s ParticipantState) String() string { return codec.EnumName(s, stateNames) }
func (s ParticipantState) Valid() bool    { return codec.EnumValid(s, stateNames) }
func (s ParticipantState) MarshalText() ([]byte, error) {
	return codec.EnumText(s, stateNames, "participant state")
}
func (s *ParticipantState) UnmarshalText(b []byte) error {
	return parseEnum(s, b, stateNames, "participant state")
}

// IsActive reports whether s is one of the serviceable states.
func (s ParticipantState) IsActive() bool {
	return s == StateLeaseHeld || s == StatePrepared || s == StateCommitted
}

// ActiveState is the one serviceable state of r.
func (r Role) ActiveState() ParticipantState {
	switch r {
	case RolePreparedLower:
		return StateLeaseHeld
	case RoleStateAnchor, RoleGitRouting:
		return StatePrepared
	}
	return StateCommitted
}

// LeaseState is PreparedLowerOwnership.lease_state: the phase of the
// Storage Catalog lease the PreparedLower participant holds.
type LeaseState uint8

// Lease phases.
const (
	LeaseIntent LeaseState = iota + 1
	LeaseHeld
	LeaseReleaseIntent
)

var leaseNames = []string{"", "Intent", "LeaseHeld", "ReleaseIntent"}

func (l LeaseState) String() string { return codec.EnumName(l, leaseNames) }
func (l LeaseState) Valid() bool    { return codec.EnumValid(l, leaseNames) }
func (l LeaseState) MarshalText() ([]byte, error) {
	return codec.EnumText(l, leaseNames, "lease state")
}
func (l *LeaseState) UnmarshalText(b []byte) error { return parseEnum(l, b, leaseNames, "lease state") }

// TerminalState is SessionTerminalState, a physical recovery state below
// the protocol's session_phase.
type TerminalState uint8

// Session terminal states.
const (
	TerminalIntent TerminalState = iota + 1
	TerminalRunning
	TerminalReleaseIntent
	TerminalClean
)

var terminalNames = []string{"", "Intent", "Running", "ReleaseIntent", "Clean"}

func (t TerminalState) String() string { return codec.EnumName(t, terminalNames) }
func (t TerminalState) Valid() bool    { return codec.EnumValid(t, terminalNames) }
func (t TerminalState) MarshalText() ([]byte, error) {
	return codec.EnumText(t, terminalNames, "terminal state")
}
func (t *TerminalState) UnmarshalText(b []byte) error {
	return parseEnum(t, b, terminalNames, "terminal state")
}

// DomainPhase is the value set of Generation.durable_decision: the Domain
// phases of the application protocol model, stored by name (package phase).
type DomainPhase = phase.Domain

// Domain phases.
const (
	PhaseAbsent     = phase.DomainAbsent
	PhaseStarting   = phase.DomainStarting
	PhaseReady      = phase.DomainReady
	PhaseStopping   = phase.DomainStopping
	PhaseFailed     = phase.DomainFailed
	PhaseRecovering = phase.DomainRecovering
)

// SessionPhase is the value set of Session.session_phase: the Session
// phases of the application protocol model, stored by name (package
// phase).
type SessionPhase = phase.Session

// Session phases.
const (
	SessionNew           = phase.SessionNew
	SessionWaiting       = phase.SessionWaiting
	SessionRegistering   = phase.SessionRegistering
	SessionAttached      = phase.SessionAttached
	SessionPrompting     = phase.SessionPrompting
	SessionHostExecuting = phase.SessionHostExecuting
	SessionClosed        = phase.SessionClosed
	SessionFailed        = phase.SessionFailed
)

func parseEnum[T ~uint8](dst *T, b []byte, names []string, what string) error {
	v, err := codec.EnumParse[T](b, names, what)
	if err != nil {
		return err
	}
	*dst = v
	return nil
}
