// Package conform checks a recorded protocol trace (pkg/trace) step by
// step against the model's Next relation (pkg/model).
//
// # How a trace becomes a behaviour of the model
//
// The model is finite: one Domain, two Sessions, three Requests. A trace
// of a real Domain has any number of each, so the checker validates
// projections and binds the model's constants as the trace goes.
//
//   - Projections. When the trace has more than two sessions, it is
//     checked once for every pair of them whose events interleave (the
//     two live at the same time), and once alone for a session that
//     interleaves with none: the Domain's events and the events of the
//     projection's sessions and of their requests. A guard that
//     quantifies over all sessions (BeginTeardown's "no session
//     interested", for one) is thereby checked for every session, in the
//     projections that contain it.
//   - The session that starts a generation (StartNewDomain) takes part in
//     every projection until the generation is published; in a
//     projection it does not belong to, it then leaves (DisconnectSession
//     is taken for it), since nothing it does later changes the Domain.
//   - Sessions are bound to S1 and S2 as they appear; a session that has
//     ended (Closed or Failed, its requests delivered) is returned to New
//     (recycled), with its requests, when its slot is needed.
//   - Requests are bound to a free Request of the model when they are
//     received; a Request is free while it is Unused, or once its result
//     was delivered and nothing refers to it any longer, when it is
//     returned to Unused (recycled). The constants of a Request
//     (RequestSession, RequestCommand, AutoRuleMatches, the identity
//     tuples) are bound from the event's facts when it is received, and
//     ApprovalCommand when the developer decides: before that no action
//     reads them.
//   - The budget of runtime faults is restored when the Domain is Absent
//     again (after FinishTeardown or FinishRecovery).
//
// The tests prove, over the whole state space of Lazaret.cfg, that
// recycling a Session or a Request and restoring the fault budget lead
// only to states the model reaches anyway.
//
// # Events the checker completes
//
// A coordinator killed with SIGKILL records nothing. The coordinator
// that recovers its generation records BeginRecovery; when the model's
// Domain is then still Starting, Ready or Stopping, the checker takes
// HardLoseHostCoordinator first. A recovery step (RecoverSandbox,
// RecoverSidecar, RecoverStateAnchor) whose resource the model already
// has stopped is a stutter: the implementation releases from its records
// and says so whether or not anything was left. When the model's Domain
// is Recovering, BeginRecovery is a stutter too (a second coordinator
// continues the recovery of one that died in it), and when it is Absent
// the recovery up to FinishRecovery is a stutter (leftover records of a
// generation that had ended). Every other event must be an enabled action
// of Next, and every state reached must satisfy every invariant of
// Lazaret.cfg.
package conform

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"lazaret.dev/pkg/model"
	"lazaret.dev/pkg/trace"
)

// ErrViolation is wrapped by every *Violation.
var ErrViolation = errors.New("trace violates the model")

// Violation says where and why a trace left the model.
type Violation struct {
	Line     int // 1-based line of the event in the trace
	Event    trace.Event
	Sessions []string // the projection's sessions, S1 first
	Step     string   // the model step tried, e.g. "StartSandbox(D1)"
	Reason   string
	State    model.State // the model state before the event
	Enabled  []string    // the steps Next allowed there
}

func (v *Violation) Error() string {
	return fmt.Sprintf("line %d (%s): %s: %s; enabled were %s", v.Line, v.Event.Action, v.Step, v.Reason, strings.Join(v.Enabled, ", "))
}

func (v *Violation) Unwrap() error { return ErrViolation }

// Format prints the violation with the model state before the event.
func (v *Violation) Format() string {
	return fmt.Sprintf("%s\nprojection sessions: %v\nstate before the event:\n%s", v.Error(), v.Sessions, v.State)
}

// Report summarises a valid trace.
type Report struct {
	Events      int // events in the trace
	Sessions    int // distinct sessions
	Requests    int // distinct requests received
	Projections int // projections checked
	Steps       int // model steps taken, over all projections
}

