package domainstore

import (
	"errors"
	"fmt"

	"lazaret.dev/pkg/hostid"
	"lazaret.dev/pkg/ids"
)

// A snapshot view lists an ownership variant's optional physical fields and
// its process slots uniformly, so that the lifecycle rules (monotonic
// acquisition, frozen evidence, the empty Clean snapshot, required
// evidence) are written once for all seven roles.

type fieldView struct {
	name    string
	present bool
	value   any          // the dereferenced value, compared with reflect.DeepEqual
	check   func() error // form rules of a present value; nil when absent or free-form
}

type slotView struct {
	name string
	slot hostid.Slot
	o    hostid.PersistedHostProcessOwnership
}

type snapshotView struct {
	role   Role
	fields []fieldView
	slots  []slotView
}

func (s *snapshotView) field(name string) *fieldView {
	for i := range s.fields {
		if s.fields[i].name == name {
			return &s.fields[i]
		}
	}
	return nil
}

func optField[T any](name string, p *T, check func(T) error) fieldView {
	if p == nil {
		return fieldView{name: name}
	}
	f := fieldView{name: name, present: true, value: *p}
	if check != nil {
		v := *p
		f.check = func() error { return check(v) }
	}
	return f
}

func textRule(s string) error { return textProblem(s) }

func pathRule(s string) error {
	if err := textProblem(s); err != nil {
		return err
	}
	if s[0] != '/' {
		return fmt.Errorf("path %q is not absolute", s)
	}
	return nil
}

func nonZeroDigest(d ids.Digest) error {
	if d == (ids.Digest{}) {
		return errors.New("digest is zero")
	}
	return nil
}

func mountRule(m hostid.MountIdentity) error {
	if m.Inode == 0 || m.MountID == 0 {
		return errors.New("mount identity has a zero mount ID or inode")
	}
	return nil
}

func nsRule(n hostid.NamespaceIdentity) error {
	if n.Inode == 0 {
		return errors.New("namespace identity has a zero inode")
	}
	return nil
}

func evidenceRule(e ReadinessEvidence) error { return e.Validate() }

func leaseRule(l LeaseState) error {
	if !l.Valid() {
		return fmt.Errorf("value %v is not a lease state", l)
	}
	return nil
}

func releaseRule(r StateAnchorReleaseEvidence) error {
	if r.Daemon.IsUnassigned() {
		return errors.New("released State Anchor daemon is Unassigned")
	}
	if err := r.Daemon.Validate(); err != nil {
		return err
	}
	if err := nsRule(r.UserNamespace); err != nil {
		return fmt.Errorf("user_namespace: %w", err)
	}
	if err := nsRule(r.MountNamespace); err != nil {
		return fmt.Errorf("mount_namespace: %w", err)
	}
	if err := mountRule(r.Mount); err != nil {
		return fmt.Errorf("mount: %w", err)
	}
	return nil
}

func sidecarRule(s ids.SidecarID) error {
	if s == (ids.SidecarID{}) {
		return errors.New("sidecar ID is zero")
	}
	return nil
}

