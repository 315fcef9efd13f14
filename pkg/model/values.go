package model

import (
	"strconv"
	"strings"

	"lazaret.dev/pkg/phase"
)

// The sizes of the fixture's finite sets (Lazaret.cfg binds Domains,
// Sessions, Requests and Commands to DomainsFixture, SessionsFixture,
// RequestsFixture and CommandsFixture, Lazaret.tla lines 119-125). State
// holds fixed-size arrays of these lengths, so a different fixture with
// more elements means changing these constants, the element constants
// below and the Key layout.
const (
	NumDomains  = 1
	NumSessions = 2
	NumRequests = 3
	NumCommands = 4
)

// MaxRuntimeFaults is the initial value of runtimeFaultsRemaining[d]
// (Init, line 321) and the upper bound TypeOK allows (0..2, line 1310).
const MaxRuntimeFaults = 2

// Domain is an element of Domains. The fixture has one: D1.
type Domain uint8

// D1 is the fixture's only Domain, a TLC model value.
const D1 Domain = 0

var domainNames = [...]string{"D1"}

func (d Domain) String() string { return enumName(domainNames[:], uint8(d), "Domain") }

// Session is an element of Sessions, or the sentinel NoSession.
type Session uint8

// The fixture's Sessions and the NoSession sentinel, all TLC model values.
const (
	S1 Session = iota
	S2
	NoSession
)

var sessionNames = [...]string{"S1", "S2", "NoSession"}

func (s Session) String() string { return enumName(sessionNames[:], uint8(s), "Session") }

// Request is an element of Requests, or the sentinel NoRequest.
type Request uint8

// The fixture's Requests and the NoRequest sentinel, all TLC model values.
const (
	R1 Request = iota
	R2
	R3
	NoRequest
)

var requestNames = [...]string{"R1", "R2", "R3", "NoRequest"}

func (r Request) String() string { return enumName(requestNames[:], uint8(r), "Request") }

// Command is an element of Commands, or the sentinel NoCommand.
type Command uint8

// The fixture's Commands and the NoCommand sentinel, all TLC model values.
const (
	ExactCmd Command = iota
	PromptCmd
	ShellCmd
	EditedCmd
	NoCommand
)

var commandNames = [...]string{"ExactCmd", "PromptCmd", "ShellCmd", "EditedCmd", "NoCommand"}

func (c Command) String() string { return enumName(commandNames[:], uint8(c), "Command") }

// DomainPhase is an element of DomainPhases (line 70): a phase.Domain
// numbered densely from 0 (phase.Domain.Index), so the state key packs it
// in widthDomainPhase bits.
type DomainPhase uint8

// DomainPhases, numbered as phase.Domain.Index numbers them.
const (
	DomainAbsent     = DomainPhase(phase.DomainAbsent - 1)
	DomainStarting   = DomainPhase(phase.DomainStarting - 1)
	DomainReady      = DomainPhase(phase.DomainReady - 1)
	DomainStopping   = DomainPhase(phase.DomainStopping - 1)
	DomainFailed     = DomainPhase(phase.DomainFailed - 1)
	DomainRecovering = DomainPhase(phase.DomainRecovering - 1)
	numDomainPhases  = DomainPhase(phase.NumDomain)
)

// Phase is p as a phase.Domain, the invalid zero Domain for a value
// outside DomainPhases.
func (p DomainPhase) Phase() phase.Domain { return phase.DomainAt(int(p)) }

// DomainPhaseOf is the model's number of d; false for an invalid d.
func DomainPhaseOf(d phase.Domain) (DomainPhase, bool) {
	if !d.Valid() {
		return 0, false
	}
	return DomainPhase(d.Index()), true
}

func (p DomainPhase) String() string {
	if d := p.Phase(); d.Valid() {
		return d.String()
	}
	return enumName(nil, uint8(p), "DomainPhase")
}

// CoordinatorState is an element of CoordinatorStates (line 73).
type CoordinatorState uint8

// CoordinatorStates.
const (
	CoordinatorAbsent CoordinatorState = iota
	CoordinatorStarting
	CoordinatorReady
	CoordinatorStopping
	CoordinatorFailed
	numCoordinatorStates
)

var coordinatorStateNames = [...]string{"Absent", "Starting", "Ready", "Stopping", "Failed"}

func (c CoordinatorState) String() string {
	return enumName(coordinatorStateNames[:], uint8(c), "CoordinatorState")
}

// MountState is an element of MountStates (line 75).
type MountState uint8

// MountStates.
const (
	Unmounted MountState = iota
	Mounted
	numMountStates
)

var mountStateNames = [...]string{"Unmounted", "Mounted"}