// Validate checks events against the model. It returns a *Violation for
// the first event of the first projection that leaves it.
func Validate(events []trace.Event) (Report, error) {
	rep := Report{Events: len(events)}
	sessions := sessionsOf(events)
	rep.Sessions = len(sessions)
	reqs := map[string]bool{}
	for _, ev := range events {
		if ev.Action == "ReceiveEscalation" {
			reqs[ev.Request] = true
		}
	}
	rep.Requests = len(reqs)
	var projections [][]string
	if len(sessions) <= model.NumSessions {
		projections = [][]string{sessions}
	} else {
		// Two sessions whose events never interleave never live at the
		// same time: their pair checks nothing that each one's own
		// projection does not.
		first, last := map[string]int{}, map[string]int{}
		for i, ev := range events {
			if ev.Session == "" {
				continue
			}
			if _, ok := first[ev.Session]; !ok {
				first[ev.Session] = i
			}
			last[ev.Session] = i
		}
		paired := map[string]bool{}
		for i, a := range sessions {
			for _, b := range sessions[i+1:] {
				if first[a] <= last[b] && first[b] <= last[a] {
					projections = append(projections, []string{a, b})
					paired[a], paired[b] = true, true
				}
			}
		}
		for _, a := range sessions {
			if !paired[a] {
				projections = append(projections, []string{a})
			}
		}
	}
	for _, p := range projections {
		c := newChecker(p)
		for i, ev := range events {
			if err := c.step(i+1, ev); err != nil {
				return rep, err
			}
		}
		rep.Projections++
		rep.Steps += c.steps
	}
	return rep, nil
}

// sessionsOf lists the sessions events name, in order of appearance.
func sessionsOf(events []trace.Event) []string {
	var out []string
	for _, ev := range events {
		if ev.Session != "" && !slices.Contains(out, ev.Session) {
			out = append(out, ev.Session)
		}
	}
	return out
}

// Fixture identities. The model's identities are opaque strings; these are
// the ones a projection binds. "-other" stands for any identity that is
// not the one the model expects.
const (
	idCoordinator  = "coordinator-1"
	idSidecar      = "sidecar-1"
	idSandbox      = "sandbox-1"
	idSandboxOther = "sandbox-other"
	idCLIOther     = "cli-other"
	idAnchorOther  = "anchor-other"
	fingerprint    = "config-a"
)

var sessionCLI = [model.NumSessions]string{"cli-1", "cli-2"}
var sessionAnchor = [model.NumSessions]string{"anchor-1", "anchor-2"}

// baseFixture is the fixture every projection starts from: one safe
// Domain with valid certificates, two sessions of that Domain with its
// configuration, and Requests not yet bound (bound when received).
func baseFixture() model.Fixture {
	f := model.Fixture{
		Identities: []string{idCoordinator, idSidecar, idSandbox, idSandboxOther,
			sessionCLI[0], sessionCLI[1], idCLIOther},
		SessionAnchors: []string{sessionAnchor[0], sessionAnchor[1], idAnchorOther},
	}
	f.DomainFingerprint[model.D1] = fingerprint
	f.DomainCoordinatorIdentity[model.D1] = idCoordinator
	f.DomainSidecarIdentity[model.D1] = idSidecar
	f.DomainSandboxIdentity[model.D1] = idSandbox
	f.CoordinatorCertificateValid[model.D1] = true
	f.SidecarCertificateValid[model.D1] = true
	f.SandboxCertificateValid[model.D1] = true
	f.ConfigSafe[model.D1] = true
	f.SandboxIsolationSafe[model.D1] = true
	for s := range model.Session(model.NumSessions) {
		f.SessionDomain[s] = model.D1
		f.SessionFingerprint[s] = fingerprint
		f.SessionCliIdentity[s] = sessionCLI[s]
		f.SessionAnchorIdentity[s] = sessionAnchor[s]
		f.CliCertificateValid[s] = true
	}
	for r := range model.Request(model.NumRequests) {
		f.RequestSession[r] = model.S1
		f.RequestCommand[r] = model.ExactCmd
		f.RequestSandboxIdentity[r] = idSandboxOther
		f.RequestCliIdentity[r] = idCLIOther
		f.RequestSessionAnchor[r] = idAnchorOther
		f.ApprovalCliIdentity[r] = idCLIOther
		f.ApprovalSessionAnchor[r] = idAnchorOther
		f.ApprovalCommand[r] = model.ExactCmd
	}
	f.CommandRequiresShell = [model.NumCommands]bool{model.ShellCmd: true}
	for c := range model.Command(model.NumCommands) {
		f.CommandContentSafe[c] = true
	}
	return f
}

