package domainstore

import (
	"errors"
	"testing"

	"lazaret.dev/pkg/hostid"
	"lazaret.dev/pkg/ids"
	"lazaret.dev/pkg/store"
)

func testGeneration(d DomainPhase) *Generation {
	return &Generation{
		DomainID: testDomain, GenerationID: testGen, ConfigurationFingerprint: ids.Digest{0xcf},
		CoordinatorID: ids.CoordinatorID{0xc0}, NetworkSidecarID: testSidecar, SandboxID: ids.SandboxID{0x5b},
		DurableDecision: d,
	}
}

func wantErr(t *testing.T, err, want error) {
	t.Helper()
	if want == nil {
		if err != nil {
			t.Fatalf("legal write refused: %v", err)
		}
		return
	}
	if !errors.Is(err, want) {
		t.Fatalf("= %v, want %v", err, want)
	}
}

func TestGenerationTransitions(t *testing.T) {
	g := testGeneration
	cases := []struct {
		name       string
		prev, next *Generation
		want       error
	}{
		{"create Starting", nil, g(PhaseStarting), nil},
		{"create Ready", nil, g(PhaseReady), store.ErrIllegalTransition},
		{"create Absent", nil, g(PhaseAbsent), store.ErrIllegalTransition},
		{"Starting to Ready", g(PhaseStarting), g(PhaseReady), nil},
		{"Starting to Failed", g(PhaseStarting), g(PhaseFailed), nil},
		{"Ready to Stopping", g(PhaseReady), g(PhaseStopping), nil},
		{"Stopping to Absent", g(PhaseStopping), g(PhaseAbsent), nil},
		{"Failed to Recovering", g(PhaseFailed), g(PhaseRecovering), nil},
		{"Recovering to Absent", g(PhaseRecovering), g(PhaseAbsent), nil},
		{"Failed to Absent (recovery not persisted)", g(PhaseFailed), g(PhaseAbsent), nil},
		{"unchanged", g(PhaseReady), g(PhaseReady), nil},
		{"Ready back to Starting", g(PhaseReady), g(PhaseStarting), store.ErrIllegalTransition},
		{"Failed back to Ready", g(PhaseFailed), g(PhaseReady), store.ErrIllegalTransition},
		{"Recovering to Failed", g(PhaseRecovering), g(PhaseFailed), store.ErrIllegalTransition},
		{"Absent restarted", g(PhaseAbsent), g(PhaseStarting), store.ErrIllegalTransition},
		{"invalid decision", g(PhaseReady), g(0), store.ErrInvalidRecord},
		{"changed coordinator", g(PhaseStarting), func() *Generation { x := g(PhaseReady); x.CoordinatorID[1] = 1; return x }(), store.ErrEvidenceChanged},
		{"changed fingerprint", g(PhaseStarting), func() *Generation { x := g(PhaseStarting); x.ConfigurationFingerprint[1] = 1; return x }(), store.ErrEvidenceChanged},
		{"zero sandbox", nil, func() *Generation { x := g(PhaseStarting); x.SandboxID = ids.SandboxID{}; return x }(), store.ErrInvalidRecord},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { wantErr(t, CheckGeneration(c.prev, c.next), c.want) })
	}
}

func TestSessionTransitions(t *testing.T) {
	s := func(p SessionPhase) *Session {
		return &Session{GenerationID: testGen, SessionID: testSession, CLIID: ids.CLIID{0xc1}, SessionAnchorID: ids.Digest{0xa0}, SessionPhase: p}
	}
	cases := []struct {
		name       string
		prev, next *Session
		want       error
	}{
		{"create New", nil, s(SessionNew), nil},
		{"create Registering", nil, s(SessionRegistering), nil},
		{"New to Waiting", s(SessionNew), s(SessionWaiting), nil},
		{"Registering to Attached", s(SessionRegistering), s(SessionAttached), nil},
		{"Attached to Prompting", s(SessionAttached), s(SessionPrompting), nil},
		{"Prompting to Attached", s(SessionPrompting), s(SessionAttached), nil},
		{"HostExecuting to Attached", s(SessionHostExecuting), s(SessionAttached), nil},
		{"New to Attached (unpersisted steps)", s(SessionNew), s(SessionAttached), nil},
		{"Attached to Closed", s(SessionAttached), s(SessionClosed), nil},
		{"Attached back to Registering", s(SessionAttached), s(SessionRegistering), store.ErrIllegalTransition},
		{"Waiting back to New", s(SessionWaiting), s(SessionNew), store.ErrIllegalTransition},
		{"Closed reopened", s(SessionClosed), s(SessionAttached), store.ErrIllegalTransition},
		{"Failed to Closed", s(SessionFailed), s(SessionClosed), store.ErrIllegalTransition},
		{"changed CLI", s(SessionNew), func() *Session { x := s(SessionWaiting); x.CLIID[1] = 1; return x }(), store.ErrEvidenceChanged},
		{"changed anchor", s(SessionNew), func() *Session { x := s(SessionNew); x.SessionAnchorID[1] = 1; return x }(), store.ErrEvidenceChanged},
		{"invalid phase", nil, s(9), store.ErrInvalidRecord},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { wantErr(t, CheckSession(c.prev, c.next), c.want) })
	}
}

