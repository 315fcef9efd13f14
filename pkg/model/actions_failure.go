package model

// Failure and recovery: Lazaret.tla lines 894-1204. The conventions are
// those of actions_lifecycle.go.
//
// FailDomain and the three HardLose actions share a block of conjuncts
// (domainPhase' through hostRunning'); the spec writes it out in each
// action, and so does this file, so that an edit to one of them in the
// spec has exactly one place to go here.

// FailDomain is FailDomain(d), lines 898-933.
func (m *Model) FailDomain(st State, d Domain) (State, bool) {
	// domainPhase[d] \in {"Starting", "Ready", "Stopping"}
	switch st.DomainPhase[d] {
	case DomainStarting, DomainReady, DomainStopping:
	default:
		return State{}, false
	}
	next := st
	next.DomainPhase[d] = DomainFailed           // domainPhase' = [domainPhase EXCEPT ![d] = "Failed"]
	next.CoordinatorState[d] = CoordinatorFailed // coordinatorState' = [coordinatorState EXCEPT ![d] = "Failed"]
	next.TrustReady[d] = false                   // trustReady' = [trustReady EXCEPT ![d] = FALSE]
	next.LockOwner[d] = NoSession                // lockOwner' = [lockOwner EXCEPT ![d] = NoSession]
	next.Published = st.Published.Without(d)     // published' = published \ {d}
	next.Registered[d] = 0                       // registered' = [registered EXCEPT ![d] = {}]
	next.Connected[d] = 0                        // connected' = [connected EXCEPT ![d] = {}]
	for s := range Session(NumSessions) {
		// sessionPhase' = [s \in Sessions |->
		//     IF Dom(s) = d /\ sessionPhase[s] \notin {"New", "Closed"}
		//     THEN "Failed" ELSE sessionPhase[s]]
		if m.Dom(s) == d && st.SessionPhase[s] != SessionNew && st.SessionPhase[s] != SessionClosed {
			next.SessionPhase[s] = SessionFailed
		} else {
			next.SessionPhase[s] = st.SessionPhase[s]
		}
		// terminalRoute' = [s \in Sessions |->
		//     IF Dom(s) = d THEN "Detached" ELSE terminalRoute[s]]
		// connectionState' = [s \in Sessions |->
		//     IF Dom(s) = d THEN "Disconnected" ELSE connectionState[s]]
		// activeRequest' = [s \in Sessions |->
		//     IF Dom(s) = d THEN NoRequest ELSE activeRequest[s]]
		if m.Dom(s) == d {
			next.TerminalRoute[s] = RouteDetached
			next.ConnectionState[s] = Disconnected
			next.ActiveRequest[s] = NoRequest
		} else {
			next.TerminalRoute[s] = st.TerminalRoute[s]
			next.ConnectionState[s] = st.ConnectionState[s]
			next.ActiveRequest[s] = st.ActiveRequest[s]
		}
	}
	for r := range Request(NumRequests) {
		// requestPhase' = [r \in Requests |->
		//     IF ReqDomain(r) = d /\ requestPhase[r] # "Unused"
		//        /\ ~IsTerminalRequest(r)
		//     THEN "Failed" ELSE requestPhase[r]]
		if m.ReqDomain(r) == d && st.RequestPhase[r] != RequestUnused && !IsTerminalRequest(&st, r) {
			next.RequestPhase[r] = RequestFailed
		} else {
			next.RequestPhase[r] = st.RequestPhase[r]
		}
	}
	next.HostRunning = st.HostRunning &^ m.RequestsForDomain(d) // hostRunning' = hostRunning \ RequestsForDomain(d)
	// UNCHANGED << stateAnchorState, sidecarState, sandboxState,
	//   approvalSource, approvedCommand, domainLockHeld, hostCoordinatorProc,
	//   runtimeSupervisorProc, attachedRunscProc, runtimeCausalEdge,
	//   runtimeFaultsRemaining >>
	return next, true
}