// sessionInfo is what the trace told about a bound session.
type sessionInfo struct {
	slot   model.Session
	cli    string // from RegisterSession
	anchor string
}

// checker validates one projection.
type checker struct {
	only     []string // the projection's sessions
	f        model.Fixture
	st       model.State
	steps    int
	sessions map[string]*sessionInfo
	// slots holds the trace session bound to each model Session.
	slots    [model.NumSessions]string
	requests map[string]model.Request
	// guests are leaders of the generation being started that do not
	// belong to the projection: they leave it at PublishDomain.
	guests []string
	// bound holds the trace request bound to each model Request.
	bound   [model.NumRequests]string
	sandbox string // the sandbox ID of the running generation
	// shadow is set during the recovery of leftovers of a generation that
	// had already ended in the model.
	shadow bool
}

func newChecker(only []string) *checker {
	return &checker{
		only: only, f: baseFixture(), st: model.Init()[0],
		sessions: map[string]*sessionInfo{}, requests: map[string]model.Request{},
	}
}

// inProjection reports whether ev concerns the projection: Domain events
// always do, session and request events when their session is in it.
func (c *checker) inProjection(ev trace.Event) bool {
	return ev.Session == "" || slices.Contains(c.only, ev.Session)
}

func (c *checker) violation(line int, ev trace.Event, step, reason string) error {
	v := &Violation{Line: line, Event: ev, Sessions: c.only, Step: step, Reason: reason, State: c.st}
	m, err := model.New(c.f)
	if err == nil {
		for _, s := range m.Successors(c.st) {
			v.Enabled = append(v.Enabled, s.String())
		}
	}
	if len(v.Enabled) == 0 {
		v.Enabled = []string{"none"}
	}
	return v
}

// apply takes the model step action(params) and checks every invariant
// in the state it reaches.
func (c *checker) apply(line int, ev trace.Event, action string, params ...string) error {
	step := action + "(" + strings.Join(params, ", ") + ")"
	m, err := model.New(c.f)
	if err != nil {
		return c.violation(line, ev, step, "the bound constants break the model's ASSUME: "+err.Error())
	}
	next, ok := m.Apply(c.st, action, params...)
	if !ok {
		return c.violation(line, ev, step, "not enabled")
	}
	for _, inv := range model.Invariants() {
		if !inv.Holds(m, &next) {
			c.st = next
			return c.violation(line, ev, step, "reaches a state violating "+inv.Name)
		}
	}
	c.st = next
	c.steps++
	return nil
}

const d1 = "D1"

