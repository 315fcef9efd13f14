package model

// Safety properties: Lazaret.tla lines 1282-1494. Each invariant is a
// method reporting whether it holds in st; quantifiers over the fixture's
// finite sets are loops that return false on the first counterexample.

// TypeOK is TypeOK, lines 1286-1310. Every field must hold a value of its
// type; sets must be subsets of their base sets.
func (m *Model) TypeOK(st *State) bool {
	for d := range Domain(NumDomains) {
		if !(st.DomainPhase[d] < numDomainPhases && // domainPhase \in [Domains -> DomainPhases]
			st.CoordinatorState[d] < numCoordinatorStates && // coordinatorState \in [Domains -> CoordinatorStates]
			st.StateAnchorState[d] < numMountStates && // stateAnchorState \in [Domains -> MountStates]
			st.SidecarState[d] < numResourceStates && // sidecarState \in [Domains -> ResourceStates]
			st.SandboxState[d] < numResourceStates && // sandboxState \in [Domains -> ResourceStates]
			// trustReady \in [Domains -> BOOLEAN]: a Go bool.
			st.LockOwner[d] <= NoSession && // lockOwner \in [Domains -> Sessions \cup {NoSession}]
			st.Registered[d]&^allSessions == 0 && // registered \in [Domains -> SUBSET Sessions]
			st.Connected[d]&^allSessions == 0 && // connected \in [Domains -> SUBSET Sessions]
			// domainLockHeld \in [Domains -> BOOLEAN]: a Go bool.
			st.HostCoordinatorProc[d] < numProcessStates && // hostCoordinatorProc \in [Domains -> PhysicalProcessStates]
			st.RuntimeSupervisorProc[d] < numProcessStates && // runtimeSupervisorProc \in [Domains -> PhysicalProcessStates]
			st.AttachedRunscProc[d] < numProcessStates && // attachedRunscProc \in [Domains -> PhysicalProcessStates]
			st.RuntimeCausalEdge[d] < numEdgeStates && // runtimeCausalEdge \in [Domains -> RuntimeCausalEdgeStates]
			st.RuntimeFaultsRemaining[d] <= MaxRuntimeFaults) { // runtimeFaultsRemaining \in [Domains -> 0..2]
			return false
		}
	}
	if st.Published&^allDomains != 0 { // published \subseteq Domains
		return false
	}
	for s := range Session(NumSessions) {
		if !(st.SessionPhase[s] < numSessionPhases && // sessionPhase \in [Sessions -> SessionPhases]
			st.TerminalRoute[s] < numTerminalRoutes && // terminalRoute \in [Sessions -> TerminalRoutes]
			st.ConnectionState[s] < numConnectionStates && // connectionState \in [Sessions -> ConnectionStates]
			st.ActiveRequest[s] <= NoRequest) { // activeRequest \in [Sessions -> Requests \cup {NoRequest}]
			return false
		}
	}
	for r := range Request(NumRequests) {
		if !(st.RequestPhase[r] < numRequestPhases && // requestPhase \in [Requests -> RequestPhases]
			st.ApprovalSource[r] < numApprovalSources && // approvalSource \in [Requests -> ApprovalSources]
			st.ApprovedCommand[r] <= NoCommand) { // approvedCommand \in [Requests -> Commands \cup {NoCommand}]
			return false
		}
	}
	return st.HostRunning&^allRequests == 0 // hostRunning \subseteq Requests
}

// ConfigurationConfinement is ConfigurationConfinement, line 1312.
func (m *Model) ConfigurationConfinement(st *State) bool {
	for d := range Domain(NumDomains) {
		if st.DomainPhase[d] != DomainAbsent && !m.f.ConfigSafe[d] {
			return false
		}
	}
	return true
}

// SandboxNamespaceIsolation is SandboxNamespaceIsolation, line 1315.
func (m *Model) SandboxNamespaceIsolation(st *State) bool {
	for d := range Domain(NumDomains) {
		if st.SandboxState[d] == ResourceReady && !m.f.SandboxIsolationSafe[d] {
			return false
		}
	}
	return true
}

