package domainstore

import (
	"errors"
	"testing"

	"lazaret.dev/pkg/hostid"
	"lazaret.dev/pkg/store"
)

type participantCase struct {
	name string
	prev *Participant
	next *Participant
	env  Env
	want error // nil: legal
}

func runParticipantCases(t *testing.T, cases []participantCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := CheckParticipant(c.prev, c.next, c.env)
			if c.want == nil {
				if err != nil {
					t.Fatalf("legal transition refused: %v", err)
				}
				return
			}
			if !errors.Is(err, c.want) {
				t.Fatalf("= %v, want %v", err, c.want)
			}
			var re *store.RecordError
			if !errors.As(err, &re) {
				t.Fatalf("error %T is not a *store.RecordError", err)
			}
		})
	}
}

func TestParticipantPerRole(t *testing.T) {
	for _, role := range Roles() {
		active := role.ActiveState()
		var cases []participantCase
		add := func(name string, prev, next *Participant, env Env, want error) {
			cases = append(cases, participantCase{role.String() + "/" + name, prev, next, env, want})
		}
		bare := part(role, StateIntent, nil)
		add("create bare Intent", nil, bare, testEnv, nil)
		add("bare Intent rewritten", bare, bare, testEnv, nil)
		for _, s := range []ParticipantState{active, StateReleaseIntent, StateClean} {
			add("create in "+s.String(), nil, part(role, s, full(role)), proofEnv, store.ErrIllegalTransition)
		}
		add("bare Intent to staged snapshot", bare, part(role, StateIntent, staging(role)), testEnv, nil)
		add("staged snapshot to active", part(role, StateIntent, staging(role)), part(role, active, full(role)), testEnv, nil)
		add("bare Intent directly to active", bare, part(role, active, full(role)), testEnv, store.ErrIllegalTransition)
		add("active rewritten unchanged", part(role, active, full(role)), part(role, active, full(role)), testEnv, nil)
		if role != RolePreparedLower && role != RolePublication {
			// Roles with process slots: committed ownership from another
			// boot is not current.
			add("active after reboot", part(role, active, full(role)), part(role, active, full(role)), Env{Boot: oldBoot}, store.ErrMissingEvidence)
		}
		add("active back to Intent", part(role, active, full(role)), part(role, StateIntent, full(role)), testEnv, store.ErrIllegalTransition)
		add("active straight to Clean", part(role, active, full(role)), part(role, StateClean, EmptyOwnership(role)), proofEnv, store.ErrIllegalTransition)
		add("active to ReleaseIntent", part(role, active, full(role)), part(role, StateReleaseIntent, releasing(role)), testEnv, nil)
		add("ReleaseIntent rewritten unchanged", part(role, StateReleaseIntent, releasing(role)), part(role, StateReleaseIntent, releasing(role)), testEnv, nil)
		add("ReleaseIntent back to active", part(role, StateReleaseIntent, releasing(role)), part(role, active, full(role)), testEnv, store.ErrIllegalTransition)
		add("ReleaseIntent back to Intent", part(role, StateReleaseIntent, releasing(role)), part(role, StateIntent, full(role)), testEnv, store.ErrIllegalTransition)
		add("ReleaseIntent after reboot keeps old evidence", part(role, StateReleaseIntent, releasing(role)), part(role, StateReleaseIntent, releasing(role)), Env{Boot: oldBoot}, nil)
		add("ReleaseIntent to Clean", part(role, StateReleaseIntent, releasing(role)), part(role, StateClean, EmptyOwnership(role)), proofEnv, nil)
		add("ReleaseIntent to Clean without proof", part(role, StateReleaseIntent, releasing(role)), part(role, StateClean, EmptyOwnership(role)), testEnv, store.ErrAbsenceProofRequired)
		add("ReleaseIntent to Clean with an empty proof", part(role, StateReleaseIntent, releasing(role)), part(role, StateClean, EmptyOwnership(role)), Env{Boot: testBoot, Proof: &store.AbsenceProof{}}, store.ErrAbsenceProofRequired)
		add("ReleaseIntent to Clean keeping evidence", part(role, StateReleaseIntent, releasing(role)), part(role, StateClean, releasing(role)), proofEnv, store.ErrInvalidRecord)
		add("ReleaseIntent to Clean with ownership None", part(role, StateReleaseIntent, releasing(role)), part(role, StateClean, nil), proofEnv, store.ErrEvidenceChanged)
		add("Intent snapshot to ReleaseIntent", part(role, StateIntent, staging(role)), part(role, StateReleaseIntent, releasingFrom(role, staging(role))), testEnv, nil)
		add("Intent snapshot straight to Clean", part(role, StateIntent, staging(role)), part(role, StateClean, EmptyOwnership(role)), proofEnv, store.ErrIllegalTransition)
		add("bare Intent to Clean", bare, part(role, StateClean, EmptyOwnership(role)), proofEnv, nil)
		add("bare Intent to Clean without proof", bare, part(role, StateClean, EmptyOwnership(role)), testEnv, store.ErrAbsenceProofRequired)
		add("bare Intent to ReleaseIntent", bare, part(role, StateReleaseIntent, releasing(role)), testEnv, store.ErrIllegalTransition)
		add("Clean rewritten unchanged", part(role, StateClean, EmptyOwnership(role)), part(role, StateClean, EmptyOwnership(role)), testEnv, nil)
		add("Clean back to Intent", part(role, StateClean, EmptyOwnership(role)), part(role, StateIntent, nil), testEnv, store.ErrEvidenceChanged)
		add("Clean to ReleaseIntent", part(role, StateClean, EmptyOwnership(role)), part(role, StateReleaseIntent, releasing(role)), testEnv, store.ErrIllegalTransition)
		add("snapshot back to None", part(role, StateIntent, staging(role)), bare, testEnv, store.ErrEvidenceChanged)
		add("Intent with an empty snapshot", bare, part(role, StateIntent, EmptyOwnership(role)), testEnv, store.ErrInvalidRecord)
		other := RolePublication
		if role == RolePublication {
			other = RoleSandbox
		}
		add("ownership of another role", bare, part(role, StateIntent, staging(other)), testEnv, store.ErrInvalidRecord)
		add("two ownership variants", bare, part(role, StateIntent, edit(staging(role), func(o *ParticipantOwnership) {
			if role == RolePublication {
				o.Sandbox = staging(RoleSandbox).Sandbox
			} else {
				o.Publication = full(RolePublication).Publication
			}
		})), testEnv, store.ErrInvalidRecord)
		for _, s := range []ParticipantState{StateLeaseHeld, StatePrepared, StateCommitted} {
			if s != active {
				add("non-serviceable active state "+s.String(), part(role, StateIntent, staging(role)), part(role, s, full(role)), testEnv, store.ErrIllegalTransition)
			}
		}
		runParticipantCases(t, cases)
	}
}