func TestMailboxTransitions(t *testing.T) {
	m := func(s ParticipantState) *Mailbox {
		return &Mailbox{GenerationID: testGen, IdentityPath: "/run/l/identity", InboxPath: "/run/l/inbox", OutboxPath: "/run/l/outbox", State: s}
	}
	cases := []struct {
		name       string
		prev, next *Mailbox
		env        Env
		want       error
	}{
		{"create Intent", nil, m(StateIntent), testEnv, nil},
		{"create Committed", nil, m(StateCommitted), testEnv, store.ErrIllegalTransition},
		{"Intent to Committed", m(StateIntent), m(StateCommitted), testEnv, nil},
		{"Committed to ReleaseIntent", m(StateCommitted), m(StateReleaseIntent), testEnv, nil},
		{"ReleaseIntent to Clean", m(StateReleaseIntent), m(StateClean), proofEnv, nil},
		{"ReleaseIntent to Clean without proof", m(StateReleaseIntent), m(StateClean), testEnv, store.ErrAbsenceProofRequired},
		{"Intent to Clean", m(StateIntent), m(StateClean), proofEnv, nil},
		{"Committed to Clean", m(StateCommitted), m(StateClean), proofEnv, store.ErrIllegalTransition},
		{"Committed back to Intent", m(StateCommitted), m(StateIntent), testEnv, store.ErrIllegalTransition},
		{"Clean to Committed", m(StateClean), m(StateCommitted), testEnv, store.ErrIllegalTransition},
		{"LeaseHeld is no mailbox state", nil, m(StateLeaseHeld), testEnv, store.ErrInvalidRecord},
		{"changed inbox", m(StateIntent), func() *Mailbox { x := m(StateCommitted); x.InboxPath = "/x"; return x }(), testEnv, store.ErrEvidenceChanged},
		{"relative path", nil, func() *Mailbox { x := m(StateIntent); x.OutboxPath = "out"; return x }(), testEnv, store.ErrInvalidRecord},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { wantErr(t, CheckMailbox(c.prev, c.next, c.env), c.want) })
	}
}

func term(state TerminalState, f func(t *SessionTerminal)) *SessionTerminal {
	t := &SessionTerminal{GenerationID: testGen, SessionID: testSession, State: state}
	if f != nil {
		f(t)
	}
	return t
}

func running(t *SessionTerminal) {
	t.ContainerID = ptr("lazaret-9e")
	t.PtyMaster = &PtyIdentity{MasterFD: 9, Device: 136, Inode: 3}
	t.GuestProcess = &GuestProcessIdentity{LeaderPID: 7, LeaderStartTime: 99, ProcessGroupID: 7}
	t.HostCoordinator = committed(6)
	t.ExecClient = committed(10)
}

