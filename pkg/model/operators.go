package model

import "fmt"

// Model is the specification bound to one Fixture: the transliterated
// actions and invariants are its methods.
type Model struct {
	f Fixture
}

// New returns the model for f after checking f against the ASSUME clause.
func New(f Fixture) (*Model, error) {
	if err := f.Validate(); err != nil {
		return nil, fmt.Errorf("model fixture: %w", err)
	}
	f.Identities = append([]string(nil), f.Identities...)
	f.SessionAnchors = append([]string(nil), f.SessionAnchors...)
	return &Model{f: f}, nil
}

// Lazaret is the model as Lazaret.cfg binds it (CfgFixture).
var Lazaret = &Model{f: CfgFixture()}

// Fixture returns a copy of the constants the model is bound to.
func (m *Model) Fixture() Fixture {
	f := m.f
	f.Identities = append([]string(nil), m.f.Identities...)
	f.SessionAnchors = append([]string(nil), m.f.SessionAnchors...)
	return f
}

// Init returns the initial states of Lazaret.cfg's model (Init, lines
// 297-321). There is exactly one.
func Init() []State { return Lazaret.Init() }

// Init returns the model's initial states: Init fixes every variable, so
// there is exactly one.
func (m *Model) Init() []State { return []State{initState()} }

// The operators of lines 216-295, in the order they are defined there.

// Dom is Dom(s) == SessionDomain[s] (line 216).
func (m *Model) Dom(s Session) Domain { return m.f.SessionDomain[s] }

// ReqSession is ReqSession(r) == RequestSession[r] (line 218).
func (m *Model) ReqSession(r Request) Session { return m.f.RequestSession[r] }

// ReqDomain is ReqDomain(r) == Dom(ReqSession(r)) (line 220).
func (m *Model) ReqDomain(r Request) Domain { return m.Dom(m.ReqSession(r)) }

// IsTerminalRequest is IsTerminalRequest(r) (line 222).
func IsTerminalRequest(st *State, r Request) bool { return st.RequestPhase[r].IsTerminal() }

// ProcessPresent is ProcessPresent(state) (line 224).
func ProcessPresent(p ProcessState) bool { return p == ProcessAlive || p == ProcessStopped }

// ProcessResponsive is ProcessResponsive(state) (line 226).
func ProcessResponsive(p ProcessState) bool { return p == ProcessAlive }

// RuntimeLogicalAuthorityPresent is RuntimeLogicalAuthorityPresent(d)
// (line 228).
func RuntimeLogicalAuthorityPresent(st *State, d Domain) bool {
	return ProcessPresent(st.HostCoordinatorProc[d]) ||
		ProcessPresent(st.RuntimeSupervisorProc[d]) ||
		ProcessPresent(st.AttachedRunscProc[d])
}

// RuntimeAuthorityResponsive is RuntimeAuthorityResponsive(d) (line 233).
func RuntimeAuthorityResponsive(st *State, d Domain) bool {
	return ProcessResponsive(st.HostCoordinatorProc[d]) ||
		ProcessResponsive(st.RuntimeSupervisorProc[d]) ||
		ProcessResponsive(st.AttachedRunscProc[d])
}

// RuntimeGenerationAbsent is RuntimeGenerationAbsent(d) (line 238).
func RuntimeGenerationAbsent(st *State, d Domain) bool {
	return !st.DomainLockHeld[d] &&
		st.HostCoordinatorProc[d] == ProcessAbsent &&
		st.RuntimeSupervisorProc[d] == ProcessAbsent &&
		st.AttachedRunscProc[d] == ProcessAbsent &&
		st.RuntimeCausalEdge[d] == Unarmed
}

// consumeRuntimeFault is ConsumeRuntimeFault(d) (line 245): its guard
// runtimeFaultsRemaining[d] > 0 on st, and its assignment
// runtimeFaultsRemaining' = [runtimeFaultsRemaining EXCEPT ![d] = @ - 1]
// on next. It reports the guard; next is changed only when it holds.
func consumeRuntimeFault(st *State, next *State, d Domain) bool {
	if !(st.RuntimeFaultsRemaining[d] > 0) {
		return false
	}
	next.RuntimeFaultsRemaining[d] = st.RuntimeFaultsRemaining[d] - 1
	return true
}

