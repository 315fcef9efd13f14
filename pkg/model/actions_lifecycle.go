package model

// Domain and Session lifecycle: Lazaret.tla lines 323-679.
//
// Each action takes the current state st and the action's bound
// identifiers, and returns the successor and true when every guard
// conjunct holds, or the zero State and false. Guards are tested in the
// order of their conjuncts; the successor starts as a copy of st (every
// variable UNCHANGED) and each primed conjunct then assigns its variable
// from values of st, never of the successor, exactly as the TLA+ reads
// unprimed variables. The comment on each assignment is its conjunct.

// StartNewDomain is StartNewDomain(s), lines 327-344.
func (m *Model) StartNewDomain(st State, s Session) (State, bool) {
	d := m.Dom(s)                         // LET d == Dom(s)
	if st.SessionPhase[s] != SessionNew { // sessionPhase[s] = "New"
		return State{}, false
	}
	if !m.f.ConfigSafe[d] { // ConfigSafe[d]
		return State{}, false
	}
	if st.DomainPhase[d] != DomainAbsent { // domainPhase[d] = "Absent"
		return State{}, false
	}
	if !RuntimeGenerationAbsent(&st, d) { // RuntimeGenerationAbsent(d)
		return State{}, false
	}
	next := st
	next.DomainPhase[d] = DomainStarting           // domainPhase' = [domainPhase EXCEPT ![d] = "Starting"]
	next.CoordinatorState[d] = CoordinatorStarting // coordinatorState' = [coordinatorState EXCEPT ![d] = "Starting"]
	next.LockOwner[d] = s                          // lockOwner' = [lockOwner EXCEPT ![d] = s]
	next.DomainLockHeld[d] = true                  // domainLockHeld' = [domainLockHeld EXCEPT ![d] = TRUE]
	next.HostCoordinatorProc[d] = ProcessAlive     // hostCoordinatorProc' = [hostCoordinatorProc EXCEPT ![d] = "Alive"]
	next.SessionPhase[s] = SessionWaiting          // sessionPhase' = [sessionPhase EXCEPT ![s] = "Waiting"]
	// UNCHANGED << stateAnchorState, sidecarState, sandboxState, trustReady,
	//   published, registered, connected, terminalRoute, connectionState,
	//   activeRequest, requestPhase, approvalSource, approvedCommand,
	//   hostRunning, runtimeSupervisorProc, attachedRunscProc,
	//   runtimeCausalEdge, runtimeFaultsRemaining >>
	return next, true
}

// StartReadySession is StartReadySession(s), lines 346-362.
func (m *Model) StartReadySession(st State, s Session) (State, bool) {
	d := m.Dom(s)                         // LET d == Dom(s)
	if st.SessionPhase[s] != SessionNew { // sessionPhase[s] = "New"
		return State{}, false
	}
	if st.DomainPhase[d] != DomainReady { // domainPhase[d] = "Ready"
		return State{}, false
	}
	if !st.Published.Has(d) { // d \in published
		return State{}, false
	}
	if st.HostCoordinatorProc[d] != ProcessAlive { // hostCoordinatorProc[d] = "Alive"
		return State{}, false
	}
	if m.f.SessionFingerprint[s] != m.f.DomainFingerprint[d] { // SessionFingerprint[s] = DomainFingerprint[d]
		return State{}, false
	}
	next := st
	next.SessionPhase[s] = SessionRegistering // sessionPhase' = [sessionPhase EXCEPT ![s] = "Registering"]
	next.ConnectionState[s] = Connected       // connectionState' = [connectionState EXCEPT ![s] = "Connected"]
	// UNCHANGED every other variable.
	return next, true
}

// WaitForDomain is WaitForDomain(s), lines 364-376.
func (m *Model) WaitForDomain(st State, s Session) (State, bool) {
	d := m.Dom(s)                         // LET d == Dom(s)
	if st.SessionPhase[s] != SessionNew { // sessionPhase[s] = "New"
		return State{}, false
	}
	// domainPhase[d] \in {"Starting", "Stopping"}
	if st.DomainPhase[d] != DomainStarting && st.DomainPhase[d] != DomainStopping {
		return State{}, false
	}
	next := st
	next.SessionPhase[s] = SessionWaiting // sessionPhase' = [sessionPhase EXCEPT ![s] = "Waiting"]
	// UNCHANGED every other variable.
	return next, true
}

