package model

import (
	"fmt"
	"strings"
)

// State is one assignment to the model's VARIABLES (Lazaret.tla lines
// 200-206), one field per variable in declaration order. A function over
// Domains, Sessions or Requests is an array indexed by Domain, Session or
// Request; a set is a bit set. State is comparable, and two States are
// equal exactly when the TLA+ states they stand for are equal.
type State struct {
	DomainPhase            [NumDomains]DomainPhase
	CoordinatorState       [NumDomains]CoordinatorState
	StateAnchorState       [NumDomains]MountState
	SidecarState           [NumDomains]ResourceState
	SandboxState           [NumDomains]ResourceState
	TrustReady             [NumDomains]bool
	LockOwner              [NumDomains]Session
	Published              DomainSet
	Registered             [NumDomains]SessionSet
	Connected              [NumDomains]SessionSet
	SessionPhase           [NumSessions]SessionPhase
	TerminalRoute          [NumSessions]TerminalRoute
	ConnectionState        [NumSessions]ConnectionState
	ActiveRequest          [NumSessions]Request
	RequestPhase           [NumRequests]RequestPhase
	ApprovalSource         [NumRequests]ApprovalSource
	ApprovedCommand        [NumRequests]Command
	HostRunning            RequestSet
	DomainLockHeld         [NumDomains]bool
	HostCoordinatorProc    [NumDomains]ProcessState
	RuntimeSupervisorProc  [NumDomains]ProcessState
	AttachedRunscProc      [NumDomains]ProcessState
	RuntimeCausalEdge      [NumDomains]EdgeState
	RuntimeFaultsRemaining [NumDomains]uint8
}

// Var names one of the model's VARIABLES.
type Var uint8

// The VARIABLES, in the order of the declaration (lines 200-206).
const (
	VarDomainPhase Var = iota
	VarCoordinatorState
	VarStateAnchorState
	VarSidecarState
	VarSandboxState
	VarTrustReady
	VarLockOwner
	VarPublished
	VarRegistered
	VarConnected
	VarSessionPhase
	VarTerminalRoute
	VarConnectionState
	VarActiveRequest
	VarRequestPhase
	VarApprovalSource
	VarApprovedCommand
	VarHostRunning
	VarDomainLockHeld
	VarHostCoordinatorProc
	VarRuntimeSupervisorProc
	VarAttachedRunscProc
	VarRuntimeCausalEdge
	VarRuntimeFaultsRemaining
	NumVars
)

var varNames = [NumVars]string{
	"domainPhase", "coordinatorState", "stateAnchorState", "sidecarState",
	"sandboxState", "trustReady", "lockOwner", "published", "registered",
	"connected", "sessionPhase", "terminalRoute", "connectionState",
	"activeRequest", "requestPhase", "approvalSource", "approvedCommand",
	"hostRunning", "domainLockHeld", "hostCoordinatorProc",
	"runtimeSupervisorProc", "attachedRunscProc", "runtimeCausalEdge",
	"runtimeFaultsRemaining",
}

// String returns the TLA+ name of the variable.
func (v Var) String() string { return enumName(varNames[:], uint8(v), "Var") }

// VarSet is a set of variables.
type VarSet uint32

// Has reports v \in set.
func (set VarSet) Has(v Var) bool { return set&(1<<v) != 0 }

// With is set \cup {v}.
func (set VarSet) With(v Var) VarSet { return set | 1<<v }

func (set VarSet) String() string {
	var names []string
	for v := range NumVars {
		if set.Has(v) {
			names = append(names, v.String())
		}
	}
	return "{" + strings.Join(names, ", ") + "}"
}