// HardLoseHostCoordinator is HardLoseHostCoordinator(d), lines 935-972.
func (m *Model) HardLoseHostCoordinator(st State, d Domain) (State, bool) {
	// domainPhase[d] \in {"Starting", "Ready", "Stopping"}
	switch st.DomainPhase[d] {
	case DomainStarting, DomainReady, DomainStopping:
	default:
		return State{}, false
	}
	if !ProcessPresent(st.HostCoordinatorProc[d]) { // ProcessPresent(hostCoordinatorProc[d])
		return State{}, false
	}
	next := st
	if !consumeRuntimeFault(&st, &next, d) { // ConsumeRuntimeFault(d)
		return State{}, false
	}
	next.DomainPhase[d] = DomainFailed           // domainPhase' = [domainPhase EXCEPT ![d] = "Failed"]
	next.CoordinatorState[d] = CoordinatorFailed // coordinatorState' = [coordinatorState EXCEPT ![d] = "Failed"]
	next.TrustReady[d] = false                   // trustReady' = [trustReady EXCEPT ![d] = FALSE]
	next.LockOwner[d] = NoSession                // lockOwner' = [lockOwner EXCEPT ![d] = NoSession]
	next.Published = st.Published.Without(d)     // published' = published \ {d}
	next.Registered[d] = 0                       // registered' = [registered EXCEPT ![d] = {}]
	next.Connected[d] = 0                        // connected' = [connected EXCEPT ![d] = {}]
	for s := range Session(NumSessions) {
		// sessionPhase' = [s \in Sessions |->
		//     IF Dom(s) = d /\ sessionPhase[s] \notin {"New", "Closed"}
		//     THEN "Failed" ELSE sessionPhase[s]]
		if m.Dom(s) == d && st.SessionPhase[s] != SessionNew && st.SessionPhase[s] != SessionClosed {
			next.SessionPhase[s] = SessionFailed
		} else {
			next.SessionPhase[s] = st.SessionPhase[s]
		}
		// terminalRoute' = [s \in Sessions |->
		//     IF Dom(s) = d THEN "Detached" ELSE terminalRoute[s]]
		// connectionState' = [s \in Sessions |->
		//     IF Dom(s) = d THEN "Disconnected" ELSE connectionState[s]]
		// activeRequest' = [s \in Sessions |->
		//     IF Dom(s) = d THEN NoRequest ELSE activeRequest[s]]
		if m.Dom(s) == d {
			next.TerminalRoute[s] = RouteDetached
			next.ConnectionState[s] = Disconnected
			next.ActiveRequest[s] = NoRequest
		} else {
			next.TerminalRoute[s] = st.TerminalRoute[s]
			next.ConnectionState[s] = st.ConnectionState[s]
			next.ActiveRequest[s] = st.ActiveRequest[s]
		}
	}
	for r := range Request(NumRequests) {
		// requestPhase' = [r \in Requests |->
		//     IF ReqDomain(r) = d /\ requestPhase[r] # "Unused"
		//        /\ ~IsTerminalRequest(r)
		//     THEN "Failed" ELSE requestPhase[r]]
		if m.ReqDomain(r) == d && st.RequestPhase[r] != RequestUnused && !IsTerminalRequest(&st, r) {
			next.RequestPhase[r] = RequestFailed
		} else {
			next.RequestPhase[r] = st.RequestPhase[r]
		}
	}
	next.HostRunning = st.HostRunning &^ m.RequestsForDomain(d) // hostRunning' = hostRunning \ RequestsForDomain(d)
	next.HostCoordinatorProc[d] = ProcessDead                   // hostCoordinatorProc' = [hostCoordinatorProc EXCEPT ![d] = "Dead"]
	// UNCHANGED << stateAnchorState, sidecarState, sandboxState,
	//   approvalSource, approvedCommand, domainLockHeld,
	//   runtimeSupervisorProc, attachedRunscProc, runtimeCausalEdge >>
	return next, true
}

