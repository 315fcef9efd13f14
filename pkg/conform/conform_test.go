package conform

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"lazaret.dev/pkg/model"
	"lazaret.dev/pkg/trace"
)

// tb builds traces the way the Host Coordinator records them.
type tb struct{ evs []trace.Event }

func (b *tb) add(action, session, request string, facts ...string) *tb {
	ev := trace.Event{Action: action, Session: session, Request: request}
	for i := 0; i+1 < len(facts); i += 2 {
		if ev.Facts == nil {
			ev.Facts = map[string]string{}
		}
		ev.Facts[facts[i]] = facts[i+1]
	}
	b.evs = append(b.evs, ev)
	return b
}

func (b *tb) domain(actions ...string) *tb {
	for _, a := range actions {
		b.add(a, "", "")
	}
	return b
}

// start is a generation started by session s up to publication.
func (b *tb) start(s string) *tb {
	b.add("StartNewDomain", s, "")
	b.domain("MountStateAnchor", "CreateTrustAnchor", "StartSidecar", "StartRuntimeSupervisor", "ArmRuntimeCausalEdge")
	b.add("StartSandbox", "", "", trace.FactSandbox, "sb-1")
	return b.domain("PublishDomain")
}

func (b *tb) register(s, how string) *tb {
	b.add(how, s, "")
	return b.add("RegisterSession", s, "", trace.FactCLI, "cli-"+s, trace.FactAnchor, "anchor-"+s)
}

// request adds a verified request of session s.
func (b *tb) request(s, r string, shell, rule bool) *tb {
	return b.add("ReceiveEscalation", s, r, trace.FactSandbox, "sb-1", trace.FactCLI, "cli-"+s,
		trace.FactAnchor, "anchor-"+s, trace.FactShell, fmt.Sprint(shell), trace.FactRule, fmt.Sprint(rule))
}

func (b *tb) autoRun(s, r string) *tb {
	b.request(s, r, false, true)
	for _, a := range []string{"AutoApprove", "StartHostExecution", "CompleteHostExecution", "DeliverResult"} {
		b.add(a, s, r)
	}
	return b
}

func (b *tb) teardown(sessions ...string) *tb {
	for _, s := range sessions {
		b.add("DisconnectSession", s, "")
	}
	return b.domain("BeginTeardown", "StopSandbox", "StopSidecar", "UnmountStateAnchor", "FinishTeardown")
}

func mustValidate(t *testing.T, b *tb) Report {
	t.Helper()
	rep, err := Validate(b.evs)
	if err != nil {
		var v *Violation
		if errors.As(err, &v) {
			t.Fatalf("%s", v.Format())
		}
		t.Fatal(err)
	}
	return rep
}

func mustViolate(t *testing.T, b *tb, line int, want string) {
	t.Helper()
	_, err := Validate(b.evs)
	var v *Violation
	if !errors.As(err, &v) {
		t.Fatalf("Validate = %v, want a violation at line %d", err, line)
	}
	if !errors.Is(err, ErrViolation) {
		t.Errorf("%v does not wrap ErrViolation", err)
	}
	if v.Line != line || !strings.Contains(err.Error(), want) {
		t.Fatalf("violation %q at line %d, want line %d containing %q", err, v.Line, line, want)
	}
}

func TestValidLifecycle(t *testing.T) {
	b := (&tb{}).start("a").register("a", "AdvanceWaitingSession").
		autoRun("a", "r1").
		register("b", "StartReadySession").
		request("b", "r2", false, false).
		add("QueuePrompt", "b", "r2").add("BeginPrompt", "b", "r2").
		add("DeveloperApprove", "b", "r2", trace.FactCLI, "cli-b", trace.FactAnchor, "anchor-b", trace.FactEdited, "true").
		add("StartHostExecution", "b", "r2").add("FailHostExecution", "b", "r2").add("DeliverResult", "b", "r2").
		teardown("a", "b")
	rep := mustValidate(t, b)
	if rep.Sessions != 2 || rep.Requests != 2 || rep.Projections != 1 || rep.Steps != len(b.evs) {
		t.Errorf("report %+v, want 2 sessions, 2 requests, 1 projection, %d steps", rep, len(b.evs))
	}
}

