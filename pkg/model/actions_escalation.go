package model

// Host escalation protocol: Lazaret.tla lines 681-892. The conventions are
// those of actions_lifecycle.go.

// ReceiveEscalation is ReceiveEscalation(r), lines 685-708.
func (m *Model) ReceiveEscalation(st State, r Request) (State, bool) {
	s := m.ReqSession(r)                     // LET s == ReqSession(r)
	d := m.ReqDomain(r)                      //     d == ReqDomain(r)
	if st.RequestPhase[r] != RequestUnused { // requestPhase[r] = "Unused"
		return State{}, false
	}
	if st.SessionPhase[s] != SessionAttached { // sessionPhase[s] = "Attached"
		return State{}, false
	}
	if st.ActiveRequest[s] != NoRequest { // activeRequest[s] = NoRequest
		return State{}, false
	}
	if !st.Registered[d].Has(s) { // s \in registered[d]
		return State{}, false
	}
	if !st.Connected[d].Has(s) { // s \in connected[d]
		return State{}, false
	}
	if !m.RuntimeIdentityTupleReady(&st, d) { // RuntimeIdentityTupleReady(d)
		return State{}, false
	}
	if !m.SessionIdentityTupleRegistered(&st, s) { // SessionIdentityTupleRegistered(s)
		return State{}, false
	}
	if !m.RequestIdentityTupleMatches(r) { // RequestIdentityTupleMatches(r)
		return State{}, false
	}
	if !m.f.RequestCredentialValid[r] { // RequestCredentialValid[r]
		return State{}, false
	}
	if !m.f.RequestSignatureValid[r] { // RequestSignatureValid[r]
		return State{}, false
	}
	next := st
	next.RequestPhase[r] = RequestVerified // requestPhase' = [requestPhase EXCEPT ![r] = "Verified"]
	next.ActiveRequest[s] = r              // activeRequest' = [activeRequest EXCEPT ![s] = r]
	// UNCHANGED every other variable.
	return next, true
}

// AutoApprove is AutoApprove(r), lines 710-723.
func (m *Model) AutoApprove(st State, r Request) (State, bool) {
	if st.RequestPhase[r] != RequestVerified { // requestPhase[r] = "Verified"
		return State{}, false
	}
	if !m.f.AutoRuleMatches[r] { // AutoRuleMatches[r]
		return State{}, false
	}
	if m.f.CommandRequiresShell[m.f.RequestCommand[r]] { // ~CommandRequiresShell[RequestCommand[r]]
		return State{}, false
	}
	next := st
	next.RequestPhase[r] = RequestApproved          // requestPhase' = [requestPhase EXCEPT ![r] = "Approved"]
	next.ApprovalSource[r] = ApprovalAutoRule       // approvalSource' = [approvalSource EXCEPT ![r] = "AutoRule"]
	next.ApprovedCommand[r] = m.f.RequestCommand[r] // approvedCommand' = [approvedCommand EXCEPT ![r] = RequestCommand[r]]
	// UNCHANGED every other variable.
	return next, true
}

// QueuePrompt is QueuePrompt(r), lines 725-736.
func (m *Model) QueuePrompt(st State, r Request) (State, bool) {
	if st.RequestPhase[r] != RequestVerified { // requestPhase[r] = "Verified"
		return State{}, false
	}
	// ~(AutoRuleMatches[r] /\ ~CommandRequiresShell[RequestCommand[r]])
	if m.f.AutoRuleMatches[r] && !m.f.CommandRequiresShell[m.f.RequestCommand[r]] {
		return State{}, false
	}
	next := st
	next.RequestPhase[r] = RequestAwaitingApproval // requestPhase' = [requestPhase EXCEPT ![r] = "AwaitingApproval"]
	// UNCHANGED every other variable.
	return next, true
}

// BeginPrompt is BeginPrompt(r), lines 738-752.
func (m *Model) BeginPrompt(st State, r Request) (State, bool) {
	s := m.ReqSession(r)                               // LET s == ReqSession(r)
	if st.RequestPhase[r] != RequestAwaitingApproval { // requestPhase[r] = "AwaitingApproval"
		return State{}, false
	}
	if st.SessionPhase[s] != SessionAttached { // sessionPhase[s] = "Attached"
		return State{}, false
	}
	if st.ActiveRequest[s] != r { // activeRequest[s] = r
		return State{}, false
	}
	next := st
	next.SessionPhase[s] = SessionPrompting // sessionPhase' = [sessionPhase EXCEPT ![s] = "Prompting"]
	next.TerminalRoute[s] = RoutePrompt     // terminalRoute' = [terminalRoute EXCEPT ![s] = "Prompt"]
	// UNCHANGED every other variable.
	return next, true
}

