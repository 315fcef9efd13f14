package domainstore

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"lazaret.dev/pkg/hostid"
	"lazaret.dev/pkg/ids"
	"lazaret.dev/pkg/postcard"
	"lazaret.dev/pkg/store"
)

// Domain is the store's one Domain record.
type Domain struct {
	DomainID           ids.DomainID `cbor:"domain_id"`
	ProfileName        string       `cbor:"profile_name"`
	CanonicalWorkspace string       `cbor:"canonical_workspace"`
}

// Generation is one run of the Domain. DurableDecision records the
// protocol model's Domain phase for this generation.
type Generation struct {
	DomainID                 ids.DomainID      `cbor:"domain_id"`
	GenerationID             ids.GenerationID  `cbor:"generation_id"`
	ConfigurationFingerprint ids.Digest        `cbor:"configuration_fingerprint"`
	CoordinatorID            ids.CoordinatorID `cbor:"coordinator_id"`
	NetworkSidecarID         ids.SidecarID     `cbor:"network_sidecar_id"`
	SandboxID                ids.SandboxID     `cbor:"sandbox_id"`
	DurableDecision          DomainPhase       `cbor:"durable_decision"`
}

// Participant is one role of a generation. Ownership nil is the single
// encoding of a bare role-bound Intent.
type Participant struct {
	GenerationID ids.GenerationID      `cbor:"generation_id"`
	Role         Role                  `cbor:"role"`
	State        ParticipantState      `cbor:"state"`
	Ownership    *ParticipantOwnership `cbor:"ownership,omitempty"`
}

// ParticipantOwnership is the ownership union: exactly one variant is set,
// and it is the variant of the Participant's role.
type ParticipantOwnership struct {
	PreparedLower *PreparedLowerOwnership `cbor:"PreparedLower,omitempty"`
	StateAnchor   *StateAnchorOwnership   `cbor:"StateAnchor,omitempty"`
	GitRouting    *GitRoutingOwnership    `cbor:"GitRouting,omitempty"`
	Network       *NetworkOwnership       `cbor:"Network,omitempty"`
	Helper        *HelperOwnership        `cbor:"Helper,omitempty"`
	Sandbox       *SandboxOwnership       `cbor:"Sandbox,omitempty"`
	Publication   *PublicationOwnership   `cbor:"Publication,omitempty"`
}

// PreparedLowerOwnership is the lease and mount of the prepared image
// artifact used as the overlay lower layer.
type PreparedLowerOwnership struct {
	PreparedArtifactID  *ids.Digest                 `cbor:"prepared_artifact_id,omitempty"`
	SourceIdentity      *ids.Digest                 `cbor:"source_identity,omitempty"`
	LeaseState          *LeaseState                 `cbor:"lease_state,omitempty"`
	Path                *string                     `cbor:"path,omitempty"`
	Device              *uint64                     `cbor:"device,omitempty"`
	Inode               *uint64                     `cbor:"inode,omitempty"`
	ReleasedStateAnchor *StateAnchorReleaseEvidence `cbor:"released_state_anchor,omitempty"`
}

// StateAnchorReleaseEvidence is what a PreparedLower release needs to
// resume after the State Anchor is gone.
type StateAnchorReleaseEvidence struct {
	Daemon         hostid.PersistedHostProcessOwnership `cbor:"daemon"`
	UserNamespace  hostid.NamespaceIdentity             `cbor:"user_namespace"`
	MountNamespace hostid.NamespaceIdentity             `cbor:"mount_namespace"`
	Mount          hostid.MountIdentity                 `cbor:"mount"`
}

// StateAnchorOwnership is the State Anchor daemon and its overlay mount.
type StateAnchorOwnership struct {
	LowerArtifactID *ids.Digest                          `cbor:"lower_artifact_id,omitempty"`
	UpperPath       *string                              `cbor:"upper_path,omitempty"`
	WorkPath        *string                              `cbor:"work_path,omitempty"`
	MergedPath      *string                              `cbor:"merged_path,omitempty"`
	Daemon          hostid.PersistedHostProcessOwnership `cbor:"daemon"`
	Mount           *hostid.MountIdentity                `cbor:"mount,omitempty"`
}

