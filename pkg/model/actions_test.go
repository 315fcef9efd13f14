package model

import (
	"regexp"
	"strings"
	"testing"
)

var stepRE = regexp.MustCompile(`^(\w+)\(([^)]*)\)$`)

// walk applies steps, written as Step.String spells them, from Init and
// returns the state reached. Every step must be enabled.
func walk(t *testing.T, m *Model, steps ...string) State {
	t.Helper()
	st := m.Init()[0]
	for _, s := range steps {
		g := stepRE.FindStringSubmatch(s)
		if g == nil {
			t.Fatalf("step %q is not Action(args)", s)
		}
		var params []string
		for _, p := range strings.Split(g[2], ",") {
			if p = strings.TrimSpace(p); p != "" {
				params = append(params, p)
			}
		}
		next, ok := m.Apply(st, g[1], params...)
		if !ok {
			t.Fatalf("step %s is not enabled in\n%s", s, st)
		}
		st = next
	}
	return st
}

// Paths through the fixture used by the tests below.
var (
	toStarting = []string{"StartNewDomain(S1)"}
	toReady    = []string{
		"StartNewDomain(S1)", "MountStateAnchor(D1)", "CreateTrustAnchor(D1)",
		"StartSidecar(D1)", "StartRuntimeSupervisor(D1)", "ArmRuntimeCausalEdge(D1)",
		"StartSandbox(D1)", "PublishDomain(D1)",
	}
	toAttached     = append(append([]string(nil), toReady...), "AdvanceWaitingSession(S1)", "RegisterSession(S1)")
	toBothAttached = append(append([]string(nil), toAttached...),
		"StartReadySession(S2)", "RegisterSession(S2)")
)

func path(base []string, more ...string) []string {
	return append(append([]string(nil), base...), more...)
}

