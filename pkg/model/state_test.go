package model

import (
	"slices"
	"strings"
	"testing"
)

func TestKeyWidths(t *testing.T) {
	tests := []struct {
		name  string
		count int // number of values the field takes under TypeOK
		width int
	}{
		{"DomainPhase", int(numDomainPhases), widthDomainPhase},
		{"CoordinatorState", int(numCoordinatorStates), widthCoordinatorState},
		{"MountState", int(numMountStates), widthMountState},
		{"ResourceState", int(numResourceStates), widthResourceState},
		{"bool", 2, widthBool},
		{"lockOwner", int(NoSession) + 1, widthLockOwner},
		{"SessionPhase", int(numSessionPhases), widthSessionPhase},
		{"TerminalRoute", int(numTerminalRoutes), widthTerminalRoute},
		{"ConnectionState", int(numConnectionStates), widthConnectionState},
		{"activeRequest", int(NoRequest) + 1, widthActiveRequest},
		{"RequestPhase", int(numRequestPhases), widthRequestPhase},
		{"ApprovalSource", int(numApprovalSources), widthApprovalSource},
		{"approvedCommand", int(NoCommand) + 1, widthApprovedCommand},
		{"ProcessState", int(numProcessStates), widthProcessState},
		{"EdgeState", int(numEdgeStates), widthEdgeState},
		{"runtimeFaultsRemaining", MaxRuntimeFaults + 1, widthFaults},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if 1<<tc.width < tc.count {
				t.Errorf("width %d holds %d values, the field takes %d", tc.width, 1<<tc.width, tc.count)
			}
			if tc.width > 1 && 1<<(tc.width-1) >= tc.count {
				t.Errorf("width %d is wider than the %d values need", tc.width, tc.count)
			}
		})
	}
	if keyBits != 78 {
		t.Errorf("keyBits = %d, want 78", keyBits)
	}
}

// maxState sets every field to the largest value TypeOK allows, so that
// every bit of the layout is exercised.
func maxState() State {
	var st State
	for d := range Domain(NumDomains) {
		st.DomainPhase[d] = numDomainPhases - 1
		st.CoordinatorState[d] = numCoordinatorStates - 1
		st.StateAnchorState[d] = numMountStates - 1
		st.SidecarState[d] = numResourceStates - 1
		st.SandboxState[d] = numResourceStates - 1
		st.TrustReady[d] = true
		st.LockOwner[d] = NoSession
		st.Registered[d] = allSessions
		st.Connected[d] = allSessions
		st.DomainLockHeld[d] = true
		st.HostCoordinatorProc[d] = numProcessStates - 1
		st.RuntimeSupervisorProc[d] = numProcessStates - 1
		st.AttachedRunscProc[d] = numProcessStates - 1
		st.RuntimeCausalEdge[d] = numEdgeStates - 1
		st.RuntimeFaultsRemaining[d] = MaxRuntimeFaults
	}
	st.Published = allDomains
	for s := range Session(NumSessions) {
		st.SessionPhase[s] = numSessionPhases - 1
		st.TerminalRoute[s] = numTerminalRoutes - 1
		st.ConnectionState[s] = numConnectionStates - 1
		st.ActiveRequest[s] = NoRequest
	}
	for r := range Request(NumRequests) {
		st.RequestPhase[r] = numRequestPhases - 1
		st.ApprovalSource[r] = numApprovalSources - 1
		st.ApprovedCommand[r] = NoCommand
	}
	st.HostRunning = allRequests
	return st
}

func TestKeyRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		st   State
	}{
		{"zero", State{}},
		{"init", initState()},
		{"max", maxState()},
		{"mixed", func() State {
			st := maxState()
			st.RequestPhase[R2] = RequestExecuting
			st.SessionPhase[S1] = SessionPrompting
			st.RuntimeFaultsRemaining[D1] = 1
			st.Connected[D1] = 0
			return st
		}()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if !Lazaret.TypeOK(&tc.st) {
				t.Fatalf("test state fails TypeOK")
			}
			k := tc.st.Key()
			if got := k.State(); got != tc.st {
				t.Fatalf("round trip:\n%s\nwant:\n%s", got, tc.st)
			}
			if k[1]>>(keyBits-64) != 0 {
				t.Fatalf("key %x uses bits beyond %d", k, keyBits)
			}
		})
	}
	if maxState().Key() == initState().Key() {
		t.Fatal("distinct states share a key")
	}
}