// RestartWaitingDomain is RestartWaitingDomain(s), lines 378-394.
func (m *Model) RestartWaitingDomain(st State, s Session) (State, bool) {
	d := m.Dom(s)                             // LET d == Dom(s)
	if st.SessionPhase[s] != SessionWaiting { // sessionPhase[s] = "Waiting"
		return State{}, false
	}
	if !m.f.ConfigSafe[d] { // ConfigSafe[d]
		return State{}, false
	}
	if st.DomainPhase[d] != DomainAbsent { // domainPhase[d] = "Absent"
		return State{}, false
	}
	if !RuntimeGenerationAbsent(&st, d) { // RuntimeGenerationAbsent(d)
		return State{}, false
	}
	next := st
	next.DomainPhase[d] = DomainStarting           // domainPhase' = [domainPhase EXCEPT ![d] = "Starting"]
	next.CoordinatorState[d] = CoordinatorStarting // coordinatorState' = [coordinatorState EXCEPT ![d] = "Starting"]
	next.LockOwner[d] = s                          // lockOwner' = [lockOwner EXCEPT ![d] = s]
	next.DomainLockHeld[d] = true                  // domainLockHeld' = [domainLockHeld EXCEPT ![d] = TRUE]
	next.HostCoordinatorProc[d] = ProcessAlive     // hostCoordinatorProc' = [hostCoordinatorProc EXCEPT ![d] = "Alive"]
	// UNCHANGED << stateAnchorState, sidecarState, sandboxState, trustReady,
	//   published, registered, connected, sessionPhase, terminalRoute,
	//   connectionState, activeRequest, requestPhase, approvalSource,
	//   approvedCommand, hostRunning, runtimeSupervisorProc,
	//   attachedRunscProc, runtimeCausalEdge, runtimeFaultsRemaining >>
	return next, true
}

// MountStateAnchor is MountStateAnchor(d), lines 396-408.
func (m *Model) MountStateAnchor(st State, d Domain) (State, bool) {
	if st.DomainPhase[d] != DomainStarting { // domainPhase[d] = "Starting"
		return State{}, false
	}
	if st.CoordinatorState[d] != CoordinatorStarting { // coordinatorState[d] = "Starting"
		return State{}, false
	}
	if st.HostCoordinatorProc[d] != ProcessAlive { // hostCoordinatorProc[d] = "Alive"
		return State{}, false
	}
	if st.StateAnchorState[d] != Unmounted { // stateAnchorState[d] = "Unmounted"
		return State{}, false
	}
	next := st
	next.StateAnchorState[d] = Mounted // stateAnchorState' = [stateAnchorState EXCEPT ![d] = "Mounted"]
	// UNCHANGED every other variable.
	return next, true
}

// CreateTrustAnchor is CreateTrustAnchor(d), lines 410-424.
func (m *Model) CreateTrustAnchor(st State, d Domain) (State, bool) {
	if st.DomainPhase[d] != DomainStarting { // domainPhase[d] = "Starting"
		return State{}, false
	}
	if st.CoordinatorState[d] != CoordinatorStarting { // coordinatorState[d] = "Starting"
		return State{}, false
	}
	if st.HostCoordinatorProc[d] != ProcessAlive { // hostCoordinatorProc[d] = "Alive"
		return State{}, false
	}
	if st.TrustReady[d] { // ~trustReady[d]
		return State{}, false
	}
	if !m.f.CoordinatorCertificateValid[d] { // CoordinatorCertificateValid[d]
		return State{}, false
	}
	next := st
	next.TrustReady[d] = true // trustReady' = [trustReady EXCEPT ![d] = TRUE]
	// UNCHANGED every other variable.
	return next, true
}