func (m MountState) String() string { return enumName(mountStateNames[:], uint8(m), "MountState") }

// ResourceState is an element of ResourceStates (line 77). No action
// assigns "Failed"; it is part of the type only.
type ResourceState uint8

// ResourceStates.
const (
	ResourceStopped ResourceState = iota
	ResourceReady
	ResourceFailed
	numResourceStates
)

var resourceStateNames = [...]string{"Stopped", "Ready", "Failed"}

func (r ResourceState) String() string {
	return enumName(resourceStateNames[:], uint8(r), "ResourceState")
}

// ProcessState is an element of PhysicalProcessStates (line 79). No action
// assigns "Starting"; it is part of the type only.
type ProcessState uint8

// PhysicalProcessStates.
const (
	ProcessAbsent ProcessState = iota
	ProcessStarting
	ProcessAlive
	ProcessStopped
	ProcessDead
	numProcessStates
)

var processStateNames = [...]string{"Absent", "Starting", "Alive", "Stopped", "Dead"}

func (p ProcessState) String() string {
	return enumName(processStateNames[:], uint8(p), "ProcessState")
}

// EdgeState is an element of RuntimeCausalEdgeStates (line 81).
type EdgeState uint8

// RuntimeCausalEdgeStates.
const (
	Unarmed EdgeState = iota
	Armed
	numEdgeStates
)

var edgeStateNames = [...]string{"Unarmed", "Armed"}

func (e EdgeState) String() string { return enumName(edgeStateNames[:], uint8(e), "EdgeState") }

// SessionPhase is an element of SessionPhases (line 83): a phase.Session
// numbered densely from 0 (phase.Session.Index), so the state key packs it
// in widthSessionPhase bits.
type SessionPhase uint8

// SessionPhases, numbered as phase.Session.Index numbers them.
const (
	SessionNew           = SessionPhase(phase.SessionNew - 1)
	SessionWaiting       = SessionPhase(phase.SessionWaiting - 1)
	SessionRegistering   = SessionPhase(phase.SessionRegistering - 1)
	SessionAttached      = SessionPhase(phase.SessionAttached - 1)
	SessionPrompting     = SessionPhase(phase.SessionPrompting - 1)
	SessionHostExecuting = SessionPhase(phase.SessionHostExecuting - 1)
	SessionClosed        = SessionPhase(phase.SessionClosed - 1)
	SessionFailed        = SessionPhase(phase.SessionFailed - 1)
	numSessionPhases     = SessionPhase(phase.NumSession)
)

// Phase is p as a phase.Session, the invalid zero Session for a value
// outside SessionPhases.
func (p SessionPhase) Phase() phase.Session { return phase.SessionAt(int(p)) }

// SessionPhaseOf is the model's number of s; false for an invalid s.
func SessionPhaseOf(s phase.Session) (SessionPhase, bool) {
	if !s.Valid() {
		return 0, false
	}
	return SessionPhase(s.Index()), true
}

func (p SessionPhase) String() string {
	if s := p.Phase(); s.Valid() {
		return s.String()
	}
	return enumName(nil, uint8(p), "SessionPhase")
}

// TerminalRoute is an element of TerminalRoutes (line 87).
type TerminalRoute uint8

// TerminalRoutes.
const (
	RouteDetached TerminalRoute = iota
	RouteSandbox
	RoutePrompt
	RouteHostProcess
	numTerminalRoutes
)

var terminalRouteNames = [...]string{"Detached", "Sandbox", "Prompt", "HostProcess"}

func (t TerminalRoute) String() string {
	return enumName(terminalRouteNames[:], uint8(t), "TerminalRoute")
}

// ConnectionState is an element of ConnectionStates (line 89).
type ConnectionState uint8

// ConnectionStates.
const (
	Disconnected ConnectionState = iota
	Connected
	numConnectionStates
)

var connectionStateNames = [...]string{"Disconnected", "Connected"}

func (c ConnectionState) String() string {
	return enumName(connectionStateNames[:], uint8(c), "ConnectionState")
}

// RequestPhase is an element of RequestPhases (line 91).
type RequestPhase uint8

// RequestPhases.
const (
	RequestUnused RequestPhase = iota
	RequestVerified
	RequestAwaitingApproval
	RequestApproved
	RequestExecuting
	RequestCompletionPending
	RequestDenialPending
	RequestTimeoutPending
	RequestCancellationPending
	RequestFailurePending
	RequestCompleted
	RequestDenied
	RequestTimedOut
	RequestCancelled
	RequestFailed
	numRequestPhases
)