// DeveloperApprove is DeveloperApprove(r, cmd), lines 754-770. Next binds
// cmd by \E cmd \in Commands (line 1252); cmd = NoCommand fails the
// cmd \in Commands conjunct.
func (m *Model) DeveloperApprove(st State, r Request, cmd Command) (State, bool) {
	s := m.ReqSession(r)                               // LET s == ReqSession(r)
	if st.RequestPhase[r] != RequestAwaitingApproval { // requestPhase[r] = "AwaitingApproval"
		return State{}, false
	}
	if st.SessionPhase[s] != SessionPrompting { // sessionPhase[s] = "Prompting"
		return State{}, false
	}
	if !m.ApprovalIdentityTupleMatches(r) { // ApprovalIdentityTupleMatches(r)
		return State{}, false
	}
	if !(cmd < NumCommands) { // cmd \in Commands
		return State{}, false
	}
	if cmd != m.f.ApprovalCommand[r] { // cmd = ApprovalCommand[r]
		return State{}, false
	}
	next := st
	next.RequestPhase[r] = RequestApproved     // requestPhase' = [requestPhase EXCEPT ![r] = "Approved"]
	next.ApprovalSource[r] = ApprovalDeveloper // approvalSource' = [approvalSource EXCEPT ![r] = "Developer"]
	next.ApprovedCommand[r] = cmd              // approvedCommand' = [approvedCommand EXCEPT ![r] = cmd]
	// UNCHANGED every other variable.
	return next, true
}

// DeveloperDeny is DeveloperDeny(r), lines 772-786.
func (m *Model) DeveloperDeny(st State, r Request) (State, bool) {
	s := m.ReqSession(r)                               // LET s == ReqSession(r)
	if st.RequestPhase[r] != RequestAwaitingApproval { // requestPhase[r] = "AwaitingApproval"
		return State{}, false
	}
	if st.SessionPhase[s] != SessionPrompting { // sessionPhase[s] = "Prompting"
		return State{}, false
	}
	if !m.ApprovalIdentityTupleMatches(r) { // ApprovalIdentityTupleMatches(r)
		return State{}, false
	}
	next := st
	next.RequestPhase[r] = RequestDenialPending // requestPhase' = [requestPhase EXCEPT ![r] = "DenialPending"]
	next.SessionPhase[s] = SessionAttached      // sessionPhase' = [sessionPhase EXCEPT ![s] = "Attached"]
	next.TerminalRoute[s] = RouteSandbox        // terminalRoute' = [terminalRoute EXCEPT ![s] = "Sandbox"]
	// UNCHANGED every other variable.
	return next, true
}

// StartHostExecution is StartHostExecution(r), lines 788-807.
func (m *Model) StartHostExecution(st State, r Request) (State, bool) {
	s := m.ReqSession(r)                       // LET s == ReqSession(r)
	d := m.ReqDomain(r)                        //     d == ReqDomain(r)
	if st.RequestPhase[r] != RequestApproved { // requestPhase[r] = "Approved"
		return State{}, false
	}
	if st.ActiveRequest[s] != r { // activeRequest[s] = r
		return State{}, false
	}
	if !st.Connected[d].Has(s) { // s \in connected[d]
		return State{}, false
	}
	// sessionPhase[s] \in {"Attached", "Prompting"}
	if st.SessionPhase[s] != SessionAttached && st.SessionPhase[s] != SessionPrompting {
		return State{}, false
	}
	// CommandContentSafe[approvedCommand[r]]. An Approved request always
	// carries a command in Commands (AutoApprove, DeveloperApprove); TLC
	// would stop with an error on CommandContentSafe[NoCommand], and this
	// transliteration treats it as a disabled guard, which
	// HostExecutionAuthorized would report if it were ever reached.
	if c := st.ApprovedCommand[r]; !(c < NumCommands && m.f.CommandContentSafe[c]) {
		return State{}, false
	}
	next := st
	next.RequestPhase[r] = RequestExecuting     // requestPhase' = [requestPhase EXCEPT ![r] = "Executing"]
	next.SessionPhase[s] = SessionHostExecuting // sessionPhase' = [sessionPhase EXCEPT ![s] = "HostExecuting"]
	next.TerminalRoute[s] = RouteHostProcess    // terminalRoute' = [terminalRoute EXCEPT ![s] = "HostProcess"]
	next.HostRunning = st.HostRunning.With(r)   // hostRunning' = hostRunning \cup {r}
	// UNCHANGED every other variable.
	return next, true
}

// CompleteHostExecution is CompleteHostExecution(r), lines 809-823.
func (m *Model) CompleteHostExecution(st State, r Request) (State, bool) {
	s := m.ReqSession(r)                        // LET s == ReqSession(r)
	if st.RequestPhase[r] != RequestExecuting { // requestPhase[r] = "Executing"
		return State{}, false
	}
	if !st.HostRunning.Has(r) { // r \in hostRunning
		return State{}, false
	}
	next := st
	next.RequestPhase[r] = RequestCompletionPending // requestPhase' = [requestPhase EXCEPT ![r] = "CompletionPending"]
	next.HostRunning = st.HostRunning.Without(r)    // hostRunning' = hostRunning \ {r}
	next.SessionPhase[s] = SessionAttached          // sessionPhase' = [sessionPhase EXCEPT ![s] = "Attached"]
	next.TerminalRoute[s] = RouteSandbox            // terminalRoute' = [terminalRoute EXCEPT ![s] = "Sandbox"]
	// UNCHANGED every other variable.
	return next, true
}