// HardLoseRuntimeSupervisor is HardLoseRuntimeSupervisor(d), lines
// 974-1016.
func (m *Model) HardLoseRuntimeSupervisor(st State, d Domain) (State, bool) {
	// domainPhase[d] \in {"Starting", "Ready", "Stopping", "Failed"}
	switch st.DomainPhase[d] {
	case DomainStarting, DomainReady, DomainStopping, DomainFailed:
	default:
		return State{}, false
	}
	if !ProcessPresent(st.RuntimeSupervisorProc[d]) { // ProcessPresent(runtimeSupervisorProc[d])
		return State{}, false
	}
	next := st
	if !consumeRuntimeFault(&st, &next, d) { // ConsumeRuntimeFault(d)
		return State{}, false
	}
	next.DomainPhase[d] = DomainFailed           // domainPhase' = [domainPhase EXCEPT ![d] = "Failed"]
	next.CoordinatorState[d] = CoordinatorFailed // coordinatorState' = [coordinatorState EXCEPT ![d] = "Failed"]
	next.TrustReady[d] = false                   // trustReady' = [trustReady EXCEPT ![d] = FALSE]
	next.LockOwner[d] = NoSession                // lockOwner' = [lockOwner EXCEPT ![d] = NoSession]
	next.Published = st.Published.Without(d)     // published' = published \ {d}
	next.Registered[d] = 0                       // registered' = [registered EXCEPT ![d] = {}]
	next.Connected[d] = 0                        // connected' = [connected EXCEPT ![d] = {}]
	for s := range Session(NumSessions) {
		// sessionPhase' = [s \in Sessions |->
		//     IF Dom(s) = d /\ sessionPhase[s] \notin {"New", "Closed"}
		//     THEN "Failed" ELSE sessionPhase[s]]
		if m.Dom(s) == d && st.SessionPhase[s] != SessionNew && st.SessionPhase[s] != SessionClosed {
			next.SessionPhase[s] = SessionFailed
		} else {
			next.SessionPhase[s] = st.SessionPhase[s]
		}
		// terminalRoute' = [s \in Sessions |->
		//     IF Dom(s) = d THEN "Detached" ELSE terminalRoute[s]]
		// connectionState' = [s \in Sessions |->
		//     IF Dom(s) = d THEN "Disconnected" ELSE connectionState[s]]
		// activeRequest' = [s \in Sessions |->
		//     IF Dom(s) = d THEN NoRequest ELSE activeRequest[s]]
		if m.Dom(s) == d {
			next.TerminalRoute[s] = RouteDetached
			next.ConnectionState[s] = Disconnected
			next.ActiveRequest[s] = NoRequest
		} else {
			next.TerminalRoute[s] = st.TerminalRoute[s]
			next.ConnectionState[s] = st.ConnectionState[s]
			next.ActiveRequest[s] = st.ActiveRequest[s]
		}
	}
	for r := range Request(NumRequests) {
		// requestPhase' = [r \in Requests |->
		//     IF ReqDomain(r) = d /\ requestPhase[r] # "Unused"
		//        /\ ~IsTerminalRequest(r)
		//     THEN "Failed" ELSE requestPhase[r]]
		if m.ReqDomain(r) == d && st.RequestPhase[r] != RequestUnused && !IsTerminalRequest(&st, r) {
			next.RequestPhase[r] = RequestFailed
		} else {
			next.RequestPhase[r] = st.RequestPhase[r]
		}
	}
	next.HostRunning = st.HostRunning &^ m.RequestsForDomain(d) // hostRunning' = hostRunning \ RequestsForDomain(d)
	next.RuntimeSupervisorProc[d] = ProcessDead                 // runtimeSupervisorProc' = [runtimeSupervisorProc EXCEPT ![d] = "Dead"]
	// attachedRunscProc' = [attachedRunscProc EXCEPT ![d] =
	//     IF runtimeCausalEdge[d] = "Armed" THEN "Dead" ELSE @]
	if st.RuntimeCausalEdge[d] == Armed {
		next.AttachedRunscProc[d] = ProcessDead
	}
	// sandboxState' = [sandboxState EXCEPT ![d] =
	//     IF runtimeCausalEdge[d] = "Armed" THEN "Stopped" ELSE @]
	if st.RuntimeCausalEdge[d] == Armed {
		next.SandboxState[d] = ResourceStopped
	}
	next.RuntimeCausalEdge[d] = Unarmed // runtimeCausalEdge' = [runtimeCausalEdge EXCEPT ![d] = "Unarmed"]
	// UNCHANGED << stateAnchorState, sidecarState, approvalSource,
	//   approvedCommand, domainLockHeld, hostCoordinatorProc >>
	return next, true
}