// GitRoutingOwnership is the Git-routing daemon and its workspace view.
type GitRoutingOwnership struct {
	Mountpoint   *string                              `cbor:"mountpoint,omitempty"`
	HostRoot     *string                              `cbor:"host_root,omitempty"`
	IsolatedRoot *string                              `cbor:"isolated_root,omitempty"`
	Daemon       hostid.PersistedHostProcessOwnership `cbor:"daemon"`
	Mount        *hostid.MountIdentity                `cbor:"mount,omitempty"`
}

// NetworkOwnership is the enforcement namespace, its Runtime Supervisor
// and the readiness evidence bound to them.
type NetworkOwnership struct {
	DerivedPolicyDigest  *ids.Digest                          `cbor:"derived_policy_digest,omitempty"`
	ReadinessFingerprint *ids.Digest                          `cbor:"readiness_fingerprint,omitempty"`
	ReadinessEvidence    *ReadinessEvidence                   `cbor:"readiness_evidence,omitempty"`
	Namespace            *hostid.NamespaceIdentity            `cbor:"namespace,omitempty"`
	RuntimeSupervisor    hostid.PersistedHostProcessOwnership `cbor:"runtime_supervisor"`
}

// ReadinessEvidence holds a NetworkReadinessEvidence record. Postcard is
// its exact Postcard encoding, kept verbatim; the other fields are a typed
// copy of its four fields, from which the store checks that it names this
// Domain, generation, network sidecar and readiness fingerprint. Postcard
// must equal the Postcard encoding of the typed copy (fixed-size arrays in
// schema order), so the two can never disagree.
type ReadinessEvidence struct {
	Postcard             []byte           `cbor:"postcard"`
	DomainID             ids.DomainID     `cbor:"domain_id"`
	GenerationID         ids.GenerationID `cbor:"generation_id"`
	NetworkSidecarID     ids.SidecarID    `cbor:"network_sidecar_id"`
	ReadinessFingerprint ids.Digest       `cbor:"readiness_fingerprint"`
}

// HelperOwnership is the connectivity helper and its Runtime Supervisor.
type HelperOwnership struct {
	NetworkSidecarID   *ids.SidecarID                       `cbor:"network_sidecar_id,omitempty"`
	ConnectivityHelper hostid.PersistedHostProcessOwnership `cbor:"connectivity_helper"`
	RuntimeSupervisor  hostid.PersistedHostProcessOwnership `cbor:"runtime_supervisor"`
}

// SandboxOwnership is the runsc container and its three process edges.
type SandboxOwnership struct {
	ContainerID         *string                              `cbor:"container_id,omitempty"`
	RuntimeRoot         *string                              `cbor:"runtime_root,omitempty"`
	RuntimeRootIdentity *hostid.MountIdentity                `cbor:"runtime_root_identity,omitempty"`
	BundleDigest        *ids.Digest                          `cbor:"bundle_digest,omitempty"`
	HostCoordinator     hostid.PersistedHostProcessOwnership `cbor:"host_coordinator"`
	RuntimeSupervisor   hostid.PersistedHostProcessOwnership `cbor:"runtime_supervisor"`
	AttachedRunsc       hostid.PersistedHostProcessOwnership `cbor:"attached_runsc"`
}

// PublicationOwnership is the published control socket and identity file.
type PublicationOwnership struct {
	StagedSocketPath     *string               `cbor:"staged_socket_path,omitempty"`
	StagedIdentityPath   *string               `cbor:"staged_identity_path,omitempty"`
	SocketPath           *string               `cbor:"socket_path,omitempty"`
	IdentityPath         *string               `cbor:"identity_path,omitempty"`
	SocketIdentity       *hostid.MountIdentity `cbor:"socket_identity,omitempty"`
	IdentityFileIdentity *hostid.MountIdentity `cbor:"identity_file_identity,omitempty"`
}

// Session is a Client Session of a generation. SessionAnchorID is the
// SHA-256 digest identifying the session anchor public key.
type Session struct {
	GenerationID    ids.GenerationID `cbor:"generation_id"`
	SessionID       ids.SessionID    `cbor:"session_id"`
	CLIID           ids.CLIID        `cbor:"cli_id"`
	SessionAnchorID ids.Digest       `cbor:"session_anchor_id"`
	SessionPhase    SessionPhase     `cbor:"session_phase"`
}