// TestKeyDistinguishesFields changes each field alone and checks the key
// changes: no field is left out of the encoding.
func TestKeyDistinguishesFields(t *testing.T) {
	base := initState()
	edits := map[string]func(*State){
		"domainPhase":            func(s *State) { s.DomainPhase[D1] = DomainRecovering },
		"coordinatorState":       func(s *State) { s.CoordinatorState[D1] = CoordinatorFailed },
		"stateAnchorState":       func(s *State) { s.StateAnchorState[D1] = Mounted },
		"sidecarState":           func(s *State) { s.SidecarState[D1] = ResourceFailed },
		"sandboxState":           func(s *State) { s.SandboxState[D1] = ResourceReady },
		"trustReady":             func(s *State) { s.TrustReady[D1] = true },
		"lockOwner":              func(s *State) { s.LockOwner[D1] = S2 },
		"published":              func(s *State) { s.Published = s.Published.With(D1) },
		"registered":             func(s *State) { s.Registered[D1] = s.Registered[D1].With(S2) },
		"connected":              func(s *State) { s.Connected[D1] = s.Connected[D1].With(S1) },
		"sessionPhase":           func(s *State) { s.SessionPhase[S2] = SessionFailed },
		"terminalRoute":          func(s *State) { s.TerminalRoute[S1] = RouteHostProcess },
		"connectionState":        func(s *State) { s.ConnectionState[S2] = Connected },
		"activeRequest":          func(s *State) { s.ActiveRequest[S1] = R3 },
		"requestPhase":           func(s *State) { s.RequestPhase[R3] = RequestFailed },
		"approvalSource":         func(s *State) { s.ApprovalSource[R2] = ApprovalDeveloper },
		"approvedCommand":        func(s *State) { s.ApprovedCommand[R1] = EditedCmd },
		"hostRunning":            func(s *State) { s.HostRunning = s.HostRunning.With(R3) },
		"domainLockHeld":         func(s *State) { s.DomainLockHeld[D1] = true },
		"hostCoordinatorProc":    func(s *State) { s.HostCoordinatorProc[D1] = ProcessDead },
		"runtimeSupervisorProc":  func(s *State) { s.RuntimeSupervisorProc[D1] = ProcessStopped },
		"attachedRunscProc":      func(s *State) { s.AttachedRunscProc[D1] = ProcessStarting },
		"runtimeCausalEdge":      func(s *State) { s.RuntimeCausalEdge[D1] = Armed },
		"runtimeFaultsRemaining": func(s *State) { s.RuntimeFaultsRemaining[D1] = 0 },
	}
	if len(edits) != int(NumVars) {
		t.Fatalf("%d edits for %d variables", len(edits), NumVars)
	}
	seen := map[Key]string{base.Key(): "init"}
	for name, edit := range edits {
		t.Run(name, func(t *testing.T) {
			st := base
			edit(&st)
			if ch := Changed(&base, &st); ch.String() != "{"+name+"}" {
				t.Errorf("Changed = %v, want {%s}", ch, name)
			}
			k := st.Key()
			if other, dup := seen[k]; dup {
				t.Errorf("editing %s gives the key of %s", name, other)
			}
			seen[k] = name
			if k.State() != st {
				t.Errorf("round trip lost the edit")
			}
		})
	}
}