// Changed returns the variables whose values differ between a and b.
func Changed(a, b *State) VarSet {
	var set VarSet
	diff := func(v Var, differ bool) {
		if differ {
			set = set.With(v)
		}
	}
	diff(VarDomainPhase, a.DomainPhase != b.DomainPhase)
	diff(VarCoordinatorState, a.CoordinatorState != b.CoordinatorState)
	diff(VarStateAnchorState, a.StateAnchorState != b.StateAnchorState)
	diff(VarSidecarState, a.SidecarState != b.SidecarState)
	diff(VarSandboxState, a.SandboxState != b.SandboxState)
	diff(VarTrustReady, a.TrustReady != b.TrustReady)
	diff(VarLockOwner, a.LockOwner != b.LockOwner)
	diff(VarPublished, a.Published != b.Published)
	diff(VarRegistered, a.Registered != b.Registered)
	diff(VarConnected, a.Connected != b.Connected)
	diff(VarSessionPhase, a.SessionPhase != b.SessionPhase)
	diff(VarTerminalRoute, a.TerminalRoute != b.TerminalRoute)
	diff(VarConnectionState, a.ConnectionState != b.ConnectionState)
	diff(VarActiveRequest, a.ActiveRequest != b.ActiveRequest)
	diff(VarRequestPhase, a.RequestPhase != b.RequestPhase)
	diff(VarApprovalSource, a.ApprovalSource != b.ApprovalSource)
	diff(VarApprovedCommand, a.ApprovedCommand != b.ApprovedCommand)
	diff(VarHostRunning, a.HostRunning != b.HostRunning)
	diff(VarDomainLockHeld, a.DomainLockHeld != b.DomainLockHeld)
	diff(VarHostCoordinatorProc, a.HostCoordinatorProc != b.HostCoordinatorProc)
	diff(VarRuntimeSupervisorProc, a.RuntimeSupervisorProc != b.RuntimeSupervisorProc)
	diff(VarAttachedRunscProc, a.AttachedRunscProc != b.AttachedRunscProc)
	diff(VarRuntimeCausalEdge, a.RuntimeCausalEdge != b.RuntimeCausalEdge)
	diff(VarRuntimeFaultsRemaining, a.RuntimeFaultsRemaining != b.RuntimeFaultsRemaining)
	return set
}

// initState is Init (lines 297-321). Init is deterministic: every variable
// is given one value, so the model has exactly one initial state.
func initState() State {
	var st State
	for d := range Domain(NumDomains) {
		st.DomainPhase[d] = DomainAbsent                // domainPhase = [d \in Domains |-> "Absent"]
		st.CoordinatorState[d] = CoordinatorAbsent      // coordinatorState = [d \in Domains |-> "Absent"]
		st.StateAnchorState[d] = Unmounted              // stateAnchorState = [d \in Domains |-> "Unmounted"]
		st.SidecarState[d] = ResourceStopped            // sidecarState = [d \in Domains |-> "Stopped"]
		st.SandboxState[d] = ResourceStopped            // sandboxState = [d \in Domains |-> "Stopped"]
		st.TrustReady[d] = false                        // trustReady = [d \in Domains |-> FALSE]
		st.LockOwner[d] = NoSession                     // lockOwner = [d \in Domains |-> NoSession]
		st.Registered[d] = 0                            // registered = [d \in Domains |-> {}]
		st.Connected[d] = 0                             // connected = [d \in Domains |-> {}]
		st.DomainLockHeld[d] = false                    // domainLockHeld = [d \in Domains |-> FALSE]
		st.HostCoordinatorProc[d] = ProcessAbsent       // hostCoordinatorProc = [d \in Domains |-> "Absent"]
		st.RuntimeSupervisorProc[d] = ProcessAbsent     // runtimeSupervisorProc = [d \in Domains |-> "Absent"]
		st.AttachedRunscProc[d] = ProcessAbsent         // attachedRunscProc = [d \in Domains |-> "Absent"]
		st.RuntimeCausalEdge[d] = Unarmed               // runtimeCausalEdge = [d \in Domains |-> "Unarmed"]
		st.RuntimeFaultsRemaining[d] = MaxRuntimeFaults // runtimeFaultsRemaining = [d \in Domains |-> 2]
	}
	st.Published = 0 // published = {}
	for s := range Session(NumSessions) {
		st.SessionPhase[s] = SessionNew      // sessionPhase = [s \in Sessions |-> "New"]
		st.TerminalRoute[s] = RouteDetached  // terminalRoute = [s \in Sessions |-> "Detached"]
		st.ConnectionState[s] = Disconnected // connectionState = [s \in Sessions |-> "Disconnected"]
		st.ActiveRequest[s] = NoRequest      // activeRequest = [s \in Sessions |-> NoRequest]
	}
	for r := range Request(NumRequests) {
		st.RequestPhase[r] = RequestUnused // requestPhase = [r \in Requests |-> "Unused"]
		st.ApprovalSource[r] = NoApproval  // approvalSource = [r \in Requests |-> NoApproval]
		st.ApprovedCommand[r] = NoCommand  // approvedCommand = [r \in Requests |-> NoCommand]
	}
	st.HostRunning = 0 // hostRunning = {}
	return st
}