// StartSidecar is StartSidecar(d), lines 426-441.
func (m *Model) StartSidecar(st State, d Domain) (State, bool) {
	if st.DomainPhase[d] != DomainStarting { // domainPhase[d] = "Starting"
		return State{}, false
	}
	if st.HostCoordinatorProc[d] != ProcessAlive { // hostCoordinatorProc[d] = "Alive"
		return State{}, false
	}
	if st.StateAnchorState[d] != Mounted { // stateAnchorState[d] = "Mounted"
		return State{}, false
	}
	if !st.TrustReady[d] { // trustReady[d]
		return State{}, false
	}
	if !m.f.SidecarCertificateValid[d] { // SidecarCertificateValid[d]
		return State{}, false
	}
	if st.SidecarState[d] != ResourceStopped { // sidecarState[d] = "Stopped"
		return State{}, false
	}
	next := st
	next.SidecarState[d] = ResourceReady // sidecarState' = [sidecarState EXCEPT ![d] = "Ready"]
	// UNCHANGED every other variable.
	return next, true
}

// StartRuntimeSupervisor is StartRuntimeSupervisor(d), lines 443-455.
func (m *Model) StartRuntimeSupervisor(st State, d Domain) (State, bool) {
	if st.DomainPhase[d] != DomainStarting { // domainPhase[d] = "Starting"
		return State{}, false
	}
	if st.HostCoordinatorProc[d] != ProcessAlive { // hostCoordinatorProc[d] = "Alive"
		return State{}, false
	}
	if st.SidecarState[d] != ResourceReady { // sidecarState[d] = "Ready"
		return State{}, false
	}
	if st.RuntimeSupervisorProc[d] != ProcessAbsent { // runtimeSupervisorProc[d] = "Absent"
		return State{}, false
	}
	next := st
	next.RuntimeSupervisorProc[d] = ProcessAlive // runtimeSupervisorProc' = [runtimeSupervisorProc EXCEPT ![d] = "Alive"]
	// UNCHANGED every other variable.
	return next, true
}

// ArmRuntimeCausalEdge is ArmRuntimeCausalEdge(d), lines 457-470.
func (m *Model) ArmRuntimeCausalEdge(st State, d Domain) (State, bool) {
	if st.DomainPhase[d] != DomainStarting { // domainPhase[d] = "Starting"
		return State{}, false
	}
	if st.HostCoordinatorProc[d] != ProcessAlive { // hostCoordinatorProc[d] = "Alive"
		return State{}, false
	}
	if st.RuntimeSupervisorProc[d] != ProcessAlive { // runtimeSupervisorProc[d] = "Alive"
		return State{}, false
	}
	if st.AttachedRunscProc[d] != ProcessAbsent { // attachedRunscProc[d] = "Absent"
		return State{}, false
	}
	if st.RuntimeCausalEdge[d] != Unarmed { // runtimeCausalEdge[d] = "Unarmed"
		return State{}, false
	}
	next := st
	next.RuntimeCausalEdge[d] = Armed // runtimeCausalEdge' = [runtimeCausalEdge EXCEPT ![d] = "Armed"]
	// UNCHANGED every other variable.
	return next, true
}

// StartSandbox is StartSandbox(d), lines 472-490.
func (m *Model) StartSandbox(st State, d Domain) (State, bool) {
	if st.DomainPhase[d] != DomainStarting { // domainPhase[d] = "Starting"
		return State{}, false
	}
	if st.HostCoordinatorProc[d] != ProcessAlive { // hostCoordinatorProc[d] = "Alive"
		return State{}, false
	}
	if st.RuntimeSupervisorProc[d] != ProcessAlive { // runtimeSupervisorProc[d] = "Alive"
		return State{}, false
	}
	if st.RuntimeCausalEdge[d] != Armed { // runtimeCausalEdge[d] = "Armed"
		return State{}, false
	}
	if st.SidecarState[d] != ResourceReady { // sidecarState[d] = "Ready"
		return State{}, false
	}
	if st.SandboxState[d] != ResourceStopped { // sandboxState[d] = "Stopped"
		return State{}, false
	}
	if st.AttachedRunscProc[d] != ProcessAbsent { // attachedRunscProc[d] = "Absent"
		return State{}, false
	}
	if !m.f.SandboxIsolationSafe[d] { // SandboxIsolationSafe[d]
		return State{}, false
	}
	if !m.f.SandboxCertificateValid[d] { // SandboxCertificateValid[d]
		return State{}, false
	}
	next := st
	next.SandboxState[d] = ResourceReady     // sandboxState' = [sandboxState EXCEPT ![d] = "Ready"]
	next.AttachedRunscProc[d] = ProcessAlive // attachedRunscProc' = [attachedRunscProc EXCEPT ![d] = "Alive"]
	// UNCHANGED every other variable.
	return next, true
}