func (c *checker) step(line int, ev trace.Event) error {
	if !c.inProjection(ev) {
		if ev.Action != "StartNewDomain" && ev.Action != "RestartWaitingDomain" {
			return nil
		}
		c.guests = append(c.guests, ev.Session)
	}
	switch ev.Action {
	case "PublishDomain":
		if err := c.apply(line, ev, ev.Action, d1); err != nil {
			return err
		}
		for _, g := range c.guests {
			if s := c.sessions[g]; s != nil && !ended(c.st.SessionPhase[s.slot]) {
				if err := c.apply(line, ev, "DisconnectSession", s.slot.String()); err != nil {
					return err
				}
			}
		}
		c.guests = nil
		return nil

	case "StartNewDomain", "StartReadySession", "AdvanceWaitingSession", "WaitForDomain",
		"RestartWaitingDomain", "RejectConfigurationMismatch", "RegisterSession", "DisconnectSession":
		s, err := c.session(line, ev)
		if err != nil {
			return err
		}
		if ev.Action == "RegisterSession" {
			s.cli, s.anchor = ev.Facts[trace.FactCLI], ev.Facts[trace.FactAnchor]
		}
		return c.apply(line, ev, ev.Action, s.slot.String())

	case "StartSandbox":
		c.sandbox = ev.Facts[trace.FactSandbox]
		return c.apply(line, ev, ev.Action, d1)

	case "BeginRecovery":
		switch c.st.DomainPhase[model.D1] {
		case model.DomainAbsent:
			c.shadow = true
			return nil
		case model.DomainRecovering:
			return nil
		case model.DomainStarting, model.DomainReady, model.DomainStopping:
			if err := c.apply(line, ev, "HardLoseHostCoordinator", d1); err != nil {
				return err
			}
		}
		return c.apply(line, ev, ev.Action, d1)

	case "RecoverSandbox", "RecoverSidecar", "RecoverStateAnchor":
		if c.shadow {
			return nil
		}
		if c.st.DomainPhase[model.D1] == model.DomainRecovering {
			switch {
			case ev.Action == "RecoverSandbox" && c.st.SandboxState[model.D1] == model.ResourceStopped,
				ev.Action == "RecoverSidecar" && c.st.SidecarState[model.D1] == model.ResourceStopped,
				ev.Action == "RecoverStateAnchor" && c.st.StateAnchorState[model.D1] == model.Unmounted:
				return nil
			}
		}
		return c.apply(line, ev, ev.Action, d1)

	case "FinishRecovery", "FinishTeardown":
		if ev.Action == "FinishRecovery" && c.shadow {
			c.shadow = false
			return nil
		}
		if err := c.apply(line, ev, ev.Action, d1); err != nil {
			return err
		}
		c.st.RuntimeFaultsRemaining[model.D1] = model.MaxRuntimeFaults
		return nil

	case "ReceiveEscalation":
		r, err := c.receive(line, ev)
		if err != nil {
			return err
		}
		return c.apply(line, ev, ev.Action, r.String())

	case "DeveloperApprove", "DeveloperDeny":
		r, err := c.request(line, ev)
		if err != nil {
			return err
		}
		s := c.sessions[ev.Session]
		if s == nil || c.f.RequestSession[r] != s.slot {
			return c.violation(line, ev, ev.Action, "the decision names another session than the request's")
		}
		c.f.ApprovalCliIdentity[r] = c.identity(ev.Facts[trace.FactCLI], s.cli, sessionCLI[s.slot], idCLIOther)
		c.f.ApprovalSessionAnchor[r] = c.identity(ev.Facts[trace.FactAnchor], s.anchor, sessionAnchor[s.slot], idAnchorOther)
		c.f.ApprovalSignatureValid[r] = true
		if ev.Action == "DeveloperDeny" {
			return c.apply(line, ev, ev.Action, r.String())
		}
		cmd := c.f.RequestCommand[r]
		if ev.Facts[trace.FactEdited] == "true" {
			cmd = model.EditedCmd
		}
		c.f.ApprovalCommand[r] = cmd
		return c.apply(line, ev, ev.Action, r.String(), cmd.String())

	case "AutoApprove", "QueuePrompt", "BeginPrompt", "StartHostExecution", "CompleteHostExecution",
		"TimeoutRequest", "CancelRequest", "FailHostExecution", "DeliverResult":
		r, err := c.request(line, ev)
		if err != nil {
			return err
		}
		return c.apply(line, ev, ev.Action, r.String())
	}
	if a := actionInfo(ev.Action); a != nil && len(a.Params) == 1 && a.Params[0] == model.ParamDomain {
		return c.apply(line, ev, ev.Action, d1)
	}
	return c.violation(line, ev, ev.Action, "no such action of Next")
}