// OrderedNetworkStartup is OrderedNetworkStartup, line 1318.
func (m *Model) OrderedNetworkStartup(st *State) bool {
	for d := range Domain(NumDomains) {
		if st.SandboxState[d] == ResourceReady && st.SidecarState[d] != ResourceReady {
			return false
		}
	}
	return true
}

// PublishedDomainsReady is PublishedDomainsReady, lines 1321-1328.
func (m *Model) PublishedDomainsReady(st *State) bool {
	for d := range Domain(NumDomains) {
		if !st.Published.Has(d) { // \A d \in published
			continue
		}
		if !(st.DomainPhase[d] == DomainReady &&
			st.CoordinatorState[d] == CoordinatorReady &&
			st.StateAnchorState[d] == Mounted &&
			st.SidecarState[d] == ResourceReady &&
			st.SandboxState[d] == ResourceReady &&
			st.TrustReady[d]) {
			return false
		}
	}
	return true
}

// DomainLockLifetime is DomainLockLifetime, lines 1330-1334.
func (m *Model) DomainLockLifetime(st *State) bool {
	for d := range Domain(NumDomains) {
		// domainPhase[d] = "Absent" => ~domainLockHeld[d]
		if st.DomainPhase[d] == DomainAbsent && st.DomainLockHeld[d] {
			return false
		}
		// domainPhase[d] # "Absent" => domainLockHeld[d]
		if st.DomainPhase[d] != DomainAbsent && !st.DomainLockHeld[d] {
			return false
		}
		// ~domainLockHeld[d] => RuntimeGenerationAbsent(d)
		if !st.DomainLockHeld[d] && !RuntimeGenerationAbsent(st, d) {
			return false
		}
	}
	return true
}

// RuntimeCausalEdgeArmedBeforeSandbox is
// RuntimeCausalEdgeArmedBeforeSandbox, lines 1336-1339.
func (m *Model) RuntimeCausalEdgeArmedBeforeSandbox(st *State) bool {
	for d := range Domain(NumDomains) {
		if st.SandboxState[d] == ResourceReady &&
			!(st.RuntimeCausalEdge[d] == Armed && ProcessPresent(st.AttachedRunscProc[d])) {
			return false
		}
	}
	return true
}

// RuntimeCausalEdgeOwnerPresent is RuntimeCausalEdgeOwnerPresent, lines
// 1341-1344.
func (m *Model) RuntimeCausalEdgeOwnerPresent(st *State) bool {
	for d := range Domain(NumDomains) {
		if st.RuntimeCausalEdge[d] == Armed &&
			!(st.DomainLockHeld[d] && ProcessPresent(st.RuntimeSupervisorProc[d])) {
			return false
		}
	}
	return true
}

// SandboxRunningImpliesCoordinatorPresent is
// SandboxRunningImpliesCoordinatorPresent, lines 1346-1348.
func (m *Model) SandboxRunningImpliesCoordinatorPresent(st *State) bool {
	for d := range Domain(NumDomains) {
		if st.SandboxState[d] == ResourceReady && !RuntimeLogicalAuthorityPresent(st, d) {
			return false
		}
	}
	return true
}

// PublishedRuntimeAuthorityPresent is PublishedRuntimeAuthorityPresent,
// lines 1350-1351.
func (m *Model) PublishedRuntimeAuthorityPresent(st *State) bool {
	for d := range Domain(NumDomains) {
		if st.Published.Has(d) && !RuntimeLogicalAuthorityPresent(st, d) {
			return false
		}
	}
	return true
}

// ExclusiveBootstrapOwnership is ExclusiveBootstrapOwnership, lines
// 1353-1357.
func (m *Model) ExclusiveBootstrapOwnership(st *State) bool {
	for d := range Domain(NumDomains) {
		owner := st.LockOwner[d]
		if owner == NoSession {
			continue
		}
		if !(st.DomainPhase[d] == DomainStarting &&
			st.CoordinatorState[d] == CoordinatorStarting &&
			st.SessionPhase[owner] == SessionWaiting) {
			return false
		}
	}
	return true
}

// TeardownNotJoinable is TeardownNotJoinable, lines 1359-1364.
func (m *Model) TeardownNotJoinable(st *State) bool {
	for d := range Domain(NumDomains) {
		switch st.DomainPhase[d] {
		case DomainStopping, DomainFailed, DomainRecovering:
			if st.Published.Has(d) || st.Registered[d] != 0 || st.Connected[d] != 0 {
				return false
			}
		}
	}
	return true
}