// TimeoutRequest is TimeoutRequest(r), lines 825-840.
func (m *Model) TimeoutRequest(st State, r Request) (State, bool) {
	s := m.ReqSession(r) // LET s == ReqSession(r)
	// requestPhase[r] \in {"Verified", "AwaitingApproval", "Approved", "Executing"}
	switch st.RequestPhase[r] {
	case RequestVerified, RequestAwaitingApproval, RequestApproved, RequestExecuting:
	default:
		return State{}, false
	}
	if st.ActiveRequest[s] != r { // activeRequest[s] = r
		return State{}, false
	}
	next := st
	next.RequestPhase[r] = RequestTimeoutPending // requestPhase' = [requestPhase EXCEPT ![r] = "TimeoutPending"]
	next.SessionPhase[s] = SessionAttached       // sessionPhase' = [sessionPhase EXCEPT ![s] = "Attached"]
	next.TerminalRoute[s] = RouteSandbox         // terminalRoute' = [terminalRoute EXCEPT ![s] = "Sandbox"]
	next.HostRunning = st.HostRunning.Without(r) // hostRunning' = hostRunning \ {r}
	// UNCHANGED every other variable.
	return next, true
}

// CancelRequest is CancelRequest(r), lines 842-858.
func (m *Model) CancelRequest(st State, r Request) (State, bool) {
	s := m.ReqSession(r) // LET s == ReqSession(r)
	// requestPhase[r] \in { "Verified", "AwaitingApproval", "Approved", "Executing" }
	switch st.RequestPhase[r] {
	case RequestVerified, RequestAwaitingApproval, RequestApproved, RequestExecuting:
	default:
		return State{}, false
	}
	if st.ActiveRequest[s] != r { // activeRequest[s] = r
		return State{}, false
	}
	if st.ConnectionState[s] != Connected { // connectionState[s] = "Connected"
		return State{}, false
	}
	next := st
	next.RequestPhase[r] = RequestCancellationPending // requestPhase' = [requestPhase EXCEPT ![r] = "CancellationPending"]
	next.SessionPhase[s] = SessionAttached            // sessionPhase' = [sessionPhase EXCEPT ![s] = "Attached"]
	next.TerminalRoute[s] = RouteSandbox              // terminalRoute' = [terminalRoute EXCEPT ![s] = "Sandbox"]
	next.HostRunning = st.HostRunning.Without(r)      // hostRunning' = hostRunning \ {r}
	// UNCHANGED every other variable.
	return next, true
}

// FailHostExecution is FailHostExecution(r), lines 860-875.
func (m *Model) FailHostExecution(st State, r Request) (State, bool) {
	s := m.ReqSession(r)                        // LET s == ReqSession(r)
	if st.RequestPhase[r] != RequestExecuting { // requestPhase[r] = "Executing"
		return State{}, false
	}
	if st.ActiveRequest[s] != r { // activeRequest[s] = r
		return State{}, false
	}
	if st.ConnectionState[s] != Connected { // connectionState[s] = "Connected"
		return State{}, false
	}
	next := st
	next.RequestPhase[r] = RequestFailurePending // requestPhase' = [requestPhase EXCEPT ![r] = "FailurePending"]
	next.SessionPhase[s] = SessionAttached       // sessionPhase' = [sessionPhase EXCEPT ![s] = "Attached"]
	next.TerminalRoute[s] = RouteSandbox         // terminalRoute' = [terminalRoute EXCEPT ![s] = "Sandbox"]
	next.HostRunning = st.HostRunning.Without(r) // hostRunning' = hostRunning \ {r}
	// UNCHANGED every other variable.
	return next, true
}

// DeliverResult is DeliverResult(r), lines 877-892.
func (m *Model) DeliverResult(st State, r Request) (State, bool) {
	s := m.ReqSession(r)                       // LET s == ReqSession(r)
	if !st.RequestPhase[r].IsPendingResult() { // requestPhase[r] \in PendingResultPhases
		return State{}, false
	}
	if st.ActiveRequest[s] != r { // activeRequest[s] = r
		return State{}, false
	}
	if st.ConnectionState[s] != Connected { // connectionState[s] = "Connected"
		return State{}, false
	}
	if st.SessionPhase[s] != SessionAttached { // sessionPhase[s] = "Attached"
		return State{}, false
	}
	next := st
	// requestPhase' = [requestPhase EXCEPT ![r] = DeliveredResultPhase(@)]
	// (total here: the first guard put @ in PendingResultPhases).
	next.RequestPhase[r], _ = DeliveredResultPhase(st.RequestPhase[r])
	next.ActiveRequest[s] = NoRequest // activeRequest' = [activeRequest EXCEPT ![s] = NoRequest]
	// UNCHANGED every other variable.
	return next, true
}
