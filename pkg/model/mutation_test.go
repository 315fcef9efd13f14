package model

import (
	"errors"
	"strings"
	"testing"
)

// Mutation tests: each case breaks one action (or one constant) the way an
// implementation might get it wrong, and the checker must report the
// invariant that forbids it, with a valid shortest trace.

// variantR3Verifiable is Lazaret.cfg's fixture with R3's sandbox identity
// corrected to "sandbox-1". Under Lazaret.cfg, R3 (the only request whose
// command needs a shell) carries "sandbox-other", so ReceiveEscalation(R3)
// is never enabled and no auto-approval of a shell command can be reached
// at all; this variant makes that path reachable.
func variantR3Verifiable() *Fixture {
	f := CfgFixture()
	f.RequestSandboxIdentity[R3] = "sandbox-1"
	return &f
}

type mutant struct {
	name      string
	fixture   *Fixture
	overrides map[string]ActionFunc
	want      string // the invariant that must catch it
}

func mutants() []mutant {
	return []mutant{
		{
			name: "PublishDomain before the network is ready",
			overrides: map[string]ActionFunc{"PublishDomain": func(m *Model, st State, a Args) (State, bool) {
				// Drop the guards sidecarState[d] = "Ready" and
				// sandboxState[d] = "Ready": evaluate the real action on a
				// copy where they hold, then keep st's values.
				d := a.Domain
				relaxed := st
				relaxed.SidecarState[d], relaxed.SandboxState[d] = ResourceReady, ResourceReady
				next, ok := m.PublishDomain(relaxed, d)
				next.SidecarState[d], next.SandboxState[d] = st.SidecarState[d], st.SandboxState[d]
				return next, ok
			}},
			want: "PublishedDomainsReady",
		},
		{
			name:    "AutoApprove of a command that needs a shell",
			fixture: variantR3Verifiable(),
			overrides: map[string]ActionFunc{"AutoApprove": func(m *Model, st State, a Args) (State, bool) {
				r := a.Request
				if st.RequestPhase[r] != RequestVerified || !m.f.AutoRuleMatches[r] {
					return State{}, false
				}
				next := st
				next.RequestPhase[r] = RequestApproved
				next.ApprovalSource[r] = ApprovalAutoRule
				next.ApprovedCommand[r] = m.f.RequestCommand[r]
				return next, true
			}},
			want: "AutoApprovalNoShell",
		},
		{
			name: "StartHostExecution without approval",
			overrides: map[string]ActionFunc{"StartHostExecution": func(m *Model, st State, a Args) (State, bool) {
				r := a.Request
				switch st.RequestPhase[r] {
				case RequestVerified, RequestAwaitingApproval:
					// Treat a not yet approved request as approved for its
					// own command, and leave approvalSource and
					// approvedCommand as they were.
					relaxed := st
					relaxed.RequestPhase[r] = RequestApproved
					relaxed.ApprovedCommand[r] = m.f.RequestCommand[r]
					next, ok := m.StartHostExecution(relaxed, r)
					next.ApprovedCommand[r] = st.ApprovedCommand[r]
					return next, ok
				}
				return m.StartHostExecution(st, r)
			}},
			want: "HostExecutionAuthorized",
		},
		{
			name: "StartSandbox before the sidecar, supervisor and causal edge",
			overrides: map[string]ActionFunc{"StartSandbox": func(m *Model, st State, a Args) (State, bool) {
				d := a.Domain
				if st.DomainPhase[d] != DomainStarting || st.HostCoordinatorProc[d] != ProcessAlive ||
					st.SandboxState[d] != ResourceStopped || st.AttachedRunscProc[d] != ProcessAbsent {
					return State{}, false
				}
				next := st
				next.SandboxState[d] = ResourceReady
				next.AttachedRunscProc[d] = ProcessAlive
				return next, true
			}},
			want: "OrderedNetworkStartup",
		},
		{
			name: "StopRuntimeSupervisorProcess without a fault budget",
			overrides: map[string]ActionFunc{"StopRuntimeSupervisorProcess": func(m *Model, st State, a Args) (State, bool) {
				d := a.Domain
				if st.RuntimeSupervisorProc[d] != ProcessAlive {
					return State{}, false
				}
				next := st
				next.RuntimeFaultsRemaining[d] = st.RuntimeFaultsRemaining[d] - 1 // wraps below 0
				next.RuntimeSupervisorProc[d] = ProcessStopped
				return next, true
			}},
			want: "TypeOK",
		},
		{
			name: "FailDomain that keeps sessions registered",
			overrides: map[string]ActionFunc{"FailDomain": func(m *Model, st State, a Args) (State, bool) {
				next, ok := m.FailDomain(st, a.Domain)
				next.Registered[a.Domain] = st.Registered[a.Domain]
				return next, ok
			}},
			want: "TeardownNotJoinable",
		},
		{
			name: "DisconnectSession that leaves the host process running",
			overrides: map[string]ActionFunc{"DisconnectSession": func(m *Model, st State, a Args) (State, bool) {
				next, ok := m.DisconnectSession(st, a.Session)
				next.HostRunning = st.HostRunning
				return next, ok
			}},
			// The cancelled request still runs: it is no longer Executing.
			want: "HostExecutionAuthorized",
		},
		{
			name: "sidecar sharing the coordinator's identity",
			fixture: func() *Fixture {
				f := CfgFixture()
				f.DomainSidecarIdentity[D1] = "coordinator-1"
				return &f
			}(),
			want: "RuntimeRoleIdentitySeparation",
		},
	}
}