// SessionTerminal is the physical terminal of a session: the PTY held by
// the Host Coordinator and the runsc exec client running the guest process.
type SessionTerminal struct {
	GenerationID    ids.GenerationID                     `cbor:"generation_id"`
	SessionID       ids.SessionID                        `cbor:"session_id"`
	State           TerminalState                        `cbor:"state"`
	ContainerID     *string                              `cbor:"container_id,omitempty"`
	HostCoordinator hostid.PersistedHostProcessOwnership `cbor:"host_coordinator"`
	PtyMaster       *PtyIdentity                         `cbor:"pty_master,omitempty"`
	ExecClient      hostid.PersistedHostProcessOwnership `cbor:"exec_client"`
	GuestProcess    *GuestProcessIdentity                `cbor:"guest_process,omitempty"`
}

// PtyIdentity is the PTY master held by the Host Coordinator: its
// descriptor number there and the device and inode of the PTY. It is exact
// only together with the Host Coordinator's process identity.
type PtyIdentity struct {
	MasterFD uint32 `cbor:"master_fd"`
	Device   uint64 `cbor:"device"`
	Inode    uint64 `cbor:"inode"`
}

// GuestProcessIdentity is the session's leader inside the runsc container,
// as observed there. It never converts to host process authority.
type GuestProcessIdentity struct {
	LeaderPID       uint32 `cbor:"leader_pid"`
	LeaderStartTime uint64 `cbor:"leader_start_time"`
	ProcessGroupID  uint32 `cbor:"process_group_id"`
}

// Mailbox is the generation's escalation mailbox directories and the
// identity file the guest reads.
type Mailbox struct {
	GenerationID ids.GenerationID `cbor:"generation_id"`
	IdentityPath string           `cbor:"identity_path"`
	InboxPath    string           `cbor:"inbox_path"`
	OutboxPath   string           `cbor:"outbox_path"`
	State        ParticipantState `cbor:"state"`
}

// invalid builds a RecordError of class ErrInvalidRecord.
func invalid(record, key, field, format string, args ...any) error {
	return &store.RecordError{Record: record, Key: key, Field: field, Class: store.ErrInvalidRecord, Err: fmt.Errorf(format, args...)}
}

// textProblem checks stored text: non-empty, UTF-8, no NUL.
func textProblem(s string) error {
	switch {
	case s == "":
		return errors.New("is empty")
	case !utf8.ValidString(s):
		return errors.New("is not valid UTF-8 (stored text must be UTF-8)")
	case strings.IndexByte(s, 0) >= 0:
		return errors.New("contains a NUL byte")
	}
	return nil
}

func checkText(record, key, field, s string) error {
	if err := textProblem(s); err != nil {
		return &store.RecordError{Record: record, Key: key, Field: field, Class: store.ErrInvalidRecord, Err: err}
	}
	return nil
}

func checkOptText(record, key, field string, s *string) error {
	if s == nil {
		return nil
	}
	return checkText(record, key, field, *s)
}

func checkPath(record, key, field, s string) error {
	if err := checkText(record, key, field, s); err != nil {
		return err
	}
	if s[0] != '/' {
		return invalid(record, key, field, "path %q is not absolute", s)
	}
	return nil
}

func checkOptPath(record, key, field string, s *string) error {
	if s == nil {
		return nil
	}
	return checkPath(record, key, field, *s)
}

func checkOwnership(record, key, field string, o hostid.PersistedHostProcessOwnership) error {
	if err := o.Validate(); err != nil {
		return &store.RecordError{Record: record, Key: key, Field: field, Class: store.ErrInvalidRecord, Err: err}
	}
	return nil
}

func generationKey(g ids.GenerationID) string { return "generation " + g.String() }

// Validate checks the Domain record's fields.
func (d *Domain) Validate() error {
	key := "domain " + d.DomainID.String()
	if d.DomainID == (ids.DomainID{}) {
		return invalid("domain", key, "domain_id", "is zero")
	}
	if err := checkText("domain", key, "profile_name", d.ProfileName); err != nil {
		return err
	}
	return checkPath("domain", key, "canonical_workspace", d.CanonicalWorkspace)
}

