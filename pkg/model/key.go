package model

// Key is the compact canonical encoding of a State that satisfies TypeOK:
// every field packed into 78 bits, in the order of State's fields. It is
// the visited-set key of the checker. For states satisfying TypeOK,
// a.Key() == b.Key() exactly when a == b, and k.State().Key() == k.
type Key [2]uint64

// Bit widths of the packed fields. Each is the smallest width holding
// every value the field may take under TypeOK (see TestKeyWidths).
const (
	widthDomainPhase      = 3 // 6 DomainPhases
	widthCoordinatorState = 3 // 5 CoordinatorStates
	widthMountState       = 1 // 2 MountStates
	widthResourceState    = 2 // 3 ResourceStates
	widthBool             = 1
	widthLockOwner        = 2 // Sessions \cup {NoSession}
	widthSessionPhase     = 3 // 8 SessionPhases
	widthTerminalRoute    = 2 // 4 TerminalRoutes
	widthConnectionState  = 1 // 2 ConnectionStates
	widthActiveRequest    = 2 // Requests \cup {NoRequest}
	widthRequestPhase     = 4 // 15 RequestPhases
	widthApprovalSource   = 2 // 3 ApprovalSources
	widthApprovedCommand  = 3 // Commands \cup {NoCommand}
	widthProcessState     = 3 // 5 PhysicalProcessStates
	widthEdgeState        = 1 // 2 RuntimeCausalEdgeStates
	widthFaults           = 2 // 0..2
)

// keyBits is the number of bits a Key uses.
const keyBits = NumDomains*(widthDomainPhase+widthCoordinatorState+widthMountState+
	2*widthResourceState+widthBool+widthLockOwner+2*NumSessions+widthBool+
	3*widthProcessState+widthEdgeState+widthFaults) +
	NumDomains + // published
	NumSessions*(widthSessionPhase+widthTerminalRoute+widthConnectionState+widthActiveRequest) +
	NumRequests*(widthRequestPhase+widthApprovalSource+widthApprovedCommand) +
	NumRequests // hostRunning

// The layout must fit the two words of a Key.
var _ = [128 - keyBits]struct{}{}

type packer struct {
	k   Key
	off uint
}

func (p *packer) put(v uint8, bits uint) {
	x := uint64(v) & (1<<bits - 1)
	w, o := p.off/64, p.off%64
	p.k[w] |= x << o
	if o+bits > 64 {
		p.k[w+1] |= x >> (64 - o)
	}
	p.off += bits
}

func (p *packer) get(bits uint) uint8 {
	w, o := p.off/64, p.off%64
	x := p.k[w] >> o
	if o+bits > 64 {
		x |= p.k[w+1] << (64 - o)
	}
	p.off += bits
	return uint8(x & (1<<bits - 1))
}

func b2u(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

// Key encodes st. The encoding is injective only on states satisfying
// TypeOK; the checker verifies TypeOK before it encodes a state.
func (st State) Key() Key {
	var p packer
	for d := range NumDomains {
		p.put(uint8(st.DomainPhase[d]), widthDomainPhase)
		p.put(uint8(st.CoordinatorState[d]), widthCoordinatorState)
		p.put(uint8(st.StateAnchorState[d]), widthMountState)
		p.put(uint8(st.SidecarState[d]), widthResourceState)
		p.put(uint8(st.SandboxState[d]), widthResourceState)
		p.put(b2u(st.TrustReady[d]), widthBool)
		p.put(uint8(st.LockOwner[d]), widthLockOwner)
		p.put(uint8(st.Registered[d]), NumSessions)
		p.put(uint8(st.Connected[d]), NumSessions)
		p.put(b2u(st.DomainLockHeld[d]), widthBool)
		p.put(uint8(st.HostCoordinatorProc[d]), widthProcessState)
		p.put(uint8(st.RuntimeSupervisorProc[d]), widthProcessState)
		p.put(uint8(st.AttachedRunscProc[d]), widthProcessState)
		p.put(uint8(st.RuntimeCausalEdge[d]), widthEdgeState)
		p.put(st.RuntimeFaultsRemaining[d], widthFaults)
	}
	p.put(uint8(st.Published), NumDomains)
	for s := range NumSessions {
		p.put(uint8(st.SessionPhase[s]), widthSessionPhase)
		p.put(uint8(st.TerminalRoute[s]), widthTerminalRoute)
		p.put(uint8(st.ConnectionState[s]), widthConnectionState)
		p.put(uint8(st.ActiveRequest[s]), widthActiveRequest)
	}
	for r := range NumRequests {
		p.put(uint8(st.RequestPhase[r]), widthRequestPhase)
		p.put(uint8(st.ApprovalSource[r]), widthApprovalSource)
		p.put(uint8(st.ApprovedCommand[r]), widthApprovedCommand)
	}
	p.put(uint8(st.HostRunning), NumRequests)
	return p.k
}

// State decodes k. Bits above keyBits are ignored; a Key not produced by
// State.Key may decode to a state that fails TypeOK.
func (k Key) State() State {
	var st State
	p := packer{k: k}
	for d := range NumDomains {
		st.DomainPhase[d] = DomainPhase(p.get(widthDomainPhase))
		st.CoordinatorState[d] = CoordinatorState(p.get(widthCoordinatorState))
		st.StateAnchorState[d] = MountState(p.get(widthMountState))
		st.SidecarState[d] = ResourceState(p.get(widthResourceState))
		st.SandboxState[d] = ResourceState(p.get(widthResourceState))
		st.TrustReady[d] = p.get(widthBool) == 1
		st.LockOwner[d] = Session(p.get(widthLockOwner))
		st.Registered[d] = SessionSet(p.get(NumSessions))
		st.Connected[d] = SessionSet(p.get(NumSessions))
		st.DomainLockHeld[d] = p.get(widthBool) == 1
		st.HostCoordinatorProc[d] = ProcessState(p.get(widthProcessState))
		st.RuntimeSupervisorProc[d] = ProcessState(p.get(widthProcessState))
		st.AttachedRunscProc[d] = ProcessState(p.get(widthProcessState))
		st.RuntimeCausalEdge[d] = EdgeState(p.get(widthEdgeState))
		st.RuntimeFaultsRemaining[d] = p.get(widthFaults)
	}
	st.Published = DomainSet(p.get(NumDomains))
	for s := range NumSessions {
		st.SessionPhase[s] = SessionPhase(p.get(widthSessionPhase))
		st.TerminalRoute[s] = TerminalRoute(p.get(widthTerminalRoute))
		st.ConnectionState[s] = ConnectionState(p.get(widthConnectionState))
		st.ActiveRequest[s] = Request(p.get(widthActiveRequest))
	}
	for r := range NumRequests {
		st.RequestPhase[r] = RequestPhase(p.get(widthRequestPhase))
		st.ApprovalSource[r] = ApprovalSource(p.get(widthApprovalSource))
		st.ApprovedCommand[r] = Command(p.get(widthApprovedCommand))
	}
	st.HostRunning = RequestSet(p.get(NumRequests))
	return st
}