func TestStartOrderEnforced(t *testing.T) {
	b := &tb{}
	b.add("StartNewDomain", "a", "").domain("MountStateAnchor", "CreateTrustAnchor", "StartRuntimeSupervisor")
	mustViolate(t, b, 4, "StartRuntimeSupervisor(D1): not enabled")

	b = &tb{}
	b.add("StartNewDomain", "a", "").domain("MountStateAnchor", "CreateTrustAnchor", "StartSidecar", "StartRuntimeSupervisor")
	b.add("StartSandbox", "", "", trace.FactSandbox, "sb-1")
	mustViolate(t, b, 6, "StartSandbox(D1): not enabled")

	b = &tb{}
	b.add("StartNewDomain", "a", "").domain("MountStateAnchor", "CreateTrustAnchor", "StartSidecar", "PublishDomain")
	mustViolate(t, b, 5, "PublishDomain(D1): not enabled")
}

func TestTeardownNeedsSessionsGone(t *testing.T) {
	b := (&tb{}).start("a").register("a", "AdvanceWaitingSession").domain("BeginTeardown")
	mustViolate(t, b, 11, "BeginTeardown(D1): not enabled")
	// A starter that never registered keeps the Domain interested until
	// it is recorded gone.
	b = (&tb{}).start("a").domain("BeginTeardown")
	mustViolate(t, b, 9, "BeginTeardown(D1): not enabled")
	mustValidate(t, (&tb{}).start("a").teardown("a"))
}

func TestEscalationRules(t *testing.T) {
	base := func() *tb { return (&tb{}).start("a").register("a", "AdvanceWaitingSession") }
	// A shell form is never auto-approved, even when a rule matches.
	b := base().request("a", "r1", true, true).add("AutoApprove", "a", "r1")
	mustViolate(t, b, 12, "AutoApprove(R1): not enabled")
	// A request signed for another sandbox is never received.
	b = base().add("ReceiveEscalation", "a", "r1", trace.FactSandbox, "sb-2", trace.FactCLI, "cli-a", trace.FactAnchor, "anchor-a")
	mustViolate(t, b, 11, "ReceiveEscalation(R1): not enabled")
	// Nor one whose session anchor is not the registered one.
	b = base().add("ReceiveEscalation", "a", "r1", trace.FactSandbox, "sb-1", trace.FactCLI, "cli-a", trace.FactAnchor, "anchor-x")
	mustViolate(t, b, 11, "ReceiveEscalation(R1): not enabled")
	// Execution needs an approval.
	b = base().request("a", "r1", false, false).add("QueuePrompt", "a", "r1").add("StartHostExecution", "a", "r1")
	mustViolate(t, b, 13, "StartHostExecution(R1): not enabled")
	// A decision signed by another session's anchor is not the developer's.
	b = base().request("a", "r1", false, false).add("QueuePrompt", "a", "r1").add("BeginPrompt", "a", "r1").
		add("DeveloperApprove", "a", "r1", trace.FactCLI, "cli-a", trace.FactAnchor, "anchor-b")
	mustViolate(t, b, 14, "DeveloperApprove(R1, PromptCmd): not enabled")
	// One active request per session.
	b = base().request("a", "r1", false, false).request("a", "r2", false, true)
	mustViolate(t, b, 12, "ReceiveEscalation(R2): not enabled")
	// An unknown request.
	b = base().add("DeliverResult", "a", "r9")
	mustViolate(t, b, 11, "request r9 was never received")
}

// TestEndedSessionCapability: a session's capability ends with it. A
// request received for a session after its DisconnectSession is refused
// at that line, and so is the execution of one whose receipt was not
// recorded, whether the session's slot is still bound or was recycled
// for a later session.
func TestEndedSessionCapability(t *testing.T) {
	base := func() *tb {
		return (&tb{}).start("h").register("h", "AdvanceWaitingSession").
			register("a", "StartReadySession").add("DisconnectSession", "a", "")
	}
	b := base().autoRun("a", "r1")
	mustViolate(t, b, 14, "ReceiveEscalation(R1): not enabled")
	b = base().add("AutoApprove", "a", "r1").add("StartHostExecution", "a", "r1")
	mustViolate(t, b, 14, "request r1 was never received")
	// Session a ended; b takes its slot; a's capability then signs.
	b = base().register("b", "StartReadySession").autoRun("a", "r1")
	mustViolate(t, b, 16, "ReceiveEscalation(R1): not enabled")
}