// HardLoseAttachedRunsc is HardLoseAttachedRunsc(d), lines 1018-1056.
func (m *Model) HardLoseAttachedRunsc(st State, d Domain) (State, bool) {
	// domainPhase[d] \in {"Starting", "Ready", "Stopping", "Failed"}
	switch st.DomainPhase[d] {
	case DomainStarting, DomainReady, DomainStopping, DomainFailed:
	default:
		return State{}, false
	}
	if !ProcessPresent(st.AttachedRunscProc[d]) { // ProcessPresent(attachedRunscProc[d])
		return State{}, false
	}
	next := st
	if !consumeRuntimeFault(&st, &next, d) { // ConsumeRuntimeFault(d)
		return State{}, false
	}
	next.DomainPhase[d] = DomainFailed           // domainPhase' = [domainPhase EXCEPT ![d] = "Failed"]
	next.CoordinatorState[d] = CoordinatorFailed // coordinatorState' = [coordinatorState EXCEPT ![d] = "Failed"]
	next.TrustReady[d] = false                   // trustReady' = [trustReady EXCEPT ![d] = FALSE]
	next.LockOwner[d] = NoSession                // lockOwner' = [lockOwner EXCEPT ![d] = NoSession]
	next.Published = st.Published.Without(d)     // published' = published \ {d}
	next.Registered[d] = 0                       // registered' = [registered EXCEPT ![d] = {}]
	next.Connected[d] = 0                        // connected' = [connected EXCEPT ![d] = {}]
	for s := range Session(NumSessions) {
		// sessionPhase' = [s \in Sessions |->
		//     IF Dom(s) = d /\ sessionPhase[s] \notin {"New", "Closed"}
		//     THEN "Failed" ELSE sessionPhase[s]]
		if m.Dom(s) == d && st.SessionPhase[s] != SessionNew && st.SessionPhase[s] != SessionClosed {
			next.SessionPhase[s] = SessionFailed
		} else {
			next.SessionPhase[s] = st.SessionPhase[s]
		}
		// terminalRoute' = [s \in Sessions |->
		//     IF Dom(s) = d THEN "Detached" ELSE terminalRoute[s]]
		// connectionState' = [s \in Sessions |->
		//     IF Dom(s) = d THEN "Disconnected" ELSE connectionState[s]]
		// activeRequest' = [s \in Sessions |->
		//     IF Dom(s) = d THEN NoRequest ELSE activeRequest[s]]
		if m.Dom(s) == d {
			next.TerminalRoute[s] = RouteDetached
			next.ConnectionState[s] = Disconnected
			next.ActiveRequest[s] = NoRequest
		} else {
			next.TerminalRoute[s] = st.TerminalRoute[s]
			next.ConnectionState[s] = st.ConnectionState[s]
			next.ActiveRequest[s] = st.ActiveRequest[s]
		}
	}
	for r := range Request(NumRequests) {
		// requestPhase' = [r \in Requests |->
		//     IF ReqDomain(r) = d /\ requestPhase[r] # "Unused"
		//        /\ ~IsTerminalRequest(r)
		//     THEN "Failed" ELSE requestPhase[r]]
		if m.ReqDomain(r) == d && st.RequestPhase[r] != RequestUnused && !IsTerminalRequest(&st, r) {
			next.RequestPhase[r] = RequestFailed
		} else {
			next.RequestPhase[r] = st.RequestPhase[r]
		}
	}
	next.HostRunning = st.HostRunning &^ m.RequestsForDomain(d) // hostRunning' = hostRunning \ RequestsForDomain(d)
	next.AttachedRunscProc[d] = ProcessDead                     // attachedRunscProc' = [attachedRunscProc EXCEPT ![d] = "Dead"]
	next.SandboxState[d] = ResourceStopped                      // sandboxState' = [sandboxState EXCEPT ![d] = "Stopped"]
	next.RuntimeCausalEdge[d] = Unarmed                         // runtimeCausalEdge' = [runtimeCausalEdge EXCEPT ![d] = "Unarmed"]
	// UNCHANGED << stateAnchorState, sidecarState, approvalSource,
	//   approvedCommand, domainLockHeld, hostCoordinatorProc,
	//   runtimeSupervisorProc >>
	return next, true
}