// releasingFrom is snap moved to ReleaseIntent: identical but for
// PreparedLower's recorded lease phase.
func releasingFrom(role Role, snap *ParticipantOwnership) *ParticipantOwnership {
	o := clone(snap)
	if role == RolePreparedLower && o.PreparedLower.LeaseState != nil {
		o.PreparedLower.LeaseState = ptr(LeaseReleaseIntent)
	}
	return o
}

// TestParticipantRequiredEvidence removes each required field or process
// commitment in turn from the active snapshot of each role.
func TestParticipantRequiredEvidence(t *testing.T) {
	type removal struct {
		name string
		f    func(o *ParticipantOwnership)
		want error
	}
	removals := map[Role][]removal{
		RolePreparedLower: {
			{"prepared_artifact_id", func(o *ParticipantOwnership) { o.PreparedLower.PreparedArtifactID = nil }, store.ErrMissingEvidence},
			{"source_identity", func(o *ParticipantOwnership) { o.PreparedLower.SourceIdentity = nil }, store.ErrMissingEvidence},
			{"lease_state Intent", func(o *ParticipantOwnership) { o.PreparedLower.LeaseState = ptr(LeaseIntent) }, store.ErrMissingEvidence},
			{"path", func(o *ParticipantOwnership) { o.PreparedLower.Path = nil }, store.ErrMissingEvidence},
			{"device", func(o *ParticipantOwnership) { o.PreparedLower.Device = nil }, store.ErrMissingEvidence},
			{"inode", func(o *ParticipantOwnership) { o.PreparedLower.Inode = nil }, store.ErrMissingEvidence},
		},
		RoleStateAnchor: {
			{"lower_artifact_id", func(o *ParticipantOwnership) { o.StateAnchor.LowerArtifactID = nil }, store.ErrMissingEvidence},
			{"upper_path", func(o *ParticipantOwnership) { o.StateAnchor.UpperPath = nil }, store.ErrMissingEvidence},
			{"work_path", func(o *ParticipantOwnership) { o.StateAnchor.WorkPath = nil }, store.ErrMissingEvidence},
			{"merged_path", func(o *ParticipantOwnership) { o.StateAnchor.MergedPath = nil }, store.ErrMissingEvidence},
			{"mount", func(o *ParticipantOwnership) { o.StateAnchor.Mount = nil }, store.ErrMissingEvidence},
			{"daemon staged", func(o *ParticipantOwnership) { o.StateAnchor.Daemon = staged(1) }, store.ErrMissingEvidence},
		},
		RoleGitRouting: {
			{"mountpoint", func(o *ParticipantOwnership) { o.GitRouting.Mountpoint = nil }, store.ErrMissingEvidence},
			{"host_root", func(o *ParticipantOwnership) { o.GitRouting.HostRoot = nil }, store.ErrMissingEvidence},
			{"isolated_root", func(o *ParticipantOwnership) { o.GitRouting.IsolatedRoot = nil }, store.ErrMissingEvidence},
			{"mount", func(o *ParticipantOwnership) { o.GitRouting.Mount = nil }, store.ErrMissingEvidence},
			{"daemon staged", func(o *ParticipantOwnership) { o.GitRouting.Daemon = staged(2) }, store.ErrMissingEvidence},
		},
		RoleNetwork: {
			{"derived_policy_digest", func(o *ParticipantOwnership) { o.Network.DerivedPolicyDigest = nil }, store.ErrMissingEvidence},
			{"readiness_fingerprint", func(o *ParticipantOwnership) { o.Network.ReadinessFingerprint = nil }, store.ErrReferenceMismatch},
			{"readiness_evidence", func(o *ParticipantOwnership) { o.Network.ReadinessEvidence = nil }, store.ErrMissingEvidence},
			{"namespace", func(o *ParticipantOwnership) { o.Network.Namespace = nil }, store.ErrMissingEvidence},
			{"runtime_supervisor unassigned", func(o *ParticipantOwnership) { o.Network.RuntimeSupervisor = unassigned }, store.ErrMissingEvidence},
		},
		RoleHelper: {
			{"network_sidecar_id", func(o *ParticipantOwnership) { o.Helper.NetworkSidecarID = nil }, store.ErrMissingEvidence},
			{"connectivity_helper staged", func(o *ParticipantOwnership) { o.Helper.ConnectivityHelper = staged(4) }, store.ErrMissingEvidence},
			{"runtime_supervisor unassigned", func(o *ParticipantOwnership) { o.Helper.RuntimeSupervisor = unassigned }, store.ErrMissingEvidence},
		},
		RoleSandbox: {
			{"container_id", func(o *ParticipantOwnership) { o.Sandbox.ContainerID = nil }, store.ErrMissingEvidence},
			{"runtime_root", func(o *ParticipantOwnership) { o.Sandbox.RuntimeRoot = nil }, store.ErrMissingEvidence},
			{"runtime_root_identity", func(o *ParticipantOwnership) { o.Sandbox.RuntimeRootIdentity = nil }, store.ErrMissingEvidence},
			{"bundle_digest", func(o *ParticipantOwnership) { o.Sandbox.BundleDigest = nil }, store.ErrMissingEvidence},
			{"host_coordinator unassigned", func(o *ParticipantOwnership) { o.Sandbox.HostCoordinator = unassigned }, store.ErrMissingEvidence},
			{"runtime_supervisor staged", func(o *ParticipantOwnership) { o.Sandbox.RuntimeSupervisor = staged(7) }, store.ErrMissingEvidence},
			{"attached_runsc staged", func(o *ParticipantOwnership) { o.Sandbox.AttachedRunsc = staged(8) }, store.ErrMissingEvidence},
		},
		RolePublication: {
			{"staged_socket_path", func(o *ParticipantOwnership) { o.Publication.StagedSocketPath = nil }, store.ErrMissingEvidence},
			{"staged_identity_path", func(o *ParticipantOwnership) { o.Publication.StagedIdentityPath = nil }, store.ErrMissingEvidence},
			{"socket_path", func(o *ParticipantOwnership) { o.Publication.SocketPath = nil }, store.ErrMissingEvidence},
			{"identity_path", func(o *ParticipantOwnership) { o.Publication.IdentityPath = nil }, store.ErrMissingEvidence},
			{"socket_identity", func(o *ParticipantOwnership) { o.Publication.SocketIdentity = nil }, store.ErrMissingEvidence},
			{"identity_file_identity", func(o *ParticipantOwnership) { o.Publication.IdentityFileIdentity = nil }, store.ErrMissingEvidence},
		},
	}
	var cases []participantCase
	for _, role := range Roles() {
		for _, r := range removals[role] {
			partial := edit(full(role), r.f)
			prev := edit(staging(role), r.f)
			if role == RolePreparedLower && r.name == "lease_state Intent" {
				prev = staging(role)
			}
			cases = append(cases, participantCase{role.String() + " without " + r.name, part(role, StateIntent, prev), part(role, role.ActiveState(), partial), testEnv, r.want})
		}
	}
	runParticipantCases(t, cases)
}