func TestMutantsCaught(t *testing.T) {
	for _, mu := range mutants() {
		t.Run(mu.name, func(t *testing.T) {
			res, err := Check(Config{Fixture: mu.fixture, Overrides: mu.overrides})
			var v *Violation
			if !errors.As(err, &v) {
				t.Fatalf("Check = %+v, %v; want a violation of %s", res, err, mu.want)
			}
			if v.Invariant != mu.want {
				t.Fatalf("violated %s, want %s\n%s", v.Invariant, mu.want, v.Format())
			}
			t.Logf("%v (%d states explored)", v, res.States)
			if testing.Verbose() {
				t.Log("\n" + v.Format())
			}
			checkTrace(t, mu, v)
			// Shortest: no violation within one step fewer.
			if steps := len(v.Trace) - 1; steps > 0 {
				if _, err := Check(Config{Fixture: mu.fixture, Overrides: mu.overrides, MaxDepth: steps - 1}); err != nil {
					t.Errorf("a violation within %d steps exists, so the %d-step trace is not shortest: %v",
						steps-1, steps, err)
				}
			}
		})
	}
}

// checkTrace replays v's trace against the mutated model: it must start in
// Init, each step must be an enabled instance of Next producing the next
// state, only the last state may violate an invariant, and it must
// violate v.Invariant.
func checkTrace(t *testing.T, mu mutant, v *Violation) {
	t.Helper()
	f := CfgFixture()
	if mu.fixture != nil {
		f = *mu.fixture
	}
	m, err := New(f)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if len(v.Trace) == 0 || v.Trace[0].Step != "Init" || v.Trace[0].State != m.Init()[0] {
		t.Fatalf("trace does not start in Init")
	}
	for i := 1; i < len(v.Trace); i++ {
		prev, cur := v.Trace[i-1].State, v.Trace[i]
		found := false
		for n, in := range instances {
			if instanceString(n) != cur.Step {
				continue
			}
			fn := nextActions[in.action].fn
			if o, ok := mu.overrides[nextActions[in.action].Name]; ok {
				fn = o
			}
			next, ok := fn(m, prev, in.args)
			if ok && next == cur.State {
				found = true
			}
		}
		if !found {
			t.Fatalf("trace step %d, %s, does not lead from state %d to state %d", i, cur.Step, i, i+1)
		}
	}
	for i, ts := range v.Trace {
		name, bad := m.Violated(&ts.State)
		switch {
		case i < len(v.Trace)-1 && bad:
			t.Fatalf("trace state %d already violates %s", i+1, name)
		case i == len(v.Trace)-1 && (!bad || name != v.Invariant):
			t.Fatalf("last trace state violates %q, want %s", name, v.Invariant)
		}
	}
}

// TestVariantFixtureHolds makes the AutoApprove mutant's detection
// meaningful: with R3 verifiable, the unmutated model satisfies every
// invariant, and R3's shell command goes to the developer prompt.
func TestVariantFixtureHolds(t *testing.T) {
	if testing.Short() {
		t.Skip("explores about 477,000 states; skipped in -short mode")
	}
	res, err := Check(Config{Fixture: variantR3Verifiable()})
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	t.Logf("R3-verifiable variant: %d distinct states, depth %d, %v", res.States, res.Depth, res.Elapsed)
	if res.States <= fixtureStates {
		t.Errorf("variant has %d states, want more than Lazaret.cfg's %d", res.States, fixtureStates)
	}
}

func TestViolationFormat(t *testing.T) {
	mu := mutants()[0]
	_, err := Check(Config{Overrides: mu.overrides})
	var v *Violation
	if !errors.As(err, &v) {
		t.Fatalf("Check: %v", err)
	}
	out := v.Format()
	for _, want := range []string{
		"Error: Invariant PublishedDomainsReady is violated.\n",
		"State 1: <Init>\n/\\ domainPhase = (D1 :> \"Absent\")\n",
		"<PublishDomain(D1)>\n/\\ domainPhase = (D1 :> \"Ready\")\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("Format output lacks %q:\n%s", want, out)
		}
	}
}
