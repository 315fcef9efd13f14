package model

import (
	"slices"
	"strings"
)

// Param is the kind of one bound identifier of an action.
type Param uint8

// Parameter kinds, named as the spec names the bound identifiers.
const (
	ParamDomain  Param = iota // d \in Domains
	ParamSession              // s \in Sessions
	ParamRequest              // r \in Requests
	ParamCommand              // cmd \in Commands
)

var paramNames = [...]string{"d", "s", "r", "cmd"}

func (p Param) String() string { return enumName(paramNames[:], uint8(p), "Param") }

// Args carries the bound identifiers of one action instance. Only the
// fields named by the action's parameters are meaningful.
type Args struct {
	Domain  Domain
	Session Session
	Request Request
	Command Command
}

// ActionFunc is the uniform signature of every action: the successor of
// st and true when the action is enabled in st with args, or false.
type ActionFunc func(m *Model, st State, args Args) (State, bool)

// ActionInfo describes one action of Next.
type ActionInfo struct {
	Name   string  // the TLA+ operator name
	Params []Param // its parameters, in the order of the TLA+ definition
}

type actionDef struct {
	ActionInfo
	fn ActionFunc
}

func onDomain(f func(*Model, State, Domain) (State, bool)) ActionFunc {
	return func(m *Model, st State, a Args) (State, bool) { return f(m, st, a.Domain) }
}

func onSession(f func(*Model, State, Session) (State, bool)) ActionFunc {
	return func(m *Model, st State, a Args) (State, bool) { return f(m, st, a.Session) }
}

func onRequest(f func(*Model, State, Request) (State, bool)) ActionFunc {
	return func(m *Model, st State, a Args) (State, bool) { return f(m, st, a.Request) }
}

var (
	pD   = []Param{ParamDomain}
	pS   = []Param{ParamSession}
	pR   = []Param{ParamRequest}
	pRCm = []Param{ParamRequest, ParamCommand}
)