// PublishDomain is PublishDomain(d), lines 492-511.
func (m *Model) PublishDomain(st State, d Domain) (State, bool) {
	if st.DomainPhase[d] != DomainStarting { // domainPhase[d] = "Starting"
		return State{}, false
	}
	if st.CoordinatorState[d] != CoordinatorStarting { // coordinatorState[d] = "Starting"
		return State{}, false
	}
	if st.HostCoordinatorProc[d] != ProcessAlive { // hostCoordinatorProc[d] = "Alive"
		return State{}, false
	}
	if !RuntimeAuthorityResponsive(&st, d) { // RuntimeAuthorityResponsive(d)
		return State{}, false
	}
	if st.StateAnchorState[d] != Mounted { // stateAnchorState[d] = "Mounted"
		return State{}, false
	}
	if st.SidecarState[d] != ResourceReady { // sidecarState[d] = "Ready"
		return State{}, false
	}
	if st.SandboxState[d] != ResourceReady { // sandboxState[d] = "Ready"
		return State{}, false
	}
	if !st.TrustReady[d] { // trustReady[d]
		return State{}, false
	}
	next := st
	next.DomainPhase[d] = DomainReady           // domainPhase' = [domainPhase EXCEPT ![d] = "Ready"]
	next.CoordinatorState[d] = CoordinatorReady // coordinatorState' = [coordinatorState EXCEPT ![d] = "Ready"]
	next.LockOwner[d] = NoSession               // lockOwner' = [lockOwner EXCEPT ![d] = NoSession]
	next.Published = st.Published.With(d)       // published' = published \cup {d}
	// UNCHANGED every other variable.
	return next, true
}

// AdvanceWaitingSession is AdvanceWaitingSession(s), lines 513-529.
func (m *Model) AdvanceWaitingSession(st State, s Session) (State, bool) {
	d := m.Dom(s)                             // LET d == Dom(s)
	if st.SessionPhase[s] != SessionWaiting { // sessionPhase[s] = "Waiting"
		return State{}, false
	}
	if st.DomainPhase[d] != DomainReady { // domainPhase[d] = "Ready"
		return State{}, false
	}
	if !st.Published.Has(d) { // d \in published
		return State{}, false
	}
	if st.HostCoordinatorProc[d] != ProcessAlive { // hostCoordinatorProc[d] = "Alive"
		return State{}, false
	}
	if m.f.SessionFingerprint[s] != m.f.DomainFingerprint[d] { // SessionFingerprint[s] = DomainFingerprint[d]
		return State{}, false
	}
	next := st
	next.SessionPhase[s] = SessionRegistering // sessionPhase' = [sessionPhase EXCEPT ![s] = "Registering"]
	next.ConnectionState[s] = Connected       // connectionState' = [connectionState EXCEPT ![s] = "Connected"]
	// UNCHANGED every other variable.
	return next, true
}