// roleIdentitiesDistinct is
// Cardinality({ DomainCoordinatorIdentity[d], DomainSidecarIdentity[d],
// DomainSandboxIdentity[d] }) = 3 (lines 259 and 1385).
func (m *Model) roleIdentitiesDistinct(d Domain) bool {
	c, sc, sb := m.f.DomainCoordinatorIdentity[d], m.f.DomainSidecarIdentity[d], m.f.DomainSandboxIdentity[d]
	return c != sc && c != sb && sc != sb
}

// RuntimeIdentityTupleAuthorized is RuntimeIdentityTupleAuthorized(d)
// (line 249).
func (m *Model) RuntimeIdentityTupleAuthorized(st *State, d Domain) bool {
	return st.TrustReady[d] &&
		st.DomainPhase[d] == DomainReady &&
		st.Published.Has(d) &&
		st.SidecarState[d] == ResourceReady &&
		st.SandboxState[d] == ResourceReady &&
		RuntimeLogicalAuthorityPresent(st, d) &&
		m.f.CoordinatorCertificateValid[d] &&
		m.f.SidecarCertificateValid[d] &&
		m.f.SandboxCertificateValid[d] &&
		m.roleIdentitiesDistinct(d)
}

// RuntimeIdentityTupleReady is RuntimeIdentityTupleReady(d) (line 262).
func (m *Model) RuntimeIdentityTupleReady(st *State, d Domain) bool {
	return m.RuntimeIdentityTupleAuthorized(st, d) &&
		st.HostCoordinatorProc[d] == ProcessAlive &&
		RuntimeAuthorityResponsive(st, d)
}

// SessionIdentityTupleRegistered is SessionIdentityTupleRegistered(s)
// (line 267).
func (m *Model) SessionIdentityTupleRegistered(st *State, s Session) bool {
	return st.Registered[m.Dom(s)].Has(s) &&
		st.Connected[m.Dom(s)].Has(s) &&
		m.f.CliCertificateValid[s]
}

// RequestIdentityTupleMatches is RequestIdentityTupleMatches(r) (line 272).
func (m *Model) RequestIdentityTupleMatches(r Request) bool {
	s := m.ReqSession(r)
	d := m.ReqDomain(r)
	return m.f.RequestSandboxIdentity[r] == m.f.DomainSandboxIdentity[d] &&
		m.f.RequestCliIdentity[r] == m.f.SessionCliIdentity[s] &&
		m.f.RequestSessionAnchor[r] == m.f.SessionAnchorIdentity[s]
}

// ApprovalIdentityTupleMatches is ApprovalIdentityTupleMatches(r)
// (line 280).
func (m *Model) ApprovalIdentityTupleMatches(r Request) bool {
	s := m.ReqSession(r)
	return m.f.ApprovalCliIdentity[r] == m.f.SessionCliIdentity[s] &&
		m.f.ApprovalSessionAnchor[r] == m.f.SessionAnchorIdentity[s] &&
		m.f.ApprovalSignatureValid[r]
}

// Interested is Interested(d) (line 289).
func (m *Model) Interested(st *State, d Domain) SessionSet {
	var set SessionSet
	for s := range Session(NumSessions) {
		if m.Dom(s) != d {
			continue
		}
		switch st.SessionPhase[s] {
		case SessionWaiting, SessionRegistering, SessionAttached, SessionPrompting,
			SessionHostExecuting:
			set = set.With(s)
		}
	}
	return set
}

// RequestsForDomain is RequestsForDomain(d) (line 295).
func (m *Model) RequestsForDomain(d Domain) RequestSet {
	var set RequestSet
	for r := range Request(NumRequests) {
		if m.ReqDomain(r) == d {
			set = set.With(r)
		}
	}
	return set
}