func TestTypeOKRejects(t *testing.T) {
	edits := map[string]func(*State){
		"domainPhase":            func(s *State) { s.DomainPhase[D1] = numDomainPhases },
		"lockOwner":              func(s *State) { s.LockOwner[D1] = NoSession + 1 },
		"registered":             func(s *State) { s.Registered[D1] = 1 << NumSessions },
		"published":              func(s *State) { s.Published = 1 << NumDomains },
		"activeRequest":          func(s *State) { s.ActiveRequest[S2] = NoRequest + 1 },
		"requestPhase":           func(s *State) { s.RequestPhase[R1] = numRequestPhases },
		"approvedCommand":        func(s *State) { s.ApprovedCommand[R3] = NoCommand + 1 },
		"hostRunning":            func(s *State) { s.HostRunning = 1 << NumRequests },
		"runtimeFaultsRemaining": func(s *State) { s.RuntimeFaultsRemaining[D1] = MaxRuntimeFaults + 1 },
		"attachedRunscProc":      func(s *State) { s.AttachedRunscProc[D1] = numProcessStates },
	}
	for name, edit := range edits {
		t.Run(name, func(t *testing.T) {
			st := initState()
			edit(&st)
			if Lazaret.TypeOK(&st) {
				t.Errorf("TypeOK accepts an out-of-type %s", name)
			}
			if inv, bad := Lazaret.Violated(&st); !bad || inv != "TypeOK" {
				t.Errorf("Violated = %q, %v; want TypeOK", inv, bad)
			}
		})
	}
}

// initGolden is Init as TLC prints a state.
const initGolden = `/\ domainPhase = (D1 :> "Absent")
/\ coordinatorState = (D1 :> "Absent")
/\ stateAnchorState = (D1 :> "Unmounted")
/\ sidecarState = (D1 :> "Stopped")
/\ sandboxState = (D1 :> "Stopped")
/\ trustReady = (D1 :> FALSE)
/\ lockOwner = (D1 :> NoSession)
/\ published = {}
/\ registered = (D1 :> {})
/\ connected = (D1 :> {})
/\ sessionPhase = (S1 :> "New" @@ S2 :> "New")
/\ terminalRoute = (S1 :> "Detached" @@ S2 :> "Detached")
/\ connectionState = (S1 :> "Disconnected" @@ S2 :> "Disconnected")
/\ activeRequest = (S1 :> NoRequest @@ S2 :> NoRequest)
/\ requestPhase = (R1 :> "Unused" @@ R2 :> "Unused" @@ R3 :> "Unused")
/\ approvalSource = (R1 :> NoApproval @@ R2 :> NoApproval @@ R3 :> NoApproval)
/\ approvedCommand = (R1 :> NoCommand @@ R2 :> NoCommand @@ R3 :> NoCommand)
/\ hostRunning = {}
/\ domainLockHeld = (D1 :> FALSE)
/\ hostCoordinatorProc = (D1 :> "Absent")
/\ runtimeSupervisorProc = (D1 :> "Absent")
/\ attachedRunscProc = (D1 :> "Absent")
/\ runtimeCausalEdge = (D1 :> "Unarmed")
/\ runtimeFaultsRemaining = (D1 :> 2)
`

func TestStateString(t *testing.T) {
	if got := Init()[0].String(); got != initGolden {
		t.Errorf("Init printed as\n%s\nwant\n%s", got, initGolden)
	}
	st := maxState()
	st.ApprovalSource[R1] = ApprovalAutoRule
	out := st.String()
	for _, want := range []string{
		`/\ registered = (D1 :> {S1, S2})`,
		`/\ approvalSource = (R1 :> "AutoRule" @@ R2 :> "Developer" @@ R3 :> "Developer")`,
		`/\ hostRunning = {R1, R2, R3}`,
	} {
		if !slices.Contains(strings.Split(out, "\n"), want) {
			t.Errorf("state printed without line %q:\n%s", want, out)
		}
	}
}

func TestInvalidNames(t *testing.T) {
	if got := RequestPhase(200).String(); got != "<invalid RequestPhase 200>" {
		t.Errorf("RequestPhase(200) = %q", got)
	}
	if got := SessionSet(0b101).String(); got != "{S1, <invalid element 2>}" {
		t.Errorf("SessionSet(0b101) = %q", got)
	}
}