// Validate checks the Generation record's fields.
func (g *Generation) Validate() error {
	key := generationKey(g.GenerationID)
	switch {
	case g.DomainID == (ids.DomainID{}):
		return invalid("generation", key, "domain_id", "is zero")
	case g.GenerationID == (ids.GenerationID{}):
		return invalid("generation", key, "generation_id", "is zero")
	case g.CoordinatorID == (ids.CoordinatorID{}):
		return invalid("generation", key, "coordinator_id", "is zero")
	case g.NetworkSidecarID == (ids.SidecarID{}):
		return invalid("generation", key, "network_sidecar_id", "is zero")
	case g.SandboxID == (ids.SandboxID{}):
		return invalid("generation", key, "sandbox_id", "is zero")
	case !g.DurableDecision.Valid():
		return invalid("generation", key, "durable_decision", "value %v is not a Domain phase", g.DurableDecision)
	}
	return nil
}

// Key names the participant in errors.
func (p *Participant) Key() string {
	return generationKey(p.GenerationID) + " role " + p.Role.String()
}

// Validate checks the Participant record on its own: known role and state,
// at most the role's own ownership variant, and each field's form. The
// lifecycle rules are CheckParticipant's.
func (p *Participant) Validate() error {
	const rec = "participant"
	key := p.Key()
	if p.GenerationID == (ids.GenerationID{}) {
		return invalid(rec, key, "generation_id", "is zero")
	}
	if !p.Role.Valid() {
		return invalid(rec, key, "role", "value %v is not a role", p.Role)
	}
	if !p.State.Valid() {
		return invalid(rec, key, "state", "value %v is not a participant state", p.State)
	}
	if p.State.IsActive() && p.State != p.Role.ActiveState() {
		return &store.RecordError{Record: rec, Key: key, Field: "state", Class: store.ErrIllegalTransition,
			Err: fmt.Errorf("%v is not a serviceable state of role %v (its only active state is %v)", p.State, p.Role, p.Role.ActiveState())}
	}
	if p.Ownership == nil {
		return nil
	}
	s, err := p.Ownership.snapshot()
	if err != nil {
		return &store.RecordError{Record: rec, Key: key, Field: "ownership", Class: store.ErrInvalidRecord, Err: err}
	}
	if s.role != p.Role {
		return &store.RecordError{Record: rec, Key: key, Field: "ownership", Class: store.ErrInvalidRecord,
			Err: fmt.Errorf("ownership variant %v does not match role %v", s.role, p.Role)}
	}
	for _, f := range s.fields {
		if f.check != nil {
			if err := f.check(); err != nil {
				return &store.RecordError{Record: rec, Key: key, Field: "ownership." + f.name, Class: store.ErrInvalidRecord, Err: err}
			}
		}
	}
	for _, sl := range s.slots {
		if err := checkOwnership(rec, key, "ownership."+sl.name, sl.o); err != nil {
			return err
		}
	}
	if n := p.Ownership.Network; n != nil && n.ReadinessEvidence != nil {
		ev := n.ReadinessEvidence
		if ev.GenerationID != p.GenerationID {
			return &store.RecordError{Record: rec, Key: key, Field: "ownership.readiness_evidence.generation_id", Class: store.ErrReferenceMismatch,
				Err: fmt.Errorf("evidence names generation %v", ev.GenerationID)}
		}
		if n.ReadinessFingerprint == nil || *n.ReadinessFingerprint != ev.ReadinessFingerprint {
			return &store.RecordError{Record: rec, Key: key, Field: "ownership.readiness_evidence.readiness_fingerprint", Class: store.ErrReferenceMismatch,
				Err: fmt.Errorf("evidence fingerprint %v does not match the recorded readiness_fingerprint", ev.ReadinessFingerprint)}
		}
	}
	return nil
}