// nextActions lists the disjuncts of Next (lines 1261-1273) in order. Next
// names ResumeHostCoordinatorProcess, ResumeRuntimeSupervisorProcess and
// ResumeAttachedRunscProcess twice, in DomainProgress(d) and again in
// RuntimePhysicalInterleaving(d); both occurrences denote the same
// transitions, so they are listed once, at their first occurrence.
var nextActions = []actionDef{
	// \E s \in Sessions : ...
	{ActionInfo{"StartNewDomain", pS}, onSession((*Model).StartNewDomain)},
	{ActionInfo{"StartReadySession", pS}, onSession((*Model).StartReadySession)},
	{ActionInfo{"WaitForDomain", pS}, onSession((*Model).WaitForDomain)},
	{ActionInfo{"RestartWaitingDomain", pS}, onSession((*Model).RestartWaitingDomain)},
	{ActionInfo{"AdvanceWaitingSession", pS}, onSession((*Model).AdvanceWaitingSession)},
	{ActionInfo{"RejectConfigurationMismatch", pS}, onSession((*Model).RejectConfigurationMismatch)},
	{ActionInfo{"RegisterSession", pS}, onSession((*Model).RegisterSession)},
	{ActionInfo{"DisconnectSession", pS}, onSession((*Model).DisconnectSession)},
	// \E d \in Domains : DomainProgress(d) \/ FailDomain(d)
	{ActionInfo{"MountStateAnchor", pD}, onDomain((*Model).MountStateAnchor)},
	{ActionInfo{"CreateTrustAnchor", pD}, onDomain((*Model).CreateTrustAnchor)},
	{ActionInfo{"StartSidecar", pD}, onDomain((*Model).StartSidecar)},
	{ActionInfo{"StartRuntimeSupervisor", pD}, onDomain((*Model).StartRuntimeSupervisor)},
	{ActionInfo{"ArmRuntimeCausalEdge", pD}, onDomain((*Model).ArmRuntimeCausalEdge)},
	{ActionInfo{"StartSandbox", pD}, onDomain((*Model).StartSandbox)},
	{ActionInfo{"PublishDomain", pD}, onDomain((*Model).PublishDomain)},
	{ActionInfo{"BeginTeardown", pD}, onDomain((*Model).BeginTeardown)},
	{ActionInfo{"StopSandbox", pD}, onDomain((*Model).StopSandbox)},
	{ActionInfo{"StopSidecar", pD}, onDomain((*Model).StopSidecar)},
	{ActionInfo{"UnmountStateAnchor", pD}, onDomain((*Model).UnmountStateAnchor)},
	{ActionInfo{"FinishTeardown", pD}, onDomain((*Model).FinishTeardown)},
	{ActionInfo{"BeginRecovery", pD}, onDomain((*Model).BeginRecovery)},
	{ActionInfo{"RecoverSandbox", pD}, onDomain((*Model).RecoverSandbox)},
	{ActionInfo{"RecoverSidecar", pD}, onDomain((*Model).RecoverSidecar)},
	{ActionInfo{"RecoverStateAnchor", pD}, onDomain((*Model).RecoverStateAnchor)},
	{ActionInfo{"FinishRecovery", pD}, onDomain((*Model).FinishRecovery)},
	{ActionInfo{"ResumeHostCoordinatorProcess", pD}, onDomain((*Model).ResumeHostCoordinatorProcess)},
	{ActionInfo{"ResumeRuntimeSupervisorProcess", pD}, onDomain((*Model).ResumeRuntimeSupervisorProcess)},
	{ActionInfo{"ResumeAttachedRunscProcess", pD}, onDomain((*Model).ResumeAttachedRunscProcess)},
	{ActionInfo{"FailDomain", pD}, onDomain((*Model).FailDomain)},
	// \E d \in Domains : RuntimePhysicalInterleaving(d)
	{ActionInfo{"HardLoseHostCoordinator", pD}, onDomain((*Model).HardLoseHostCoordinator)},
	{ActionInfo{"HardLoseRuntimeSupervisor", pD}, onDomain((*Model).HardLoseRuntimeSupervisor)},
	{ActionInfo{"HardLoseAttachedRunsc", pD}, onDomain((*Model).HardLoseAttachedRunsc)},
	{ActionInfo{"StopHostCoordinatorProcess", pD}, onDomain((*Model).StopHostCoordinatorProcess)},
	{ActionInfo{"StopRuntimeSupervisorProcess", pD}, onDomain((*Model).StopRuntimeSupervisorProcess)},
	{ActionInfo{"StopAttachedRunscProcess", pD}, onDomain((*Model).StopAttachedRunscProcess)},
	// \E r \in Requests : ReceiveEscalation(r) \/ RequestProgress(r)
	{ActionInfo{"ReceiveEscalation", pR}, onRequest((*Model).ReceiveEscalation)},
	{ActionInfo{"AutoApprove", pR}, onRequest((*Model).AutoApprove)},
	{ActionInfo{"QueuePrompt", pR}, onRequest((*Model).QueuePrompt)},
	{ActionInfo{"BeginPrompt", pR}, onRequest((*Model).BeginPrompt)},
	{ActionInfo{"DeveloperApprove", pRCm}, func(m *Model, st State, a Args) (State, bool) {
		return m.DeveloperApprove(st, a.Request, a.Command)
	}},
	{ActionInfo{"DeveloperDeny", pR}, onRequest((*Model).DeveloperDeny)},
	{ActionInfo{"StartHostExecution", pR}, onRequest((*Model).StartHostExecution)},
	{ActionInfo{"CompleteHostExecution", pR}, onRequest((*Model).CompleteHostExecution)},
	{ActionInfo{"TimeoutRequest", pR}, onRequest((*Model).TimeoutRequest)},
	{ActionInfo{"CancelRequest", pR}, onRequest((*Model).CancelRequest)},
	{ActionInfo{"FailHostExecution", pR}, onRequest((*Model).FailHostExecution)},
	{ActionInfo{"DeliverResult", pR}, onRequest((*Model).DeliverResult)},
}