func TestParticipantAcquisition(t *testing.T) {
	sa := func(f func(o *StateAnchorOwnership)) *ParticipantOwnership {
		o := &StateAnchorOwnership{UpperPath: ptr("/data/d/upper")}
		f(o)
		return &ParticipantOwnership{StateAnchor: o}
	}
	net := func(f func(o *NetworkOwnership)) *ParticipantOwnership {
		o := &NetworkOwnership{DerivedPolicyDigest: digest(3)}
		f(o)
		return &ParticipantOwnership{Network: o}
	}
	none := func(*StateAnchorOwnership) {}
	I := StateIntent
	cases := []participantCase{
		{"add a field", part(RoleStateAnchor, I, sa(none)), part(RoleStateAnchor, I, sa(func(o *StateAnchorOwnership) { o.WorkPath = ptr("/data/d/work") })), testEnv, nil},
		{"replace a field", part(RoleStateAnchor, I, sa(none)), part(RoleStateAnchor, I, sa(func(o *StateAnchorOwnership) { o.UpperPath = ptr("/elsewhere") })), testEnv, store.ErrEvidenceChanged},
		{"clear a field", part(RoleStateAnchor, I, sa(func(o *StateAnchorOwnership) { o.WorkPath = ptr("/w") })), part(RoleStateAnchor, I, sa(none)), testEnv, store.ErrEvidenceChanged},
		{"stage child", part(RoleStateAnchor, I, sa(none)), part(RoleStateAnchor, I, sa(func(o *StateAnchorOwnership) { o.Daemon = staged(1) })), testEnv, nil},
		{"commit staged child", part(RoleStateAnchor, I, sa(func(o *StateAnchorOwnership) { o.Daemon = staged(1) })), part(RoleStateAnchor, I, sa(func(o *StateAnchorOwnership) { o.Daemon = committed(1) })), testEnv, nil},
		{"commit child without staging", part(RoleStateAnchor, I, sa(none)), part(RoleStateAnchor, I, sa(func(o *StateAnchorOwnership) { o.Daemon = committed(1) })), testEnv, store.ErrIllegalTransition},
		{"commit child in the snapshot-creating write", part(RoleStateAnchor, I, nil), part(RoleStateAnchor, I, sa(func(o *StateAnchorOwnership) { o.Daemon = committed(1) })), testEnv, store.ErrIllegalTransition},
		{"commit a different identity", part(RoleStateAnchor, I, sa(func(o *StateAnchorOwnership) { o.Daemon = staged(1) })), part(RoleStateAnchor, I, sa(func(o *StateAnchorOwnership) { o.Daemon = committed(9) })), testEnv, store.ErrEvidenceChanged},
		{"restage another process", part(RoleStateAnchor, I, sa(func(o *StateAnchorOwnership) { o.Daemon = staged(1) })), part(RoleStateAnchor, I, sa(func(o *StateAnchorOwnership) { o.Daemon = staged(9) })), testEnv, store.ErrEvidenceChanged},
		{"unstage", part(RoleStateAnchor, I, sa(func(o *StateAnchorOwnership) { o.Daemon = staged(1) })), part(RoleStateAnchor, I, sa(none)), testEnv, store.ErrEvidenceChanged},
		{"stage identity from an old boot", part(RoleStateAnchor, I, sa(none)), part(RoleStateAnchor, I, sa(func(o *StateAnchorOwnership) { o.Daemon = hostid.StagedOwnership(oldPid(1)) })), testEnv, store.ErrInvalidRecord},
		{"old-boot staged evidence retained in Intent", part(RoleStateAnchor, I, sa(func(o *StateAnchorOwnership) { o.Daemon = hostid.StagedOwnership(oldPid(1)) })), part(RoleStateAnchor, I, sa(func(o *StateAnchorOwnership) {
			o.Daemon = hostid.StagedOwnership(oldPid(1))
			o.WorkPath = ptr("/w")
		})), testEnv, nil},
		{"direct RS committed when the snapshot is created", part(RoleNetwork, I, nil), part(RoleNetwork, I, net(func(o *NetworkOwnership) { o.RuntimeSupervisor = committed(3) })), testEnv, nil},
		{"direct RS committed into an existing snapshot", part(RoleNetwork, I, net(func(*NetworkOwnership) {})), part(RoleNetwork, I, net(func(o *NetworkOwnership) { o.RuntimeSupervisor = committed(3) })), testEnv, store.ErrIllegalTransition},
		{"direct RS staged then committed", part(RoleNetwork, I, net(func(o *NetworkOwnership) { o.RuntimeSupervisor = staged(3) })), part(RoleNetwork, I, net(func(o *NetworkOwnership) { o.RuntimeSupervisor = committed(3) })), testEnv, nil},
		{"Sandbox HC direct at creation", part(RoleSandbox, I, nil), part(RoleSandbox, I, &ParticipantOwnership{Sandbox: &SandboxOwnership{HostCoordinator: committed(6)}}), testEnv, nil},
		{"Sandbox runsc direct at creation", part(RoleSandbox, I, nil), part(RoleSandbox, I, &ParticipantOwnership{Sandbox: &SandboxOwnership{AttachedRunsc: committed(8)}}), testEnv, store.ErrIllegalTransition},
		{"Helper RS direct at creation", part(RoleHelper, I, nil), part(RoleHelper, I, &ParticipantOwnership{Helper: &HelperOwnership{RuntimeSupervisor: committed(5)}}), testEnv, nil},
		{"Helper process direct at creation", part(RoleHelper, I, nil), part(RoleHelper, I, &ParticipantOwnership{Helper: &HelperOwnership{ConnectivityHelper: committed(4)}}), testEnv, store.ErrIllegalTransition},
		{"relative path", part(RoleStateAnchor, I, nil), part(RoleStateAnchor, I, sa(func(o *StateAnchorOwnership) { o.WorkPath = ptr("data/work") })), testEnv, store.ErrInvalidRecord},
		{"non-UTF-8 path", part(RoleStateAnchor, I, nil), part(RoleStateAnchor, I, sa(func(o *StateAnchorOwnership) { o.WorkPath = ptr("/data/\xff") })), testEnv, store.ErrInvalidRecord},
		{"empty container id", part(RoleSandbox, I, nil), part(RoleSandbox, I, &ParticipantOwnership{Sandbox: &SandboxOwnership{ContainerID: ptr("")}}), testEnv, store.ErrInvalidRecord},
		{"zero mount identity", part(RoleStateAnchor, I, nil), part(RoleStateAnchor, I, sa(func(o *StateAnchorOwnership) { o.Mount = &hostid.MountIdentity{} })), testEnv, store.ErrInvalidRecord},
		{"change generation", part(RoleStateAnchor, I, nil), &Participant{GenerationID: testGen2, Role: RoleStateAnchor, State: I}, testEnv, store.ErrReferenceMismatch},
		{"zero generation", nil, &Participant{Role: RoleStateAnchor, State: I}, testEnv, store.ErrInvalidRecord},
		{"unknown role", nil, &Participant{GenerationID: testGen, Role: 99, State: I}, testEnv, store.ErrInvalidRecord},
		{"unknown state", nil, &Participant{GenerationID: testGen, Role: RoleNetwork, State: 0}, testEnv, store.ErrInvalidRecord},
	}
	runParticipantCases(t, cases)
}