// RegisteredSessionsConnected is RegisteredSessionsConnected, lines
// 1366-1367.
func (m *Model) RegisteredSessionsConnected(st *State) bool {
	for d := range Domain(NumDomains) {
		if st.Registered[d]&^st.Connected[d] != 0 { // registered[d] \subseteq connected[d]
			return false
		}
	}
	return true
}

// AttachedSessionsValid is AttachedSessionsValid, lines 1369-1375.
func (m *Model) AttachedSessionsValid(st *State) bool {
	for s := range Session(NumSessions) {
		switch st.SessionPhase[s] {
		case SessionAttached, SessionPrompting, SessionHostExecuting:
		default:
			continue
		}
		d := m.Dom(s)
		if !(st.Registered[d].Has(s) &&
			st.Connected[d].Has(s) &&
			st.DomainPhase[d] == DomainReady &&
			m.f.SessionFingerprint[s] == m.f.DomainFingerprint[d]) {
			return false
		}
	}
	return true
}

// AuthenticatedRequestsOnly is AuthenticatedRequestsOnly, lines 1377-1381.
func (m *Model) AuthenticatedRequestsOnly(st *State) bool {
	for r := range Request(NumRequests) {
		if st.RequestPhase[r] != RequestUnused &&
			!(m.f.RequestCredentialValid[r] &&
				m.f.RequestSignatureValid[r] &&
				m.RequestIdentityTupleMatches(r)) {
			return false
		}
	}
	return true
}

// RuntimeRoleIdentitySeparation is RuntimeRoleIdentitySeparation, lines
// 1383-1391. It depends on the constants only.
func (m *Model) RuntimeRoleIdentitySeparation(st *State) bool {
	for d := range Domain(NumDomains) {
		if !m.roleIdentitiesDistinct(d) {
			return false
		}
	}
	for s := range Session(NumSessions) {
		d := m.Dom(s)
		cli := m.f.SessionCliIdentity[s]
		if cli == m.f.DomainCoordinatorIdentity[d] ||
			cli == m.f.DomainSidecarIdentity[d] ||
			cli == m.f.DomainSandboxIdentity[d] {
			return false
		}
	}
	return true
}

// RegisteredSessionIdentityUniqueness is
// RegisteredSessionIdentityUniqueness, lines 1393-1399.
func (m *Model) RegisteredSessionIdentityUniqueness(st *State) bool {
	for s1 := range Session(NumSessions) {
		for s2 := range Session(NumSessions) {
			if s1 != s2 &&
				st.Registered[m.Dom(s1)].Has(s1) &&
				st.Registered[m.Dom(s2)].Has(s2) &&
				!(m.f.SessionCliIdentity[s1] != m.f.SessionCliIdentity[s2] &&
					m.f.SessionAnchorIdentity[s1] != m.f.SessionAnchorIdentity[s2]) {
				return false
			}
		}
	}
	return true
}

// LiveRequestIdentityAuthorized is LiveRequestIdentityAuthorized, lines
// 1401-1405.
func (m *Model) LiveRequestIdentityAuthorized(st *State) bool {
	for r := range Request(NumRequests) {
		// requestPhase[r] \notin {"Unused"} \cup TerminalRequestPhases
		if st.RequestPhase[r] == RequestUnused || st.RequestPhase[r].IsTerminal() {
			continue
		}
		if !(m.RuntimeIdentityTupleAuthorized(st, m.ReqDomain(r)) &&
			m.SessionIdentityTupleRegistered(st, m.ReqSession(r))) {
			return false
		}
	}
	return true
}

// DeveloperApprovalAuthenticated is DeveloperApprovalAuthenticated, lines
// 1407-1412.
func (m *Model) DeveloperApprovalAuthenticated(st *State) bool {
	for r := range Request(NumRequests) {
		if st.ApprovalSource[r] != ApprovalDeveloper {
			continue
		}
		s := m.ReqSession(r)
		if !(m.f.ApprovalCliIdentity[r] == m.f.SessionCliIdentity[s] &&
			m.f.ApprovalSessionAnchor[r] == m.f.SessionAnchorIdentity[s] &&
			m.f.ApprovalSignatureValid[r] &&
			st.ApprovedCommand[r] == m.f.ApprovalCommand[r]) {
			return false
		}
	}
	return true
}