// RejectConfigurationMismatch is RejectConfigurationMismatch(s), lines
// 531-545.
func (m *Model) RejectConfigurationMismatch(st State, s Session) (State, bool) {
	d := m.Dom(s) // LET d == Dom(s)
	// sessionPhase[s] \in {"New", "Waiting"}
	if st.SessionPhase[s] != SessionNew && st.SessionPhase[s] != SessionWaiting {
		return State{}, false
	}
	if st.DomainPhase[d] != DomainReady { // domainPhase[d] = "Ready"
		return State{}, false
	}
	if m.f.SessionFingerprint[s] == m.f.DomainFingerprint[d] { // SessionFingerprint[s] # DomainFingerprint[d]
		return State{}, false
	}
	next := st
	next.SessionPhase[s] = SessionFailed   // sessionPhase' = [sessionPhase EXCEPT ![s] = "Failed"]
	next.TerminalRoute[s] = RouteDetached  // terminalRoute' = [terminalRoute EXCEPT ![s] = "Detached"]
	next.ConnectionState[s] = Disconnected // connectionState' = [connectionState EXCEPT ![s] = "Disconnected"]
	// UNCHANGED every other variable.
	return next, true
}

// RegisterSession is RegisterSession(s), lines 547-566.
func (m *Model) RegisterSession(st State, s Session) (State, bool) {
	d := m.Dom(s)                                 // LET d == Dom(s)
	if st.SessionPhase[s] != SessionRegistering { // sessionPhase[s] = "Registering"
		return State{}, false
	}
	if st.ConnectionState[s] != Connected { // connectionState[s] = "Connected"
		return State{}, false
	}
	if st.DomainPhase[d] != DomainReady { // domainPhase[d] = "Ready"
		return State{}, false
	}
	if !st.Published.Has(d) { // d \in published
		return State{}, false
	}
	if st.HostCoordinatorProc[d] != ProcessAlive { // hostCoordinatorProc[d] = "Alive"
		return State{}, false
	}
	if m.f.SessionFingerprint[s] != m.f.DomainFingerprint[d] { // SessionFingerprint[s] = DomainFingerprint[d]
		return State{}, false
	}
	if !m.f.CliCertificateValid[s] { // CliCertificateValid[s]
		return State{}, false
	}
	next := st
	next.Registered[d] = st.Registered[d].With(s) // registered' = [registered EXCEPT ![d] = @ \cup {s}]
	next.Connected[d] = st.Connected[d].With(s)   // connected' = [connected EXCEPT ![d] = @ \cup {s}]
	next.SessionPhase[s] = SessionAttached        // sessionPhase' = [sessionPhase EXCEPT ![s] = "Attached"]
	next.TerminalRoute[s] = RouteSandbox          // terminalRoute' = [terminalRoute EXCEPT ![s] = "Sandbox"]
	// UNCHANGED every other variable.
	return next, true
}