var testGen2 = [16]byte{0x9f}

func TestPreparedLowerLease(t *testing.T) {
	pl := func(f func(o *PreparedLowerOwnership)) *ParticipantOwnership {
		o := &PreparedLowerOwnership{PreparedArtifactID: digest(1)}
		f(o)
		return &ParticipantOwnership{PreparedLower: o}
	}
	lease := func(l LeaseState) func(o *PreparedLowerOwnership) {
		return func(o *PreparedLowerOwnership) { o.LeaseState = ptr(l) }
	}
	anchor := &StateAnchorReleaseEvidence{Daemon: committed(1), UserNamespace: *ns(1), MountNamespace: *ns(2), Mount: *mount(1)}
	withAnchor := func(o *ParticipantOwnership, a *StateAnchorReleaseEvidence) *ParticipantOwnership {
		return edit(o, func(o *ParticipantOwnership) { o.PreparedLower.ReleasedStateAnchor = a })
	}
	R, I, L := StateReleaseIntent, StateIntent, StateLeaseHeld
	P := RolePreparedLower
	held := full(P)
	cases := []participantCase{
		{"record lease Intent", part(P, I, pl(func(*PreparedLowerOwnership) {})), part(P, I, pl(lease(LeaseIntent))), testEnv, nil},
		{"lease Intent to LeaseHeld within Intent", part(P, I, pl(lease(LeaseIntent))), part(P, I, pl(lease(LeaseHeld))), testEnv, nil},
		{"lease from absent to LeaseHeld", part(P, I, pl(func(*PreparedLowerOwnership) {})), part(P, I, pl(lease(LeaseHeld))), testEnv, store.ErrIllegalTransition},
		{"participant LeaseHeld from absent lease phase", part(P, I, edit(held, func(o *ParticipantOwnership) { o.PreparedLower.LeaseState = nil })), part(P, L, held), testEnv, store.ErrIllegalTransition},
		{"lease back to Intent", part(P, I, pl(lease(LeaseHeld))), part(P, I, pl(lease(LeaseIntent))), testEnv, store.ErrIllegalTransition},
		{"lease ReleaseIntent within Intent", part(P, I, pl(lease(LeaseIntent))), part(P, I, pl(lease(LeaseReleaseIntent))), testEnv, store.ErrIllegalTransition},
		{"clear lease phase", part(P, I, pl(lease(LeaseIntent))), part(P, I, pl(func(*PreparedLowerOwnership) {})), testEnv, store.ErrEvidenceChanged},
		{"release anchor evidence in Intent", part(P, I, pl(lease(LeaseIntent))), part(P, I, withAnchor(pl(lease(LeaseIntent)), anchor)), testEnv, store.ErrIllegalTransition},
		{"release anchor evidence on entering LeaseHeld", part(P, I, staging(P)), part(P, L, withAnchor(held, anchor)), testEnv, store.ErrIllegalTransition},
		{"LeaseHeld to ReleaseIntent with anchor evidence", part(P, L, held), part(P, R, withAnchor(releasing(P), anchor)), testEnv, nil},
		{"LeaseHeld to ReleaseIntent keeping lease LeaseHeld", part(P, L, held), part(P, R, held), testEnv, store.ErrIllegalTransition},
		{"Intent without lease phase to ReleaseIntent", part(P, I, pl(func(*PreparedLowerOwnership) {})), part(P, R, pl(func(*PreparedLowerOwnership) {})), testEnv, nil},
		{"ReleaseIntent inventing a lease phase", part(P, I, pl(func(*PreparedLowerOwnership) {})), part(P, R, pl(lease(LeaseReleaseIntent))), testEnv, store.ErrIllegalTransition},
		{"lease Intent to ReleaseIntent with anchor", part(P, I, pl(lease(LeaseIntent))), part(P, R, withAnchor(pl(lease(LeaseReleaseIntent)), anchor)), testEnv, nil},
		{"anchor evidence added within ReleaseIntent", part(P, R, releasing(P)), part(P, R, withAnchor(releasing(P), anchor)), testEnv, store.ErrEvidenceChanged},
		{"anchor evidence replaced within ReleaseIntent", part(P, R, withAnchor(releasing(P), anchor)), part(P, R, withAnchor(releasing(P), &StateAnchorReleaseEvidence{Daemon: committed(2), UserNamespace: *ns(1), MountNamespace: *ns(2), Mount: *mount(1)})), testEnv, store.ErrEvidenceChanged},
		{"anchor evidence cleared by ReleaseIntent rewrite", part(P, R, withAnchor(releasing(P), anchor)), part(P, R, releasing(P)), testEnv, store.ErrEvidenceChanged},
		{"anchor evidence with unassigned daemon", part(P, L, held), part(P, R, withAnchor(releasing(P), &StateAnchorReleaseEvidence{UserNamespace: *ns(1), MountNamespace: *ns(2), Mount: *mount(1)})), testEnv, store.ErrInvalidRecord},
		{"anchor evidence with staged daemon", part(P, L, held), part(P, R, withAnchor(releasing(P), &StateAnchorReleaseEvidence{Daemon: staged(1), UserNamespace: *ns(1), MountNamespace: *ns(2), Mount: *mount(1)})), testEnv, nil},
		{"ReleaseIntent with anchor to Clean", part(P, R, withAnchor(releasing(P), anchor)), part(P, StateClean, EmptyOwnership(P)), proofEnv, nil},
		{"ReleaseIntent changing path", part(P, L, held), part(P, R, edit(releasing(P), func(o *ParticipantOwnership) { o.PreparedLower.Path = ptr("/other") })), testEnv, store.ErrEvidenceChanged},
	}
	runParticipantCases(t, cases)
}