// HostExecutionAuthorized is HostExecutionAuthorized, lines 1414-1419.
func (m *Model) HostExecutionAuthorized(st *State) bool {
	for r := range Request(NumRequests) {
		if !st.HostRunning.Has(r) { // \A r \in hostRunning
			continue
		}
		c := st.ApprovedCommand[r]
		if !(st.RequestPhase[r] == RequestExecuting &&
			(st.ApprovalSource[r] == ApprovalAutoRule || st.ApprovalSource[r] == ApprovalDeveloper) &&
			c < NumCommands && // approvedCommand[r] \in Commands
			m.f.CommandContentSafe[c]) {
			return false
		}
	}
	return true
}

// AutoApprovalNoShell is AutoApprovalNoShell, lines 1421-1424.
func (m *Model) AutoApprovalNoShell(st *State) bool {
	for r := range Request(NumRequests) {
		if st.ApprovalSource[r] != ApprovalAutoRule {
			continue
		}
		c := st.ApprovedCommand[r]
		// approvedCommand[r] = RequestCommand[r] /\
		// ~CommandRequiresShell[approvedCommand[r]]; the first conjunct puts
		// c in Commands before the second applies CommandRequiresShell.
		if !(c == m.f.RequestCommand[r] && !m.f.CommandRequiresShell[c]) {
			return false
		}
	}
	return true
}

// TerminalIsolation is TerminalIsolation, lines 1426-1428.
func (m *Model) TerminalIsolation(st *State) bool {
	for s := range Session(NumSessions) {
		if st.SessionPhase[s] == SessionPrompting && st.TerminalRoute[s] != RoutePrompt {
			return false
		}
	}
	return true
}

// NoOrphanHostProcess is NoOrphanHostProcess, lines 1430-1435.
func (m *Model) NoOrphanHostProcess(st *State) bool {
	for r := range Request(NumRequests) {
		if !st.HostRunning.Has(r) {
			continue
		}
		s := m.ReqSession(r)
		if !(st.ActiveRequest[s] == r &&
			st.SessionPhase[s] == SessionHostExecuting &&
			st.ConnectionState[s] == Connected) {
			return false
		}
	}
	return true
}

// StateAnchorOwnership is StateAnchorOwnership, lines 1437-1439.
func (m *Model) StateAnchorOwnership(st *State) bool {
	for d := range Domain(NumDomains) {
		if st.StateAnchorState[d] != Mounted {
			continue
		}
		switch st.CoordinatorState[d] {
		case CoordinatorStarting, CoordinatorReady, CoordinatorStopping, CoordinatorFailed:
		default:
			return false
		}
	}
	return true
}

// FailedDomainIsolation is FailedDomainIsolation, lines 1441-1447.
func (m *Model) FailedDomainIsolation(st *State) bool {
	for d := range Domain(NumDomains) {
		if st.DomainPhase[d] != DomainFailed && st.DomainPhase[d] != DomainRecovering {
			continue
		}
		if !(!st.Published.Has(d) &&
			st.Registered[d] == 0 &&
			st.Connected[d] == 0 &&
			!st.TrustReady[d] &&
			st.HostRunning&m.RequestsForDomain(d) == 0) {
			return false
		}
	}
	return true
}

// OrderedFailureRecovery is OrderedFailureRecovery, lines 1449-1454.
func (m *Model) OrderedFailureRecovery(st *State) bool {
	for d := range Domain(NumDomains) {
		if st.DomainPhase[d] != DomainRecovering {
			continue
		}
		// sidecarState[d] = "Stopped" => sandboxState[d] = "Stopped"
		if st.SidecarState[d] == ResourceStopped && st.SandboxState[d] != ResourceStopped {
			return false
		}
		// stateAnchorState[d] = "Unmounted" =>
		//     sandboxState[d] = "Stopped" /\ sidecarState[d] = "Stopped"
		if st.StateAnchorState[d] == Unmounted &&
			!(st.SandboxState[d] == ResourceStopped && st.SidecarState[d] == ResourceStopped) {
			return false
		}
	}
	return true
}

