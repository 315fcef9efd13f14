package domainstore

import (
	"lazaret.dev/pkg/hostid"
	"lazaret.dev/pkg/ids"
	"lazaret.dev/pkg/store"
)

var (
	testBoot    = hostid.BootID{0xb0, 0x07}
	oldBoot     = hostid.BootID{0x01, 0xd0}
	testDomain  = ids.DomainID{0xd0}
	testGen     = ids.GenerationID{0x9e}
	testSidecar = ids.SidecarID{0x5c}
	testSession = ids.SessionID{0x55}
	proof       = store.ProvenAbsent("test: sealed runtime-absence check")
	testEnv     = Env{Boot: testBoot}
	proofEnv    = Env{Boot: testBoot, Proof: proof}
)

func pid(n byte) hostid.PidfsProcessIdentityV1 {
	return hostid.PidfsProcessIdentityV1{
		Authority: hostid.PidfsProcessAuthorityV1{BootID: testBoot, PidfsDev: 15, PidfsInode: 1000 + uint64(n)},
		HostPID:   2000 + uint32(n), StartTimeTicks: 300 + uint64(n),
	}
}

func oldPid(n byte) hostid.PidfsProcessIdentityV1 {
	p := pid(n)
	p.Authority.BootID = oldBoot
	return p
}

func staged(n byte) hostid.PersistedHostProcessOwnership    { return hostid.StagedOwnership(pid(n)) }
func committed(n byte) hostid.PersistedHostProcessOwnership { return hostid.CommittedOwnership(pid(n)) }

var unassigned = hostid.PersistedHostProcessOwnership{}

func ptr[T any](v T) *T { return &v }

func digest(b byte) *ids.Digest { d := ids.Digest{b, 0xdd}; return &d }

func mount(n uint64) *hostid.MountIdentity {
	return &hostid.MountIdentity{MountID: 500 + n, Device: 64, Inode: 900 + n}
}

func ns(n uint64) *hostid.NamespaceIdentity {
	return &hostid.NamespaceIdentity{Device: 4, Inode: 4026531000 + n}
}

func part(role Role, state ParticipantState, o *ParticipantOwnership) *Participant {
	return &Participant{GenerationID: testGen, Role: role, State: state, Ownership: o}
}

func evidence() *ReadinessEvidence {
	e := NewReadinessEvidence(testDomain, testGen, testSidecar, *digest(0xf1))
	return &e
}

// full returns the complete, serviceable snapshot of each role.
func full(role Role) *ParticipantOwnership {
	switch role {
	case RolePreparedLower:
		return &ParticipantOwnership{PreparedLower: &PreparedLowerOwnership{
			PreparedArtifactID: digest(1), SourceIdentity: digest(2), LeaseState: ptr(LeaseHeld),
			Path: ptr("/data/artifacts/a1"), Device: ptr[uint64](64), Inode: ptr[uint64](77),
		}}
	case RoleStateAnchor:
		return &ParticipantOwnership{StateAnchor: &StateAnchorOwnership{
			LowerArtifactID: digest(1), UpperPath: ptr("/data/d/upper"), WorkPath: ptr("/data/d/work"),
			MergedPath: ptr("/run/l/merged"), Daemon: committed(1), Mount: mount(1),
		}}
	case RoleGitRouting:
		return &ParticipantOwnership{GitRouting: &GitRoutingOwnership{
			Mountpoint: ptr("/run/l/workspace"), HostRoot: ptr("/home/u/src"), IsolatedRoot: ptr("/data/d/isolated"),
			Daemon: committed(2), Mount: mount(2),
		}}
	case RoleNetwork:
		return &ParticipantOwnership{Network: &NetworkOwnership{
			DerivedPolicyDigest: digest(3), ReadinessFingerprint: digest(0xf1), ReadinessEvidence: evidence(),
			Namespace: ns(1), RuntimeSupervisor: committed(3),
		}}
	case RoleHelper:
		return &ParticipantOwnership{Helper: &HelperOwnership{
			NetworkSidecarID: ptr(testSidecar), ConnectivityHelper: committed(4), RuntimeSupervisor: committed(5),
		}}
	case RoleSandbox:
		return &ParticipantOwnership{Sandbox: &SandboxOwnership{
			ContainerID: ptr("lazaret-9e"), RuntimeRoot: ptr("/run/l/runsc"), RuntimeRootIdentity: mount(3),
			BundleDigest: digest(4), HostCoordinator: committed(6), RuntimeSupervisor: committed(7), AttachedRunsc: committed(8),
		}}
	case RolePublication:
		return &ParticipantOwnership{Publication: &PublicationOwnership{
			StagedSocketPath: ptr("/run/l/.control.sock.new"), StagedIdentityPath: ptr("/run/l/.identity.new"),
			SocketPath: ptr("/run/l/control.sock"), IdentityPath: ptr("/run/l/identity"),
			SocketIdentity: mount(4), IdentityFileIdentity: mount(5),
		}}
	}
	return nil
}

// staging returns the complete snapshot of role with every acquired child
// slot only Staged (direct slots stay Committed): the Intent record just
// before the move to the active state.
func staging(role Role) *ParticipantOwnership {
	o := full(role)
	switch role {
	case RolePreparedLower:
		o.PreparedLower.LeaseState = ptr(LeaseIntent)
	case RoleStateAnchor:
		o.StateAnchor.Daemon = staged(1)
	case RoleGitRouting:
		o.GitRouting.Daemon = staged(2)
	case RoleHelper:
		o.Helper.ConnectivityHelper = staged(4)
	case RoleSandbox:
		o.Sandbox.RuntimeSupervisor = staged(7)
		o.Sandbox.AttachedRunsc = staged(8)
	}
	return o
}

func releasing(role Role) *ParticipantOwnership {
	o := full(role)
	if role == RolePreparedLower {
		o.PreparedLower.LeaseState = ptr(LeaseReleaseIntent)
	}
	return o
}

func edit(o *ParticipantOwnership, f func(o *ParticipantOwnership)) *ParticipantOwnership {
	c := clone(o)
	f(c)
	return c
}

// clone deep-copies an ownership through its storage encoding.
func clone(o *ParticipantOwnership) *ParticipantOwnership {
	p := Participant{GenerationID: testGen, Role: RolePreparedLower, State: StateIntent, Ownership: o}
	b, err := encodeForTest(p)
	if err != nil {
		panic(err)
	}
	var back Participant
	if err := decodeForTest(b, &back); err != nil {
		panic(err)
	}
	return back.Ownership
}