func TestActionEnabledness(t *testing.T) {
	m := Lazaret
	tests := []struct {
		name    string
		from    []string
		action  string
		params  []string
		enabled bool
	}{
		{"StartNewDomain from Init", nil, "StartNewDomain", []string{"S1"}, true},
		{"second StartNewDomain while Starting", toStarting, "StartNewDomain", []string{"S2"}, false},
		{"WaitForDomain on an Absent domain", nil, "WaitForDomain", []string{"S2"}, false},
		{"WaitForDomain while Starting", toStarting, "WaitForDomain", []string{"S2"}, true},
		{"StartReadySession before publication", toStarting, "StartReadySession", []string{"S2"}, false},
		{"StartReadySession once published", toReady, "StartReadySession", []string{"S2"}, true},
		{"StartSidecar before the trust anchor", path(toStarting, "MountStateAnchor(D1)"),
			"StartSidecar", []string{"D1"}, false},
		{"StartSidecar before the State Anchor", path(toStarting, "CreateTrustAnchor(D1)"),
			"StartSidecar", []string{"D1"}, false},
		{"StartSandbox before the causal edge", path(toReady[:5]), "StartSandbox", []string{"D1"}, false},
		{"PublishDomain before the sandbox", toReady[:6], "PublishDomain", []string{"D1"}, false},
		{"PublishDomain once the sandbox runs", toReady[:7], "PublishDomain", []string{"D1"}, true},
		{"PublishDomain with the coordinator stopped",
			path(toReady[:7], "StopHostCoordinatorProcess(D1)"), "PublishDomain", []string{"D1"}, false},
		{"RejectConfigurationMismatch with equal fingerprints", toReady,
			"RejectConfigurationMismatch", []string{"S2"}, false},
		{"BeginTeardown with an attached session", toAttached, "BeginTeardown", []string{"D1"}, false},
		{"BeginTeardown after the last session left", path(toAttached, "DisconnectSession(S1)"),
			"BeginTeardown", []string{"D1"}, true},
		{"ReceiveEscalation R1", toAttached, "ReceiveEscalation", []string{"R1"}, true},
		{"ReceiveEscalation R3 with a foreign sandbox identity", toAttached,
			"ReceiveEscalation", []string{"R3"}, false},
		{"ReceiveEscalation R2 before S2 registers", toAttached, "ReceiveEscalation", []string{"R2"}, false},
		{"AutoApprove R1", path(toAttached, "ReceiveEscalation(R1)"), "AutoApprove", []string{"R1"}, true},
		{"QueuePrompt R1 when the auto rule applies", path(toAttached, "ReceiveEscalation(R1)"),
			"QueuePrompt", []string{"R1"}, false},
		{"QueuePrompt R2", path(toBothAttached, "ReceiveEscalation(R2)"), "QueuePrompt", []string{"R2"}, true},
		{"AutoApprove R2 without a matching rule", path(toBothAttached, "ReceiveEscalation(R2)"),
			"AutoApprove", []string{"R2"}, false},
		{"DeveloperApprove R2 before the prompt", path(toBothAttached, "ReceiveEscalation(R2)", "QueuePrompt(R2)"),
			"DeveloperApprove", []string{"R2", "EditedCmd"}, false},
		{"DeveloperApprove R2 with the edited command",
			path(toBothAttached, "ReceiveEscalation(R2)", "QueuePrompt(R2)", "BeginPrompt(R2)"),
			"DeveloperApprove", []string{"R2", "EditedCmd"}, true},
		{"DeveloperApprove R2 with the requested command",
			path(toBothAttached, "ReceiveEscalation(R2)", "QueuePrompt(R2)", "BeginPrompt(R2)"),
			"DeveloperApprove", []string{"R2", "PromptCmd"}, false},
		{"StartHostExecution before approval", path(toAttached, "ReceiveEscalation(R1)"),
			"StartHostExecution", []string{"R1"}, false},
		{"StartHostExecution after AutoApprove", path(toAttached, "ReceiveEscalation(R1)", "AutoApprove(R1)"),
			"StartHostExecution", []string{"R1"}, true},
		{"DeliverResult while executing",
			path(toAttached, "ReceiveEscalation(R1)", "AutoApprove(R1)", "StartHostExecution(R1)"),
			"DeliverResult", []string{"R1"}, false},
		{"StopRuntimeSupervisorProcess while Recovering",
			path(toReady[:5], "FailDomain(D1)", "BeginRecovery(D1)"),
			"StopRuntimeSupervisorProcess", []string{"D1"}, true},
		{"StopHostCoordinatorProcess while Recovering",
			path(toReady[:5], "FailDomain(D1)", "BeginRecovery(D1)"),
			"StopHostCoordinatorProcess", []string{"D1"}, false},
		{"third runtime fault", path(toReady[:7], "StopAttachedRunscProcess(D1)", "StopRuntimeSupervisorProcess(D1)"),
			"StopHostCoordinatorProcess", []string{"D1"}, false},
		{"HardLoseHostCoordinator of a Failed domain", path(toReady, "FailDomain(D1)"),
			"HardLoseHostCoordinator", []string{"D1"}, false},
		{"HardLoseRuntimeSupervisor of a Failed domain", path(toReady, "FailDomain(D1)"),
			"HardLoseRuntimeSupervisor", []string{"D1"}, true},
		{"BeginRecovery of a Failed domain", path(toAttached, "FailDomain(D1)"), "BeginRecovery", []string{"D1"}, true},
		{"RecoverSidecar before the sandbox", path(toReady, "FailDomain(D1)", "BeginRecovery(D1)"),
			"RecoverSidecar", []string{"D1"}, false},
		{"unknown action", nil, "StartNewDomian", []string{"S1"}, false},
		{"wrong arity", nil, "StartNewDomain", nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := walk(t, m, tc.from...)
			_, ok := m.Apply(st, tc.action, tc.params...)
			if ok != tc.enabled {
				t.Errorf("%s(%s) enabled = %v, want %v in\n%s", tc.action, strings.Join(tc.params, ", "), ok, tc.enabled, st)
			}
		})
	}
}