func TestRequestsRecycled(t *testing.T) {
	b := (&tb{}).start("a").register("a", "AdvanceWaitingSession")
	for i := range 10 {
		b.autoRun("a", fmt.Sprintf("r%d", i))
	}
	rep := mustValidate(t, b.teardown("a"))
	if rep.Requests != 10 {
		t.Errorf("requests %d, want 10", rep.Requests)
	}
}

func TestCoordinatorLossImplied(t *testing.T) {
	// A coordinator killed while Ready records nothing; the next one
	// recovers and starts a fresh generation for a new session.
	b := (&tb{}).start("a").register("a", "AdvanceWaitingSession").
		domain("BeginRecovery", "RecoverSandbox", "RecoverSidecar", "RecoverStateAnchor", "FinishRecovery").
		start("b").register("b", "AdvanceWaitingSession").teardown("b")
	mustValidate(t, b)
	// Killed again and again: the fault budget is restored once Absent.
	b = &tb{}
	for i := range 5 {
		s := fmt.Sprintf("s%d", i)
		b.start(s).domain("BeginRecovery", "RecoverSandbox", "RecoverSidecar", "RecoverStateAnchor", "FinishRecovery")
	}
	mustValidate(t, b)
	// Recovery must release the sandbox before the network.
	b = (&tb{}).start("a").domain("BeginRecovery", "RecoverSidecar")
	mustViolate(t, b, 10, "RecoverSidecar(D1): not enabled")
}

func TestRuntimeLossFailsEverything(t *testing.T) {
	b := (&tb{}).start("a").register("a", "AdvanceWaitingSession").request("a", "r1", false, true).
		add("AutoApprove", "a", "r1").domain("HardLoseAttachedRunsc")
	b.domain("BeginRecovery", "RecoverSandbox", "RecoverSidecar", "RecoverStateAnchor", "FinishRecovery")
	mustValidate(t, b)
	// After the loss, the request cannot run.
	b = (&tb{}).start("a").register("a", "AdvanceWaitingSession").request("a", "r1", false, true).
		add("AutoApprove", "a", "r1").domain("HardLoseRuntimeSupervisor").add("StartHostExecution", "a", "r1")
	mustViolate(t, b, 14, "StartHostExecution(R1): not enabled")
}

func TestPairProjections(t *testing.T) {
	b := (&tb{}).start("a").register("a", "AdvanceWaitingSession").
		register("b", "StartReadySession").register("c", "StartReadySession").
		autoRun("c", "r1").teardown("a", "b", "c")
	rep := mustValidate(t, b)
	if rep.Projections != 3 {
		t.Errorf("projections %d, want 3", rep.Projections)
	}
	// c is still registered at BeginTeardown: every projection holding
	// c fails.
	b = (&tb{}).start("a").register("a", "AdvanceWaitingSession").
		register("b", "StartReadySession").register("c", "StartReadySession").teardown("a", "b")
	_, err := Validate(b.evs)
	var v *Violation
	if !errors.As(err, &v) || !strings.Contains(err.Error(), "BeginTeardown") {
		t.Fatalf("Validate = %v, want BeginTeardown refused", err)
	}
}

func TestUnknownAction(t *testing.T) {
	b := (&tb{}).domain("LaunchMissiles")
	mustViolate(t, b, 1, "no such action of Next")
}