var requestPhaseNames = [...]string{
	"Unused", "Verified", "AwaitingApproval", "Approved", "Executing",
	"CompletionPending", "DenialPending", "TimeoutPending",
	"CancellationPending", "FailurePending", "Completed", "Denied",
	"TimedOut", "Cancelled", "Failed",
}

func (p RequestPhase) String() string {
	return enumName(requestPhaseNames[:], uint8(p), "RequestPhase")
}

// IsPendingResult reports p \in PendingResultPhases (line 99).
func (p RequestPhase) IsPendingResult() bool {
	return p >= RequestCompletionPending && p <= RequestFailurePending
}

// IsTerminal reports p \in TerminalRequestPhases (line 103).
func (p RequestPhase) IsTerminal() bool {
	return p >= RequestCompleted && p <= RequestFailed
}

// DeliveredResultPhase is DeliveredResultPhase(p) (line 106). The CASE has
// no OTHER arm; it is only applied to a phase in PendingResultPhases, and
// any other argument returns false.
func DeliveredResultPhase(p RequestPhase) (RequestPhase, bool) {
	switch p {
	case RequestCompletionPending:
		return RequestCompleted, true
	case RequestDenialPending:
		return RequestDenied, true
	case RequestTimeoutPending:
		return RequestTimedOut, true
	case RequestCancellationPending:
		return RequestCancelled, true
	case RequestFailurePending:
		return RequestFailed, true
	}
	return 0, false
}

// ApprovalSource is an element of ApprovalSources (line 97): the model
// value NoApproval or one of the strings "AutoRule" and "Developer".
type ApprovalSource uint8

// ApprovalSources.
const (
	NoApproval ApprovalSource = iota
	ApprovalAutoRule
	ApprovalDeveloper
	numApprovalSources
)

var approvalSourceNames = [...]string{"NoApproval", "AutoRule", "Developer"}

func (a ApprovalSource) String() string {
	return enumName(approvalSourceNames[:], uint8(a), "ApprovalSource")
}

// DomainSet is a subset of Domains, one bit per Domain. Bit sets are
// canonical, so two equal TLA+ sets are equal Go values.
type DomainSet uint8

// Has reports d \in set.
func (set DomainSet) Has(d Domain) bool { return set&(1<<d) != 0 }

// With is set \cup {d}.
func (set DomainSet) With(d Domain) DomainSet { return set | 1<<d }

// Without is set \ {d}.
func (set DomainSet) Without(d Domain) DomainSet { return set &^ (1 << d) }

func (set DomainSet) String() string {
	return setString(uint8(set), domainNames[:NumDomains])
}

// SessionSet is a subset of Sessions, one bit per Session.
type SessionSet uint8

// Has reports s \in set.
func (set SessionSet) Has(s Session) bool { return set&(1<<s) != 0 }

// With is set \cup {s}.
func (set SessionSet) With(s Session) SessionSet { return set | 1<<s }

// Without is set \ {s}.
func (set SessionSet) Without(s Session) SessionSet { return set &^ (1 << s) }

func (set SessionSet) String() string {
	return setString(uint8(set), sessionNames[:NumSessions])
}

// RequestSet is a subset of Requests, one bit per Request.
type RequestSet uint8

// Has reports r \in set.
func (set RequestSet) Has(r Request) bool { return set&(1<<r) != 0 }

// With is set \cup {r}.
func (set RequestSet) With(r Request) RequestSet { return set | 1<<r }

// Without is set \ {r}.
func (set RequestSet) Without(r Request) RequestSet { return set &^ (1 << r) }

func (set RequestSet) String() string {
	return setString(uint8(set), requestNames[:NumRequests])
}

const (
	allDomains  DomainSet  = 1<<NumDomains - 1
	allSessions SessionSet = 1<<NumSessions - 1
	allRequests RequestSet = 1<<NumRequests - 1
)

// enumName returns names[v], or a placeholder naming the type for a value
// outside it (such a value fails TypeOK).
func enumName(names []string, v uint8, typ string) string {
	if int(v) < len(names) {
		return names[v]
	}
	return "<invalid " + typ + " " + strconv.Itoa(int(v)) + ">"
}

// setString prints a bit set the way TLC prints a set of model values.
func setString(bits uint8, names []string) string {
	var b strings.Builder
	b.WriteByte('{')
	first := true
	for i := 0; i < 8; i++ {
		if bits&(1<<i) == 0 {
			continue
		}
		if !first {
			b.WriteString(", ")
		}
		first = false
		if i < len(names) {
			b.WriteString(names[i])
		} else {
			b.WriteString("<invalid element " + strconv.Itoa(i) + ">")
		}
	}
	b.WriteByte('}')
	return b.String()
}