func TestStartNewDomainEffect(t *testing.T) {
	st := walk(t, Lazaret, "StartNewDomain(S1)")
	want := initState()
	want.DomainPhase[D1] = DomainStarting
	want.CoordinatorState[D1] = CoordinatorStarting
	want.LockOwner[D1] = S1
	want.DomainLockHeld[D1] = true
	want.HostCoordinatorProc[D1] = ProcessAlive
	want.SessionPhase[S1] = SessionWaiting
	if st != want {
		t.Fatalf("after StartNewDomain(S1):\n%s\nwant:\n%s", st, want)
	}
}

func TestHostEscalationRoundTrip(t *testing.T) {
	st := walk(t, Lazaret, path(toAttached,
		"ReceiveEscalation(R1)", "AutoApprove(R1)", "StartHostExecution(R1)")...)
	if st.SessionPhase[S1] != SessionHostExecuting || st.TerminalRoute[S1] != RouteHostProcess ||
		!st.HostRunning.Has(R1) || st.ApprovalSource[R1] != ApprovalAutoRule || st.ApprovedCommand[R1] != ExactCmd {
		t.Fatalf("executing R1:\n%s", st)
	}
	st = walk(t, Lazaret, path(toAttached,
		"ReceiveEscalation(R1)", "AutoApprove(R1)", "StartHostExecution(R1)",
		"CompleteHostExecution(R1)", "DeliverResult(R1)")...)
	if st.RequestPhase[R1] != RequestCompleted || st.ActiveRequest[S1] != NoRequest ||
		st.HostRunning != 0 || st.SessionPhase[S1] != SessionAttached || st.TerminalRoute[S1] != RouteSandbox {
		t.Fatalf("after delivering R1:\n%s", st)
	}
}

func TestDisconnectSessionCancelsAndFailsLeader(t *testing.T) {
	// S1 leaves while executing R1: R1 is Cancelled and stops running.
	st := walk(t, Lazaret, path(toAttached,
		"ReceiveEscalation(R1)", "AutoApprove(R1)", "StartHostExecution(R1)", "DisconnectSession(S1)")...)
	if st.RequestPhase[R1] != RequestCancelled || st.HostRunning != 0 || st.SessionPhase[S1] != SessionClosed ||
		st.Registered[D1] != 0 || st.Connected[D1] != 0 || st.DomainPhase[D1] != DomainReady {
		t.Fatalf("after S1 left mid-execution:\n%s", st)
	}
	// The session that holds the start lock leaves: the generation fails.
	st = walk(t, Lazaret, "StartNewDomain(S1)", "DisconnectSession(S1)")
	if st.DomainPhase[D1] != DomainFailed || st.CoordinatorState[D1] != CoordinatorFailed ||
		st.LockOwner[D1] != NoSession || !st.DomainLockHeld[D1] {
		t.Fatalf("after the leader left:\n%s", st)
	}
}

func TestSuccessorsOfInit(t *testing.T) {
	steps := Successors(Init()[0])
	var got []string
	for _, s := range steps {
		got = append(got, s.String())
	}
	want := []string{"StartNewDomain(S1)", "StartNewDomain(S2)"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("Successors(Init) = %v, want %v", got, want)
	}
	if steps[1].Args.Session != S2 || steps[1].Next.LockOwner[D1] != S2 {
		t.Fatalf("StartNewDomain(S2) step: %+v", steps[1])
	}
}

func TestDeliveredResultPhase(t *testing.T) {
	for p := range numRequestPhases {
		got, ok := DeliveredResultPhase(p)
		if ok != p.IsPendingResult() {
			t.Errorf("DeliveredResultPhase(%v) defined = %v", p, ok)
		}
		if ok && (!got.IsTerminal() || strings.TrimSuffix(p.String(), "Pending") == p.String()) {
			t.Errorf("DeliveredResultPhase(%v) = %v", p, got)
		}
	}
}