// DisconnectSession is DisconnectSession(s), lines 568-599.
func (m *Model) DisconnectSession(st State, s Session) (State, bool) {
	d := m.Dom(s)            // LET d == Dom(s)
	r := st.ActiveRequest[s] //     r == activeRequest[s]
	// leaderLost == lockOwner[d] = s /\ domainPhase[d] = "Starting"
	leaderLost := st.LockOwner[d] == s && st.DomainPhase[d] == DomainStarting
	// sessionPhase[s] \in { "Waiting", "Registering", "Attached", "Prompting",
	//                       "HostExecuting" }
	switch st.SessionPhase[s] {
	case SessionWaiting, SessionRegistering, SessionAttached, SessionPrompting, SessionHostExecuting:
	default:
		return State{}, false
	}
	next := st
	next.Registered[d] = st.Registered[d].Without(s) // registered' = [registered EXCEPT ![d] = @ \ {s}]
	next.Connected[d] = st.Connected[d].Without(s)   // connected' = [connected EXCEPT ![d] = @ \ {s}]
	next.SessionPhase[s] = SessionClosed             // sessionPhase' = [sessionPhase EXCEPT ![s] = "Closed"]
	next.TerminalRoute[s] = RouteDetached            // terminalRoute' = [terminalRoute EXCEPT ![s] = "Detached"]
	next.ConnectionState[s] = Disconnected           // connectionState' = [connectionState EXCEPT ![s] = "Disconnected"]
	next.ActiveRequest[s] = NoRequest                // activeRequest' = [activeRequest EXCEPT ![s] = NoRequest]
	// requestPhase' = [q \in Requests |->
	//     IF r # NoRequest /\ q = r /\ ~IsTerminalRequest(q)
	//     THEN "Cancelled" ELSE requestPhase[q]]
	for q := range Request(NumRequests) {
		if r != NoRequest && q == r && !IsTerminalRequest(&st, q) {
			next.RequestPhase[q] = RequestCancelled
		} else {
			next.RequestPhase[q] = st.RequestPhase[q]
		}
	}
	// hostRunning' = IF r = NoRequest THEN hostRunning ELSE hostRunning \ {r}
	if r == NoRequest {
		next.HostRunning = st.HostRunning
	} else {
		next.HostRunning = st.HostRunning.Without(r)
	}
	// domainPhase' = [domainPhase EXCEPT ![d] = IF leaderLost THEN "Failed" ELSE @]
	if leaderLost {
		next.DomainPhase[d] = DomainFailed
	}
	// coordinatorState' = [coordinatorState EXCEPT ![d] = IF leaderLost THEN "Failed" ELSE @]
	if leaderLost {
		next.CoordinatorState[d] = CoordinatorFailed
	}
	// trustReady' = [trustReady EXCEPT ![d] = IF leaderLost THEN FALSE ELSE @]
	if leaderLost {
		next.TrustReady[d] = false
	}
	// lockOwner' = [lockOwner EXCEPT ![d] = IF leaderLost THEN NoSession ELSE @]
	if leaderLost {
		next.LockOwner[d] = NoSession
	}
	// published' = IF leaderLost THEN published \ {d} ELSE published
	if leaderLost {
		next.Published = st.Published.Without(d)
	}
	// UNCHANGED << stateAnchorState, sidecarState, sandboxState,
	//   approvalSource, approvedCommand, domainLockHeld, hostCoordinatorProc,
	//   runtimeSupervisorProc, attachedRunscProc, runtimeCausalEdge,
	//   runtimeFaultsRemaining >>
	return next, true
}

// BeginTeardown is BeginTeardown(d), lines 601-616.
func (m *Model) BeginTeardown(st State, d Domain) (State, bool) {
	if st.DomainPhase[d] != DomainReady { // domainPhase[d] = "Ready"
		return State{}, false
	}
	if st.HostCoordinatorProc[d] != ProcessAlive { // hostCoordinatorProc[d] = "Alive"
		return State{}, false
	}
	if m.Interested(&st, d) != 0 { // Interested(d) = {}
		return State{}, false
	}
	if st.Registered[d] != 0 { // registered[d] = {}
		return State{}, false
	}
	if st.Connected[d] != 0 { // connected[d] = {}
		return State{}, false
	}
	next := st
	next.DomainPhase[d] = DomainStopping           // domainPhase' = [domainPhase EXCEPT ![d] = "Stopping"]
	next.CoordinatorState[d] = CoordinatorStopping // coordinatorState' = [coordinatorState EXCEPT ![d] = "Stopping"]
	next.Published = st.Published.Without(d)       // published' = published \ {d}
	// UNCHANGED every other variable.
	return next, true
}

// StopSandbox is StopSandbox(d), lines 618-631.
func (m *Model) StopSandbox(st State, d Domain) (State, bool) {
	if st.DomainPhase[d] != DomainStopping { // domainPhase[d] = "Stopping"
		return State{}, false
	}
	if !RuntimeAuthorityResponsive(&st, d) { // RuntimeAuthorityResponsive(d)
		return State{}, false
	}
	if st.SandboxState[d] != ResourceReady { // sandboxState[d] = "Ready"
		return State{}, false
	}
	next := st
	next.SandboxState[d] = ResourceStopped    // sandboxState' = [sandboxState EXCEPT ![d] = "Stopped"]
	next.AttachedRunscProc[d] = ProcessAbsent // attachedRunscProc' = [attachedRunscProc EXCEPT ![d] = "Absent"]
	next.RuntimeCausalEdge[d] = Unarmed       // runtimeCausalEdge' = [runtimeCausalEdge EXCEPT ![d] = "Unarmed"]
	// UNCHANGED every other variable.
	return next, true
}