// String prints the state the way TLC prints one in a trace: one conjunct
// per variable, functions as :> / @@ chains, strings quoted, model values
// bare.
func (st State) String() string {
	var b strings.Builder
	line := func(v Var, value string) {
		fmt.Fprintf(&b, "/\\ %s = %s\n", v, value)
	}
	line(VarDomainPhase, domainFn(func(d Domain) string { return quote(st.DomainPhase[d]) }))
	line(VarCoordinatorState, domainFn(func(d Domain) string { return quote(st.CoordinatorState[d]) }))
	line(VarStateAnchorState, domainFn(func(d Domain) string { return quote(st.StateAnchorState[d]) }))
	line(VarSidecarState, domainFn(func(d Domain) string { return quote(st.SidecarState[d]) }))
	line(VarSandboxState, domainFn(func(d Domain) string { return quote(st.SandboxState[d]) }))
	line(VarTrustReady, domainFn(func(d Domain) string { return boolString(st.TrustReady[d]) }))
	line(VarLockOwner, domainFn(func(d Domain) string { return st.LockOwner[d].String() }))
	line(VarPublished, st.Published.String())
	line(VarRegistered, domainFn(func(d Domain) string { return st.Registered[d].String() }))
	line(VarConnected, domainFn(func(d Domain) string { return st.Connected[d].String() }))
	line(VarSessionPhase, sessionFn(func(s Session) string { return quote(st.SessionPhase[s]) }))
	line(VarTerminalRoute, sessionFn(func(s Session) string { return quote(st.TerminalRoute[s]) }))
	line(VarConnectionState, sessionFn(func(s Session) string { return quote(st.ConnectionState[s]) }))
	line(VarActiveRequest, sessionFn(func(s Session) string { return st.ActiveRequest[s].String() }))
	line(VarRequestPhase, requestFn(func(r Request) string { return quote(st.RequestPhase[r]) }))
	line(VarApprovalSource, requestFn(func(r Request) string {
		if st.ApprovalSource[r] == NoApproval {
			return st.ApprovalSource[r].String() // a model value
		}
		return quote(st.ApprovalSource[r])
	}))
	line(VarApprovedCommand, requestFn(func(r Request) string { return st.ApprovedCommand[r].String() }))
	line(VarHostRunning, st.HostRunning.String())
	line(VarDomainLockHeld, domainFn(func(d Domain) string { return boolString(st.DomainLockHeld[d]) }))
	line(VarHostCoordinatorProc, domainFn(func(d Domain) string { return quote(st.HostCoordinatorProc[d]) }))
	line(VarRuntimeSupervisorProc, domainFn(func(d Domain) string { return quote(st.RuntimeSupervisorProc[d]) }))
	line(VarAttachedRunscProc, domainFn(func(d Domain) string { return quote(st.AttachedRunscProc[d]) }))
	line(VarRuntimeCausalEdge, domainFn(func(d Domain) string { return quote(st.RuntimeCausalEdge[d]) }))
	line(VarRuntimeFaultsRemaining, domainFn(func(d Domain) string {
		return fmt.Sprint(st.RuntimeFaultsRemaining[d])
	}))
	return b.String()
}

func quote(v fmt.Stringer) string { return `"` + v.String() + `"` }

func boolString(b bool) string {
	if b {
		return "TRUE"
	}
	return "FALSE"
}

func fnString[K interface {
	~uint8
	fmt.Stringer
}](n int, value func(K) string) string {
	parts := make([]string, n)
	for i := range n {
		k := K(i)
		parts[i] = k.String() + " :> " + value(k)
	}
	if n == 1 {
		return "(" + parts[0] + ")"
	}
	return "(" + strings.Join(parts, " @@ ") + ")"
}

func domainFn(value func(Domain) string) string   { return fnString(NumDomains, value) }
func sessionFn(value func(Session) string) string { return fnString(NumSessions, value) }
func requestFn(value func(Request) string) string { return fnString(NumRequests, value) }