// StopHostCoordinatorProcess is StopHostCoordinatorProcess(d), lines
// 1058-1069.
func (m *Model) StopHostCoordinatorProcess(st State, d Domain) (State, bool) {
	// domainPhase[d] \in {"Starting", "Ready", "Stopping", "Failed"}
	switch st.DomainPhase[d] {
	case DomainStarting, DomainReady, DomainStopping, DomainFailed:
	default:
		return State{}, false
	}
	if st.HostCoordinatorProc[d] != ProcessAlive { // hostCoordinatorProc[d] = "Alive"
		return State{}, false
	}
	next := st
	if !consumeRuntimeFault(&st, &next, d) { // ConsumeRuntimeFault(d)
		return State{}, false
	}
	next.HostCoordinatorProc[d] = ProcessStopped // hostCoordinatorProc' = [hostCoordinatorProc EXCEPT ![d] = "Stopped"]
	// UNCHANGED every other variable.
	return next, true
}

// ResumeHostCoordinatorProcess is ResumeHostCoordinatorProcess(d), lines
// 1071-1080.
func (m *Model) ResumeHostCoordinatorProcess(st State, d Domain) (State, bool) {
	if st.HostCoordinatorProc[d] != ProcessStopped { // hostCoordinatorProc[d] = "Stopped"
		return State{}, false
	}
	next := st
	next.HostCoordinatorProc[d] = ProcessAlive // hostCoordinatorProc' = [hostCoordinatorProc EXCEPT ![d] = "Alive"]
	// UNCHANGED every other variable.
	return next, true
}

// StopRuntimeSupervisorProcess is StopRuntimeSupervisorProcess(d), lines
// 1082-1092. Unlike StopHostCoordinatorProcess it has no domainPhase guard.
func (m *Model) StopRuntimeSupervisorProcess(st State, d Domain) (State, bool) {
	if st.RuntimeSupervisorProc[d] != ProcessAlive { // runtimeSupervisorProc[d] = "Alive"
		return State{}, false
	}
	next := st
	if !consumeRuntimeFault(&st, &next, d) { // ConsumeRuntimeFault(d)
		return State{}, false
	}
	next.RuntimeSupervisorProc[d] = ProcessStopped // runtimeSupervisorProc' = [runtimeSupervisorProc EXCEPT ![d] = "Stopped"]
	// UNCHANGED every other variable.
	return next, true
}

// ResumeRuntimeSupervisorProcess is ResumeRuntimeSupervisorProcess(d),
// lines 1094-1103.
func (m *Model) ResumeRuntimeSupervisorProcess(st State, d Domain) (State, bool) {
	if st.RuntimeSupervisorProc[d] != ProcessStopped { // runtimeSupervisorProc[d] = "Stopped"
		return State{}, false
	}
	next := st
	next.RuntimeSupervisorProc[d] = ProcessAlive // runtimeSupervisorProc' = [runtimeSupervisorProc EXCEPT ![d] = "Alive"]
	// UNCHANGED every other variable.
	return next, true
}

// StopAttachedRunscProcess is StopAttachedRunscProcess(d), lines
// 1105-1115. It has no domainPhase guard.
func (m *Model) StopAttachedRunscProcess(st State, d Domain) (State, bool) {
	if st.AttachedRunscProc[d] != ProcessAlive { // attachedRunscProc[d] = "Alive"
		return State{}, false
	}
	next := st
	if !consumeRuntimeFault(&st, &next, d) { // ConsumeRuntimeFault(d)
		return State{}, false
	}
	next.AttachedRunscProc[d] = ProcessStopped // attachedRunscProc' = [attachedRunscProc EXCEPT ![d] = "Stopped"]
	// UNCHANGED every other variable.
	return next, true
}

// ResumeAttachedRunscProcess is ResumeAttachedRunscProcess(d), lines
// 1117-1126.
func (m *Model) ResumeAttachedRunscProcess(st State, d Domain) (State, bool) {
	if st.AttachedRunscProc[d] != ProcessStopped { // attachedRunscProc[d] = "Stopped"
		return State{}, false
	}
	next := st
	next.AttachedRunscProc[d] = ProcessAlive // attachedRunscProc' = [attachedRunscProc EXCEPT ![d] = "Alive"]
	// UNCHANGED every other variable.
	return next, true
}