// StopSidecar is StopSidecar(d), lines 633-645.
func (m *Model) StopSidecar(st State, d Domain) (State, bool) {
	if st.DomainPhase[d] != DomainStopping { // domainPhase[d] = "Stopping"
		return State{}, false
	}
	if st.SandboxState[d] != ResourceStopped { // sandboxState[d] = "Stopped"
		return State{}, false
	}
	if st.SidecarState[d] != ResourceReady { // sidecarState[d] = "Ready"
		return State{}, false
	}
	next := st
	next.SidecarState[d] = ResourceStopped // sidecarState' = [sidecarState EXCEPT ![d] = "Stopped"]
	// UNCHANGED every other variable.
	return next, true
}

// UnmountStateAnchor is UnmountStateAnchor(d), lines 647-659.
func (m *Model) UnmountStateAnchor(st State, d Domain) (State, bool) {
	if st.DomainPhase[d] != DomainStopping { // domainPhase[d] = "Stopping"
		return State{}, false
	}
	if st.SandboxState[d] != ResourceStopped { // sandboxState[d] = "Stopped"
		return State{}, false
	}
	if st.SidecarState[d] != ResourceStopped { // sidecarState[d] = "Stopped"
		return State{}, false
	}
	if st.StateAnchorState[d] != Mounted { // stateAnchorState[d] = "Mounted"
		return State{}, false
	}
	next := st
	next.StateAnchorState[d] = Unmounted // stateAnchorState' = [stateAnchorState EXCEPT ![d] = "Unmounted"]
	// UNCHANGED every other variable.
	return next, true
}

// FinishTeardown is FinishTeardown(d), lines 661-679.
func (m *Model) FinishTeardown(st State, d Domain) (State, bool) {
	if st.DomainPhase[d] != DomainStopping { // domainPhase[d] = "Stopping"
		return State{}, false
	}
	if st.StateAnchorState[d] != Unmounted { // stateAnchorState[d] = "Unmounted"
		return State{}, false
	}
	if st.SidecarState[d] != ResourceStopped { // sidecarState[d] = "Stopped"
		return State{}, false
	}
	if st.SandboxState[d] != ResourceStopped { // sandboxState[d] = "Stopped"
		return State{}, false
	}
	next := st
	next.DomainPhase[d] = DomainAbsent            // domainPhase' = [domainPhase EXCEPT ![d] = "Absent"]
	next.CoordinatorState[d] = CoordinatorAbsent  // coordinatorState' = [coordinatorState EXCEPT ![d] = "Absent"]
	next.TrustReady[d] = false                    // trustReady' = [trustReady EXCEPT ![d] = FALSE]
	next.LockOwner[d] = NoSession                 // lockOwner' = [lockOwner EXCEPT ![d] = NoSession]
	next.DomainLockHeld[d] = false                // domainLockHeld' = [domainLockHeld EXCEPT ![d] = FALSE]
	next.HostCoordinatorProc[d] = ProcessAbsent   // hostCoordinatorProc' = [hostCoordinatorProc EXCEPT ![d] = "Absent"]
	next.RuntimeSupervisorProc[d] = ProcessAbsent // runtimeSupervisorProc' = [runtimeSupervisorProc EXCEPT ![d] = "Absent"]
	next.AttachedRunscProc[d] = ProcessAbsent     // attachedRunscProc' = [attachedRunscProc EXCEPT ![d] = "Absent"]
	next.RuntimeCausalEdge[d] = Unarmed           // runtimeCausalEdge' = [runtimeCausalEdge EXCEPT ![d] = "Unarmed"]
	// UNCHANGED << stateAnchorState, sidecarState, sandboxState, published,
	//   registered, connected, sessionPhase, terminalRoute, connectionState,
	//   activeRequest, requestPhase, approvalSource, approvedCommand,
	//   hostRunning, runtimeFaultsRemaining >>
	return next, true
}