// TestCompletionsStayInTheModel proves the checker's liberties sound for
// Lazaret.cfg. Recycling an ended Request and restoring the fault budget
// of an Absent Domain lead from every reachable state only to reachable
// states. A recycled Session stands for a new session of a larger model
// (the historical one stays ended there), which two sessions cannot
// reach; what is proved instead is that an ended session does not
// interfere: in every reachable state, recycling it changes neither which
// steps of the other sessions, their requests and the Domain are enabled
// nor what they do.
func TestCompletionsStayInTheModel(t *testing.T) {
	reach := map[model.State]bool{}
	queue := model.Init()
	for _, s := range queue {
		reach[s] = true
	}
	for len(queue) > 0 {
		st := queue[0]
		queue = queue[1:]
		for _, s := range model.Successors(st) {
			if !reach[s.Next] {
				reach[s.Next] = true
				queue = append(queue, s.Next)
			}
		}
	}
	t.Logf("%d reachable states", len(reach))
	recycled, recycledSessions, restored := 0, 0, 0
	for st := range reach {
		for r := range model.Request(model.NumRequests) {
			if !Recyclable(&st, r) {
				continue
			}
			recycled++
			if n := Recycle(st, r); !reach[n] {
				t.Fatalf("recycling %v leaves the model:\n%s", r, st)
			}
		}
		f := model.CfgFixture()
		for s := range model.Session(model.NumSessions) {
			if !SessionRecyclable(&f, &st, s) {
				continue
			}
			recycledSessions++
			if err := nonInterfering(&f, st, s); err != nil {
				t.Fatalf("recycling %v: %v in\n%s", s, err, st)
			}
		}
		if st.DomainPhase[model.D1] == model.DomainAbsent && st.RuntimeFaultsRemaining[model.D1] < model.MaxRuntimeFaults {
			restored++
			n := st
			n.RuntimeFaultsRemaining[model.D1] = model.MaxRuntimeFaults
			if !reach[n] {
				t.Fatalf("restoring the fault budget leaves the model:\n%s", st)
			}
		}
	}
	if recycled == 0 || recycledSessions == 0 || restored == 0 {
		t.Fatalf("checked %d request and %d session recyclings and %d restorations; the fixture misses one", recycled, recycledSessions, restored)
	}
	t.Logf("checked %d request and %d session recyclings and %d restorations", recycled, recycledSessions, restored)
}

// nonInterfering checks that recycling s in st leaves every step not
// about s (or its requests) as it was.
func nonInterfering(f *model.Fixture, st model.State, s model.Session) error {
	rs := RecycleSession(f, st, s)
	about := func(step model.Step) bool {
		for _, p := range step.Params {
			if p == s.String() {
				return true
			}
			for r := range model.Request(model.NumRequests) {
				if p == r.String() && f.RequestSession[r] == s {
					return true
				}
			}
		}
		return false
	}
	others := func(from model.State) map[string]model.State {
		out := map[string]model.State{}
		for _, step := range model.Successors(from) {
			if !about(step) {
				out[step.String()] = RecycleSession(f, step.Next, s)
			}
		}
		return out
	}
	a, b := others(st), others(rs)
	for name, next := range a {
		got, ok := b[name]
		if !ok {
			return fmt.Errorf("%s is enabled only before recycling", name)
		}
		if got != next {
			return fmt.Errorf("%s reaches another state after recycling", name)
		}
	}
	for name := range b {
		if _, ok := a[name]; !ok {
			return fmt.Errorf("%s is enabled only after recycling", name)
		}
	}
	return nil
}

func TestProjectionsOnlyForSessionsLiveTogether(t *testing.T) {
	// a and b share a generation; c comes alone in the next one.
	b := (&tb{}).start("a").register("a", "AdvanceWaitingSession").register("b", "StartReadySession").
		teardown("a", "b").start("c").register("c", "AdvanceWaitingSession").teardown("c")
	rep := mustValidate(t, b)
	if rep.Projections != 2 {
		t.Errorf("projections %d, want 2 ({a, b} and {c})", rep.Projections)
	}
	// Three generations, one session each: three projections of one.
	b = &tb{}
	for _, s := range []string{"a", "b", "c"} {
		b.start(s).register(s, "AdvanceWaitingSession").autoRun(s, "r-"+s).teardown(s)
	}
	if rep := mustValidate(t, b); rep.Projections != 3 {
		t.Errorf("projections %d, want 3", rep.Projections)
	}
}