// BeginRecovery is BeginRecovery(d), lines 1128-1142.
func (m *Model) BeginRecovery(st State, d Domain) (State, bool) {
	if st.DomainPhase[d] != DomainFailed { // domainPhase[d] = "Failed"
		return State{}, false
	}
	if st.Registered[d] != 0 { // registered[d] = {}
		return State{}, false
	}
	if st.Connected[d] != 0 { // connected[d] = {}
		return State{}, false
	}
	if st.HostRunning&m.RequestsForDomain(d) != 0 { // hostRunning \cap RequestsForDomain(d) = {}
		return State{}, false
	}
	next := st
	next.DomainPhase[d] = DomainRecovering         // domainPhase' = [domainPhase EXCEPT ![d] = "Recovering"]
	next.CoordinatorState[d] = CoordinatorStopping // coordinatorState' = [coordinatorState EXCEPT ![d] = "Stopping"]
	next.DomainLockHeld[d] = true                  // domainLockHeld' = [domainLockHeld EXCEPT ![d] = TRUE]
	next.HostCoordinatorProc[d] = ProcessAlive     // hostCoordinatorProc' = [hostCoordinatorProc EXCEPT ![d] = "Alive"]
	// UNCHANGED << stateAnchorState, sidecarState, sandboxState, trustReady,
	//   lockOwner, published, registered, connected, sessionPhase,
	//   terminalRoute, connectionState, activeRequest, requestPhase,
	//   approvalSource, approvedCommand, hostRunning, runtimeSupervisorProc,
	//   attachedRunscProc, runtimeCausalEdge, runtimeFaultsRemaining >>
	return next, true
}

// RecoverSandbox is RecoverSandbox(d), lines 1144-1156.
func (m *Model) RecoverSandbox(st State, d Domain) (State, bool) {
	if st.DomainPhase[d] != DomainRecovering { // domainPhase[d] = "Recovering"
		return State{}, false
	}
	if st.SandboxState[d] == ResourceStopped { // sandboxState[d] # "Stopped"
		return State{}, false
	}
	next := st
	next.SandboxState[d] = ResourceStopped  // sandboxState' = [sandboxState EXCEPT ![d] = "Stopped"]
	next.AttachedRunscProc[d] = ProcessDead // attachedRunscProc' = [attachedRunscProc EXCEPT ![d] = "Dead"]
	next.RuntimeCausalEdge[d] = Unarmed     // runtimeCausalEdge' = [runtimeCausalEdge EXCEPT ![d] = "Unarmed"]
	// UNCHANGED every other variable.
	return next, true
}

// RecoverSidecar is RecoverSidecar(d), lines 1158-1170.
func (m *Model) RecoverSidecar(st State, d Domain) (State, bool) {
	if st.DomainPhase[d] != DomainRecovering { // domainPhase[d] = "Recovering"
		return State{}, false
	}
	if st.SandboxState[d] != ResourceStopped { // sandboxState[d] = "Stopped"
		return State{}, false
	}
	if st.SidecarState[d] == ResourceStopped { // sidecarState[d] # "Stopped"
		return State{}, false
	}
	next := st
	next.SidecarState[d] = ResourceStopped // sidecarState' = [sidecarState EXCEPT ![d] = "Stopped"]
	// UNCHANGED every other variable.
	return next, true
}

// RecoverStateAnchor is RecoverStateAnchor(d), lines 1172-1184.
func (m *Model) RecoverStateAnchor(st State, d Domain) (State, bool) {
	if st.DomainPhase[d] != DomainRecovering { // domainPhase[d] = "Recovering"
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

// FinishRecovery is FinishRecovery(d), lines 1186-1204.
func (m *Model) FinishRecovery(st State, d Domain) (State, bool) {
	if st.DomainPhase[d] != DomainRecovering { // domainPhase[d] = "Recovering"
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
	next.LockOwner[d] = NoSession                 // lockOwner' = [lockOwner EXCEPT ![d] = NoSession]
	next.TrustReady[d] = false                    // trustReady' = [trustReady EXCEPT ![d] = FALSE]
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