// ResultDeliveryStateConsistent is ResultDeliveryStateConsistent, lines
// 1456-1465.
func (m *Model) ResultDeliveryStateConsistent(st *State) bool {
	for r := range Request(NumRequests) {
		s := m.ReqSession(r)
		if st.RequestPhase[r].IsPendingResult() &&
			!(st.ActiveRequest[s] == r &&
				st.ConnectionState[s] == Connected &&
				st.SessionPhase[s] == SessionAttached &&
				!st.HostRunning.Has(r)) {
			return false
		}
	}
	for r := range Request(NumRequests) {
		if st.RequestPhase[r].IsTerminal() &&
			!(st.ActiveRequest[m.ReqSession(r)] != r && !st.HostRunning.Has(r)) {
			return false
		}
	}
	return true
}

// Invariant is one invariant of Lazaret.cfg's INVARIANTS.
type Invariant struct {
	Name  string
	Holds func(m *Model, st *State) bool
}

// Invariants returns the invariants Lazaret.cfg lists under INVARIANTS,
// in its order: TypeOK and the conjuncts of Safety (lines 1467-1494).
func Invariants() []Invariant { return append([]Invariant(nil), invariants...) }

var invariants = []Invariant{
	{"TypeOK", (*Model).TypeOK},
	{"ConfigurationConfinement", (*Model).ConfigurationConfinement},
	{"SandboxNamespaceIsolation", (*Model).SandboxNamespaceIsolation},
	{"OrderedNetworkStartup", (*Model).OrderedNetworkStartup},
	{"PublishedDomainsReady", (*Model).PublishedDomainsReady},
	{"DomainLockLifetime", (*Model).DomainLockLifetime},
	{"RuntimeCausalEdgeArmedBeforeSandbox", (*Model).RuntimeCausalEdgeArmedBeforeSandbox},
	{"RuntimeCausalEdgeOwnerPresent", (*Model).RuntimeCausalEdgeOwnerPresent},
	{"SandboxRunningImpliesCoordinatorPresent", (*Model).SandboxRunningImpliesCoordinatorPresent},
	{"PublishedRuntimeAuthorityPresent", (*Model).PublishedRuntimeAuthorityPresent},
	{"ExclusiveBootstrapOwnership", (*Model).ExclusiveBootstrapOwnership},
	{"TeardownNotJoinable", (*Model).TeardownNotJoinable},
	{"RegisteredSessionsConnected", (*Model).RegisteredSessionsConnected},
	{"AttachedSessionsValid", (*Model).AttachedSessionsValid},
	{"AuthenticatedRequestsOnly", (*Model).AuthenticatedRequestsOnly},
	{"RuntimeRoleIdentitySeparation", (*Model).RuntimeRoleIdentitySeparation},
	{"RegisteredSessionIdentityUniqueness", (*Model).RegisteredSessionIdentityUniqueness},
	{"LiveRequestIdentityAuthorized", (*Model).LiveRequestIdentityAuthorized},
	{"DeveloperApprovalAuthenticated", (*Model).DeveloperApprovalAuthenticated},
	{"HostExecutionAuthorized", (*Model).HostExecutionAuthorized},
	{"AutoApprovalNoShell", (*Model).AutoApprovalNoShell},
	{"TerminalIsolation", (*Model).TerminalIsolation},
	{"NoOrphanHostProcess", (*Model).NoOrphanHostProcess},
	{"StateAnchorOwnership", (*Model).StateAnchorOwnership},
	{"FailedDomainIsolation", (*Model).FailedDomainIsolation},
	{"OrderedFailureRecovery", (*Model).OrderedFailureRecovery},
	{"ResultDeliveryStateConsistent", (*Model).ResultDeliveryStateConsistent},
}

// Violated returns the name of the first invariant, in INVARIANTS order,
// that fails in st, and false when every invariant holds.
func (m *Model) Violated(st *State) (string, bool) {
	for _, inv := range invariants {
		if !inv.Holds(m, st) {
			return inv.Name, true
		}
	}
	return "", false
}