func TestSessionTerminalTransitions(t *testing.T) {
	stagedExec := func(t *SessionTerminal) { running(t); t.ExecClient = staged(10) }
	both := func(fs ...func(*SessionTerminal)) func(*SessionTerminal) {
		return func(t *SessionTerminal) {
			for _, f := range fs {
				f(t)
			}
		}
	}
	cases := []struct {
		name       string
		prev, next *SessionTerminal
		env        Env
		want       error
	}{
		{"create bare Intent", nil, term(TerminalIntent, nil), testEnv, nil},
		{"create Running", nil, term(TerminalRunning, running), testEnv, store.ErrIllegalTransition},
		{"HC committed directly", term(TerminalIntent, nil), term(TerminalIntent, func(t *SessionTerminal) { t.HostCoordinator = committed(6) }), testEnv, nil},
		{"exec client committed without staging", term(TerminalIntent, nil), term(TerminalIntent, func(t *SessionTerminal) { t.ExecClient = committed(10) }), testEnv, store.ErrIllegalTransition},
		{"partial acquisition", term(TerminalIntent, nil), term(TerminalIntent, func(t *SessionTerminal) { t.ContainerID = ptr("c") }), testEnv, nil},
		{"container replaced", term(TerminalIntent, func(t *SessionTerminal) { t.ContainerID = ptr("c") }), term(TerminalIntent, func(t *SessionTerminal) { t.ContainerID = ptr("d") }), testEnv, store.ErrEvidenceChanged},
		{"pty cleared", term(TerminalIntent, stagedExec), term(TerminalIntent, func(t *SessionTerminal) { stagedExec(t); t.PtyMaster = nil }), testEnv, store.ErrEvidenceChanged},
		{"Intent to Running", term(TerminalIntent, stagedExec), term(TerminalRunning, running), testEnv, nil},
		{"Running without guest process", term(TerminalIntent, both(stagedExec, func(t *SessionTerminal) { t.GuestProcess = nil })), term(TerminalRunning, both(running, func(t *SessionTerminal) { t.GuestProcess = nil })), testEnv, store.ErrMissingEvidence},
		{"Running without pty", term(TerminalIntent, both(stagedExec, func(t *SessionTerminal) { t.PtyMaster = nil })), term(TerminalRunning, both(running, func(t *SessionTerminal) { t.PtyMaster = nil })), testEnv, store.ErrMissingEvidence},
		{"Running without container", term(TerminalIntent, both(stagedExec, func(t *SessionTerminal) { t.ContainerID = nil })), term(TerminalRunning, both(running, func(t *SessionTerminal) { t.ContainerID = nil })), testEnv, store.ErrMissingEvidence},
		{"Running with staged exec client", term(TerminalIntent, stagedExec), term(TerminalRunning, stagedExec), testEnv, store.ErrMissingEvidence},
		{"bare Intent to Running", term(TerminalIntent, nil), term(TerminalRunning, running), testEnv, store.ErrIllegalTransition},
		{"Running rewritten", term(TerminalRunning, running), term(TerminalRunning, running), testEnv, nil},
		{"Running after reboot", term(TerminalRunning, running), term(TerminalRunning, running), Env{Boot: oldBoot}, store.ErrMissingEvidence},
		{"Running changed", term(TerminalRunning, running), term(TerminalRunning, both(running, func(t *SessionTerminal) { t.GuestProcess.LeaderPID = 8 })), testEnv, store.ErrEvidenceChanged},
		{"Running back to Intent", term(TerminalRunning, running), term(TerminalIntent, running), testEnv, store.ErrIllegalTransition},
		{"Running to ReleaseIntent", term(TerminalRunning, running), term(TerminalReleaseIntent, running), testEnv, nil},
		{"Intent to ReleaseIntent retaining staged authority", term(TerminalIntent, stagedExec), term(TerminalReleaseIntent, stagedExec), testEnv, nil},
		{"ReleaseIntent dropping evidence", term(TerminalRunning, running), term(TerminalReleaseIntent, both(running, func(t *SessionTerminal) { t.ExecClient = unassigned })), testEnv, store.ErrEvidenceChanged},
		{"bare Intent to ReleaseIntent", term(TerminalIntent, nil), term(TerminalReleaseIntent, nil), testEnv, store.ErrIllegalTransition},
		{"ReleaseIntent to Clean", term(TerminalReleaseIntent, running), term(TerminalClean, nil), proofEnv, nil},
		{"ReleaseIntent to Clean without proof", term(TerminalReleaseIntent, running), term(TerminalClean, nil), testEnv, store.ErrAbsenceProofRequired},
		{"ReleaseIntent to Clean keeping the pty", term(TerminalReleaseIntent, running), term(TerminalClean, func(t *SessionTerminal) { t.PtyMaster = &PtyIdentity{Inode: 3} }), proofEnv, store.ErrInvalidRecord},
		{"ReleaseIntent back to Running", term(TerminalReleaseIntent, running), term(TerminalRunning, running), testEnv, store.ErrIllegalTransition},
		{"bare Intent to Clean", term(TerminalIntent, nil), term(TerminalClean, nil), proofEnv, nil},
		{"bare Intent to Clean without proof", term(TerminalIntent, nil), term(TerminalClean, nil), testEnv, store.ErrAbsenceProofRequired},
		{"partial Intent to Clean", term(TerminalIntent, func(t *SessionTerminal) { t.ContainerID = ptr("c") }), term(TerminalClean, nil), proofEnv, store.ErrIllegalTransition},
		{"Running to Clean", term(TerminalRunning, running), term(TerminalClean, nil), proofEnv, store.ErrIllegalTransition},
		{"Clean to Intent", term(TerminalClean, nil), term(TerminalIntent, nil), testEnv, store.ErrIllegalTransition},
		{"identity from an old boot", term(TerminalIntent, nil), term(TerminalIntent, func(t *SessionTerminal) { t.HostCoordinator = hostid.CommittedOwnership(oldPid(6)) }), testEnv, store.ErrInvalidRecord},
		{"other session", term(TerminalIntent, nil), func() *SessionTerminal { x := term(TerminalIntent, nil); x.SessionID[1] = 1; return x }(), testEnv, store.ErrReferenceMismatch},
		{"zero pty inode", nil, term(TerminalIntent, func(t *SessionTerminal) { t.PtyMaster = &PtyIdentity{MasterFD: 3} }), testEnv, store.ErrInvalidRecord},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { wantErr(t, CheckSessionTerminal(c.prev, c.next, c.env), c.want) })
	}
}

func TestDomainImmutable(t *testing.T) {
	d := &Domain{DomainID: testDomain, ProfileName: "default", CanonicalWorkspace: "/home/u/src"}
	wantErr(t, CheckDomain(nil, d), nil)
	wantErr(t, CheckDomain(d, d), nil)
	d2 := *d
	d2.ProfileName = "other"
	wantErr(t, CheckDomain(d, &d2), store.ErrEvidenceChanged)
	d3 := *d
	d3.CanonicalWorkspace = "relative"
	wantErr(t, CheckDomain(nil, &d3), store.ErrInvalidRecord)
}