func TestNetworkEvidence(t *testing.T) {
	N := RoleNetwork
	with := func(f func(e *ReadinessEvidence)) *ParticipantOwnership {
		return edit(full(N), func(o *ParticipantOwnership) {
			e := *o.Network.ReadinessEvidence
			f(&e)
			e.Postcard = e.postcard()
			o.Network.ReadinessEvidence = &e
		})
	}
	cases := []participantCase{
		{"matching evidence", part(N, StateIntent, staging(N)), part(N, StateCommitted, full(N)), testEnv, nil},
		{"evidence of another generation", part(N, StateIntent, nil), part(N, StateIntent, with(func(e *ReadinessEvidence) { e.GenerationID = testGen2 })), testEnv, store.ErrReferenceMismatch},
		{"evidence with another fingerprint", part(N, StateIntent, nil), part(N, StateIntent, with(func(e *ReadinessEvidence) { e.ReadinessFingerprint = *digest(0xee) })), testEnv, store.ErrReferenceMismatch},
		{"evidence bytes disagree with typed copy", part(N, StateIntent, nil), part(N, StateIntent, edit(full(N), func(o *ParticipantOwnership) {
			o.Network.ReadinessEvidence.Postcard[0] ^= 1
		})), testEnv, store.ErrInvalidRecord},
		{"empty evidence bytes", part(N, StateIntent, nil), part(N, StateIntent, edit(full(N), func(o *ParticipantOwnership) {
			o.Network.ReadinessEvidence.Postcard = nil
		})), testEnv, store.ErrInvalidRecord},
	}
	runParticipantCases(t, cases)
}