func actionInfo(name string) *model.ActionInfo {
	for _, a := range model.Actions() {
		if a.Name == name {
			return &a
		}
	}
	return nil
}

// session returns the bound session of ev, binding the next free one.
func (c *checker) session(line int, ev trace.Event) (*sessionInfo, error) {
	if ev.Session == "" {
		return nil, c.violation(line, ev, ev.Action, "the event names no session")
	}
	if s := c.sessions[ev.Session]; s != nil {
		return s, nil
	}
	slot, ok := c.freeSession()
	if !ok {
		return nil, c.violation(line, ev, ev.Action, "more live sessions than the model holds")
	}
	if old := c.slots[slot]; old != "" {
		delete(c.sessions, old)
		for r := range model.Request(model.NumRequests) {
			if c.bound[r] != "" && c.f.RequestSession[r] == slot {
				delete(c.requests, c.bound[r])
				c.bound[r] = ""
			}
		}
	}
	s := &sessionInfo{slot: slot}
	c.slots[slot] = ev.Session
	c.sessions[ev.Session] = s
	return s, nil
}

func ended(p model.SessionPhase) bool { return p == model.SessionClosed || p == model.SessionFailed }

// freeSession returns an unbound model Session, or recycles an ended one.
func (c *checker) freeSession() (model.Session, bool) {
	for s := range model.Session(model.NumSessions) {
		if c.slots[s] == "" {
			return s, true
		}
	}
	for s := range model.Session(model.NumSessions) {
		if SessionRecyclable(&c.f, &c.st, s) {
			c.st = RecycleSession(&c.f, c.st, s)
			return s, true
		}
	}
	return 0, false
}

// SessionRecyclable reports whether s has ended and each of its requests
// is Unused or recyclable.
func SessionRecyclable(f *model.Fixture, st *model.State, s model.Session) bool {
	if !ended(st.SessionPhase[s]) || st.ActiveRequest[s] != model.NoRequest {
		return false
	}
	for r := range model.Request(model.NumRequests) {
		if f.RequestSession[r] == s && st.RequestPhase[r] != model.RequestUnused && !Recyclable(st, r) {
			return false
		}
	}
	return true
}

// RecycleSession returns st with s New again and its requests Unused.
func RecycleSession(f *model.Fixture, st model.State, s model.Session) model.State {
	st.SessionPhase[s] = model.SessionNew
	st.TerminalRoute[s] = model.RouteDetached
	st.ConnectionState[s] = model.Disconnected
	st.ActiveRequest[s] = model.NoRequest
	for r := range model.Request(model.NumRequests) {
		if f.RequestSession[r] == s && st.RequestPhase[r] != model.RequestUnused {
			st = Recycle(st, r)
		}
	}
	return st
}

// identity maps an identity the trace reports to the model's: the
// expected model identity when it equals what the session registered,
// else the "other" identity.
func (c *checker) identity(got, registered, expected, other string) string {
	if got != "" && got == registered {
		return expected
	}
	return other
}