// Validate checks the readiness evidence's own consistency.
func (e *ReadinessEvidence) Validate() error {
	if len(e.Postcard) == 0 {
		return fmt.Errorf("postcard encoding is empty")
	}
	if !bytes.Equal(e.Postcard, e.postcard()) {
		return fmt.Errorf("postcard encoding does not match the typed domain_id, generation_id, network_sidecar_id and readiness_fingerprint")
	}
	return nil
}

// postcard returns the Postcard encoding of NetworkReadinessEvidence with
// the typed fields: four fixed-size byte arrays in schema order.
func (e *ReadinessEvidence) postcard() []byte {
	enc := postcard.NewEncoder(96)
	enc.Fixed(e.DomainID[:])
	enc.Fixed(e.GenerationID[:])
	enc.Fixed(e.NetworkSidecarID[:])
	enc.Fixed(e.ReadinessFingerprint[:])
	return enc.Bytes()
}

// NewReadinessEvidence builds the stored form of a NetworkReadinessEvidence
// from its fields.
func NewReadinessEvidence(domain ids.DomainID, gen ids.GenerationID, sidecar ids.SidecarID, fingerprint ids.Digest) ReadinessEvidence {
	e := ReadinessEvidence{DomainID: domain, GenerationID: gen, NetworkSidecarID: sidecar, ReadinessFingerprint: fingerprint}
	e.Postcard = e.postcard()
	return e
}

// Key names the session in errors.
func (s *Session) Key() string {
	return generationKey(s.GenerationID) + " session " + s.SessionID.String()
}

// Validate checks the Session record's fields.
func (s *Session) Validate() error {
	key := s.Key()
	switch {
	case s.GenerationID == (ids.GenerationID{}):
		return invalid("session", key, "generation_id", "is zero")
	case s.SessionID == (ids.SessionID{}):
		return invalid("session", key, "session_id", "is zero")
	case s.CLIID == (ids.CLIID{}):
		return invalid("session", key, "cli_id", "is zero")
	case s.SessionAnchorID == (ids.Digest{}):
		return invalid("session", key, "session_anchor_id", "is zero")
	case !s.SessionPhase.Valid():
		return invalid("session", key, "session_phase", "value %v is not a session phase", s.SessionPhase)
	}
	return nil
}

// Key names the terminal in errors.
func (t *SessionTerminal) Key() string {
	return generationKey(t.GenerationID) + " session " + t.SessionID.String()
}

// Validate checks the SessionTerminal record's fields.
func (t *SessionTerminal) Validate() error {
	const rec = "session terminal"
	key := t.Key()
	switch {
	case t.GenerationID == (ids.GenerationID{}):
		return invalid(rec, key, "generation_id", "is zero")
	case t.SessionID == (ids.SessionID{}):
		return invalid(rec, key, "session_id", "is zero")
	case !t.State.Valid():
		return invalid(rec, key, "state", "value %v is not a terminal state", t.State)
	}
	if err := checkOptText(rec, key, "container_id", t.ContainerID); err != nil {
		return err
	}
	if t.PtyMaster != nil && t.PtyMaster.Inode == 0 {
		return invalid(rec, key, "pty_master.inode", "is zero")
	}
	if t.GuestProcess != nil && t.GuestProcess.LeaderPID == 0 {
		return invalid(rec, key, "guest_process.leader_pid", "is zero")
	}
	if err := checkOwnership(rec, key, "host_coordinator", t.HostCoordinator); err != nil {
		return err
	}
	return checkOwnership(rec, key, "exec_client", t.ExecClient)
}

// Validate checks the Mailbox record's fields.
func (m *Mailbox) Validate() error {
	const rec = "mailbox"
	key := generationKey(m.GenerationID)
	if m.GenerationID == (ids.GenerationID{}) {
		return invalid(rec, key, "generation_id", "is zero")
	}
	for _, f := range []struct{ name, v string }{{"identity_path", m.IdentityPath}, {"inbox_path", m.InboxPath}, {"outbox_path", m.OutboxPath}} {
		if err := checkPath(rec, key, f.name, f.v); err != nil {
			return err
		}
	}
	switch m.State {
	case StateIntent, StateCommitted, StateReleaseIntent, StateClean:
		return nil
	}
	return invalid(rec, key, "state", "value %v is not a mailbox state (Intent, Committed, ReleaseIntent, Clean)", m.State)
}