// snapshot returns the view of the one set variant.
func (o *ParticipantOwnership) snapshot() (*snapshotView, error) {
	var views []*snapshotView
	if v := o.PreparedLower; v != nil {
		views = append(views, &snapshotView{role: RolePreparedLower, fields: []fieldView{
			optField("prepared_artifact_id", v.PreparedArtifactID, nonZeroDigest),
			optField("source_identity", v.SourceIdentity, nonZeroDigest),
			optField("lease_state", v.LeaseState, leaseRule),
			optField("path", v.Path, pathRule),
			optField[uint64]("device", v.Device, nil),
			optField[uint64]("inode", v.Inode, nil),
			optField("released_state_anchor", v.ReleasedStateAnchor, releaseRule),
		}})
	}
	if v := o.StateAnchor; v != nil {
		views = append(views, &snapshotView{role: RoleStateAnchor, fields: []fieldView{
			optField("lower_artifact_id", v.LowerArtifactID, nonZeroDigest),
			optField("upper_path", v.UpperPath, pathRule),
			optField("work_path", v.WorkPath, pathRule),
			optField("merged_path", v.MergedPath, pathRule),
			optField("mount", v.Mount, mountRule),
		}, slots: []slotView{{"daemon", hostid.SlotStateAnchorDaemon, v.Daemon}}})
	}
	if v := o.GitRouting; v != nil {
		views = append(views, &snapshotView{role: RoleGitRouting, fields: []fieldView{
			optField("mountpoint", v.Mountpoint, pathRule),
			optField("host_root", v.HostRoot, pathRule),
			optField("isolated_root", v.IsolatedRoot, pathRule),
			optField("mount", v.Mount, mountRule),
		}, slots: []slotView{{"daemon", hostid.SlotGitRoutingDaemon, v.Daemon}}})
	}
	if v := o.Network; v != nil {
		views = append(views, &snapshotView{role: RoleNetwork, fields: []fieldView{
			optField("derived_policy_digest", v.DerivedPolicyDigest, nonZeroDigest),
			optField("readiness_fingerprint", v.ReadinessFingerprint, nonZeroDigest),
			optField("readiness_evidence", v.ReadinessEvidence, evidenceRule),
			optField("namespace", v.Namespace, nsRule),
		}, slots: []slotView{{"runtime_supervisor", hostid.SlotNetworkRuntimeSupervisor, v.RuntimeSupervisor}}})
	}
	if v := o.Helper; v != nil {
		views = append(views, &snapshotView{role: RoleHelper, fields: []fieldView{
			optField("network_sidecar_id", v.NetworkSidecarID, sidecarRule),
		}, slots: []slotView{
			{"connectivity_helper", hostid.SlotHelperConnectivityHelper, v.ConnectivityHelper},
			{"runtime_supervisor", hostid.SlotHelperRuntimeSupervisor, v.RuntimeSupervisor},
		}})
	}
	if v := o.Sandbox; v != nil {
		views = append(views, &snapshotView{role: RoleSandbox, fields: []fieldView{
			optField("container_id", v.ContainerID, textRule),
			optField("runtime_root", v.RuntimeRoot, pathRule),
			optField("runtime_root_identity", v.RuntimeRootIdentity, mountRule),
			optField("bundle_digest", v.BundleDigest, nonZeroDigest),
		}, slots: []slotView{
			{"host_coordinator", hostid.SlotSandboxHostCoordinator, v.HostCoordinator},
			{"runtime_supervisor", hostid.SlotSandboxRuntimeSupervisor, v.RuntimeSupervisor},
			{"attached_runsc", hostid.SlotSandboxAttachedRunsc, v.AttachedRunsc},
		}})
	}
	if v := o.Publication; v != nil {
		views = append(views, &snapshotView{role: RolePublication, fields: []fieldView{
			optField("staged_socket_path", v.StagedSocketPath, pathRule),
			optField("staged_identity_path", v.StagedIdentityPath, pathRule),
			optField("socket_path", v.SocketPath, pathRule),
			optField("identity_path", v.IdentityPath, pathRule),
			optField("socket_identity", v.SocketIdentity, mountRule),
			optField("identity_file_identity", v.IdentityFileIdentity, mountRule),
		}})
	}
	if len(views) != 1 {
		return nil, fmt.Errorf("ownership union has %d variants set, want exactly 1", len(views))
	}
	return views[0], nil
}

// isEmpty reports whether the snapshot is the explicit empty snapshot:
// every optional field absent and every process slot Unassigned.
func (s *snapshotView) isEmpty() bool {
	for _, f := range s.fields {
		if f.present {
			return false
		}
	}
	for _, sl := range s.slots {
		if !sl.o.IsUnassigned() {
			return false
		}
	}
	return true
}

// EmptyOwnership returns the explicit empty snapshot of role r: the
// ownership a Clean participant carries.
func EmptyOwnership(r Role) *ParticipantOwnership {
	switch r {
	case RolePreparedLower:
		return &ParticipantOwnership{PreparedLower: &PreparedLowerOwnership{}}
	case RoleStateAnchor:
		return &ParticipantOwnership{StateAnchor: &StateAnchorOwnership{}}
	case RoleGitRouting:
		return &ParticipantOwnership{GitRouting: &GitRoutingOwnership{}}
	case RoleNetwork:
		return &ParticipantOwnership{Network: &NetworkOwnership{}}
	case RoleHelper:
		return &ParticipantOwnership{Helper: &HelperOwnership{}}
	case RoleSandbox:
		return &ParticipantOwnership{Sandbox: &SandboxOwnership{}}
	case RolePublication:
		return &ParticipantOwnership{Publication: &PublicationOwnership{}}
	}
	return nil
}

// Clone returns a copy of o whose variant struct can be changed without
// touching o's: the shallow copy the guarded writes start from. A nil o
// clones to nil. The variant's own pointer fields stay shared, as every
// writer replaces them rather than writing through them.
func (o *ParticipantOwnership) Clone() *ParticipantOwnership {
	if o == nil {
		return nil
	}
	c := *o
	c.PreparedLower = clonePtr(o.PreparedLower)
	c.StateAnchor = clonePtr(o.StateAnchor)
	c.GitRouting = clonePtr(o.GitRouting)
	c.Network = clonePtr(o.Network)
	c.Helper = clonePtr(o.Helper)
	c.Sandbox = clonePtr(o.Sandbox)
	c.Publication = clonePtr(o.Publication)
	return &c
}

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}