// receive binds a newly received request to a free model Request and
// binds its constants from the event's facts.
func (c *checker) receive(line int, ev trace.Event) (model.Request, error) {
	if ev.Request == "" {
		return 0, c.violation(line, ev, ev.Action, "the event names no request")
	}
	if _, ok := c.requests[ev.Request]; ok {
		return 0, c.violation(line, ev, ev.Action, "request "+ev.Request+" is received a second time")
	}
	s := c.sessions[ev.Session]
	if s == nil {
		return 0, c.violation(line, ev, ev.Action, "request of a session that never registered")
	}
	r, ok := c.freeRequest()
	if !ok {
		return 0, c.violation(line, ev, ev.Action, "every model Request is live; none can be recycled")
	}
	if old := c.bound[r]; old != "" {
		delete(c.requests, old)
	}
	c.bound[r] = ev.Request
	c.requests[ev.Request] = r
	f := &c.f
	f.RequestSession[r] = s.slot
	shell, rule := ev.Facts[trace.FactShell] == "true", ev.Facts[trace.FactRule] == "true"
	switch {
	case shell:
		f.RequestCommand[r] = model.ShellCmd
	case rule:
		f.RequestCommand[r] = model.ExactCmd
	default:
		f.RequestCommand[r] = model.PromptCmd
	}
	f.AutoRuleMatches[r] = rule
	f.RequestSandboxIdentity[r] = idSandboxOther
	if sb := ev.Facts[trace.FactSandbox]; sb != "" && sb == c.sandbox {
		f.RequestSandboxIdentity[r] = idSandbox
	}
	f.RequestCliIdentity[r] = c.identity(ev.Facts[trace.FactCLI], s.cli, sessionCLI[s.slot], idCLIOther)
	f.RequestSessionAnchor[r] = c.identity(ev.Facts[trace.FactAnchor], s.anchor, sessionAnchor[s.slot], idAnchorOther)
	// Only verified requests are recorded: their credential and signature
	// were checked before the event.
	f.RequestCredentialValid[r] = true
	f.RequestSignatureValid[r] = true
	f.ApprovalCliIdentity[r], f.ApprovalSessionAnchor[r] = idCLIOther, idAnchorOther
	f.ApprovalSignatureValid[r] = false
	f.ApprovalCommand[r] = f.RequestCommand[r]
	return r, nil
}

// freeRequest returns an Unused model Request, or recycles one whose
// result was delivered and that no session or host process refers to.
func (c *checker) freeRequest() (model.Request, bool) {
	for r := range model.Request(model.NumRequests) {
		if c.st.RequestPhase[r] == model.RequestUnused {
			return r, true
		}
	}
	for r := range model.Request(model.NumRequests) {
		if Recyclable(&c.st, r) {
			c.st = Recycle(c.st, r)
			return r, true
		}
	}
	return 0, false
}

// Recyclable reports whether r has ended and nothing refers to it.
func Recyclable(st *model.State, r model.Request) bool {
	if !st.RequestPhase[r].IsTerminal() || st.HostRunning.Has(r) {
		return false
	}
	return !slices.Contains(st.ActiveRequest[:], r)
}

// Recycle returns st with r Unused again.
func Recycle(st model.State, r model.Request) model.State {
	st.RequestPhase[r] = model.RequestUnused
	st.ApprovalSource[r] = model.NoApproval
	st.ApprovedCommand[r] = model.NoCommand
	return st
}

// request returns the model Request ev's request is bound to.
func (c *checker) request(line int, ev trace.Event) (model.Request, error) {
	r, ok := c.requests[ev.Request]
	if !ok {
		return 0, c.violation(line, ev, ev.Action, "request "+ev.Request+" was never received")
	}
	return r, nil
}

// ValidateDir validates every trace file (*.trace) in dir, as written
// with $LAZARET_TRACE_DIR set to dir. The error names the file and, for a
// violation, prints it with the model state (Violation.Format).
func ValidateDir(dir string) ([]Report, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.trace"))
	if err != nil {
		return nil, err
	}
	var out []Report
	for _, f := range files {
		evs, err := trace.Read(f)
		if err != nil {
			return out, err
		}
		rep, err := Validate(evs)
		if err != nil {
			var v *Violation
			if errors.As(err, &v) {
				return out, fmt.Errorf("trace %s: %s", f, v.Format())
			}
			return out, fmt.Errorf("trace %s: %w", f, err)
		}
		out = append(out, rep)
	}
	return out, nil
}