// Actions describes the actions of Next, each once, in the order of Next.
func Actions() []ActionInfo {
	infos := make([]ActionInfo, len(nextActions))
	for i, a := range nextActions {
		infos[i] = ActionInfo{Name: a.Name, Params: append([]Param(nil), a.Params...)}
	}
	return infos
}

func actionIndex(name string) int {
	for i, a := range nextActions {
		if a.Name == name {
			return i
		}
	}
	return -1
}

// instance is one action with its bound identifiers: one disjunct of Next
// once every \E is expanded over the fixture's finite sets.
type instance struct {
	action int
	args   Args
	params []string
}

// instances expands every \E of Next: Sessions, Domains, Requests and, for
// DeveloperApprove, Commands (line 1252).
var instances = expandInstances()

func expandInstances() []instance {
	var out []instance
	for i, a := range nextActions {
		combos := []instance{{action: i, args: Args{Domain: 0, Session: NoSession, Request: NoRequest, Command: NoCommand}}}
		for _, p := range a.Params {
			var grown []instance
			for _, c := range combos {
				n := paramCount(p)
				for v := range n {
					g := c
					g.params = append(append([]string(nil), c.params...), "")
					switch p {
					case ParamDomain:
						g.args.Domain = Domain(v)
						g.params[len(g.params)-1] = Domain(v).String()
					case ParamSession:
						g.args.Session = Session(v)
						g.params[len(g.params)-1] = Session(v).String()
					case ParamRequest:
						g.args.Request = Request(v)
						g.params[len(g.params)-1] = Request(v).String()
					case ParamCommand:
						g.args.Command = Command(v)
						g.params[len(g.params)-1] = Command(v).String()
					}
					grown = append(grown, g)
				}
			}
			combos = grown
		}
		out = append(out, combos...)
	}
	return out
}

func paramCount(p Param) int {
	switch p {
	case ParamDomain:
		return NumDomains
	case ParamSession:
		return NumSessions
	case ParamRequest:
		return NumRequests
	case ParamCommand:
		return NumCommands
	}
	return 0
}

// Step is one transition of Next: the action, its bound identifiers, and
// the successor state.
type Step struct {
	Action string   // TLA+ action name, e.g. "DeveloperApprove"
	Params []string // bound identifiers by name, e.g. ["R2", "EditedCmd"]
	Args   Args     // the same identifiers as values
	Next   State
}

// String returns the step as the action applied to its arguments, e.g.
// "DeveloperApprove(R2, EditedCmd)".
func (s Step) String() string { return callString(s.Action, s.Params) }

func callString(action string, params []string) string {
	return action + "(" + strings.Join(params, ", ") + ")"
}

// Successors returns every step of Next from st in Lazaret.cfg's model.
func Successors(st State) []Step { return Lazaret.Successors(st) }

// Successors returns every step of Next from st: one per enabled action
// instance, in the order of Next. Two instances reaching the same
// successor are both returned, since they are different steps. A recorded
// trace is consistent with the model when each recorded transition is
// among the Successors of the state before it.
func (m *Model) Successors(st State) []Step {
	var steps []Step
	for _, in := range instances {
		a := nextActions[in.action]
		next, ok := a.fn(m, st, in.args)
		if !ok {
			continue
		}
		steps = append(steps, Step{
			Action: a.Name,
			Params: append([]string(nil), in.params...),
			Args:   in.args,
			Next:   next,
		})
	}
	return steps
}

// Apply takes the step named by action and params (as Step.Params spells
// them) from st. It reports false when no such action instance exists or
// it is not enabled in st.
func (m *Model) Apply(st State, action string, params ...string) (State, bool) {
	for _, in := range instances {
		if nextActions[in.action].Name != action || !slices.Equal(in.params, params) {
			continue
		}
		return nextActions[in.action].fn(m, st, in.args)
	}
	return State{}, false
}
