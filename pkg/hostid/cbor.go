package hostid

import (
	"fmt"

	"lazaret.dev/pkg/store/codec"
)

// Storage encodings. The identity types carry no struct tags, so their
// deterministic CBOR maps (keyed by schema field names) are written here
// through tagged mirror types. Decoding is closed and canonical (see package
// lazaret.dev/pkg/store/codec).

type authorityCBOR struct {
	BootID     []byte `cbor:"boot_id"`
	PidfsDev   uint64 `cbor:"pidfs_st_dev"`
	PidfsInode uint64 `cbor:"pidfs_st_ino"`
}

type identityCBOR struct {
	Authority      PidfsProcessAuthorityV1 `cbor:"authority"`
	HostPID        uint32                  `cbor:"host_pid"`
	StartTimeTicks uint64                  `cbor:"start_time_ticks"`
}

type namespaceCBOR struct {
	Device uint64 `cbor:"device"`
	Inode  uint64 `cbor:"inode"`
}

type mountCBOR struct {
	MountID uint64 `cbor:"mount_id"`
	Device  uint64 `cbor:"device"`
	Inode   uint64 `cbor:"inode"`
}

type hostIdentityCBOR struct {
	Identity PidfsProcessIdentityV1 `cbor:"identity"`
}

type ownershipCBOR struct {
	Unassigned *struct{}               `cbor:"Unassigned,omitempty"`
	Staged     *PidfsProcessIdentityV1 `cbor:"Staged,omitempty"`
	Committed  *HostProcessIdentity    `cbor:"Committed,omitempty"`
}

// MarshalCBOR encodes {boot_id, pidfs_st_dev, pidfs_st_ino}.
func (a PidfsProcessAuthorityV1) MarshalCBOR() ([]byte, error) {
	return codec.Marshal(authorityCBOR{BootID: a.BootID[:], PidfsDev: a.PidfsDev, PidfsInode: a.PidfsInode})
}

// UnmarshalCBOR decodes what MarshalCBOR encodes; boot_id must be 16 bytes.
func (a *PidfsProcessAuthorityV1) UnmarshalCBOR(b []byte) error {
	var w authorityCBOR
	if err := codec.Unmarshal(b, &w); err != nil {
		return fmt.Errorf("decoding pidfs authority: %w", err)
	}
	if len(w.BootID) != len(a.BootID) {
		return fmt.Errorf("decoding pidfs authority: %w: boot_id has %d bytes, want 16", codec.ErrDecode, len(w.BootID))
	}
	copy(a.BootID[:], w.BootID)
	a.PidfsDev, a.PidfsInode = w.PidfsDev, w.PidfsInode
	return nil
}

// MarshalCBOR encodes {authority, host_pid, start_time_ticks}.
func (p PidfsProcessIdentityV1) MarshalCBOR() ([]byte, error) {
	return codec.Marshal(identityCBOR{Authority: p.Authority, HostPID: p.HostPID, StartTimeTicks: p.StartTimeTicks})
}

// UnmarshalCBOR decodes what MarshalCBOR encodes.
func (p *PidfsProcessIdentityV1) UnmarshalCBOR(b []byte) error {
	var w identityCBOR
	if err := codec.Unmarshal(b, &w); err != nil {
		return fmt.Errorf("decoding pidfs identity: %w", err)
	}
	*p = PidfsProcessIdentityV1{Authority: w.Authority, HostPID: w.HostPID, StartTimeTicks: w.StartTimeTicks}
	return nil
}

// MarshalCBOR encodes {device, inode}.
func (n NamespaceIdentity) MarshalCBOR() ([]byte, error) {
	return codec.Marshal(namespaceCBOR(n))
}

// UnmarshalCBOR decodes what MarshalCBOR encodes.
func (n *NamespaceIdentity) UnmarshalCBOR(b []byte) error {
	var w namespaceCBOR
	if err := codec.Unmarshal(b, &w); err != nil {
		return fmt.Errorf("decoding namespace identity: %w", err)
	}
	*n = NamespaceIdentity(w)
	return nil
}

// MarshalCBOR encodes {mount_id, device, inode}.
func (m MountIdentity) MarshalCBOR() ([]byte, error) {
	return codec.Marshal(mountCBOR(m))
}

// UnmarshalCBOR decodes what MarshalCBOR encodes.
func (m *MountIdentity) UnmarshalCBOR(b []byte) error {
	var w mountCBOR
	if err := codec.Unmarshal(b, &w); err != nil {
		return fmt.Errorf("decoding mount identity: %w", err)
	}
	*m = MountIdentity(w)
	return nil
}

// MarshalCBOR encodes {identity}.
func (h HostProcessIdentity) MarshalCBOR() ([]byte, error) {
	return codec.Marshal(hostIdentityCBOR(h))
}

// UnmarshalCBOR decodes what MarshalCBOR encodes.
func (h *HostProcessIdentity) UnmarshalCBOR(b []byte) error {
	var w hostIdentityCBOR
	if err := codec.Unmarshal(b, &w); err != nil {
		return fmt.Errorf("decoding host process identity: %w", err)
	}
	*h = HostProcessIdentity(w)
	return nil
}

// MarshalCBOR encodes the union as a map with exactly one key naming the
// variant: {"Unassigned": {}}, {"Staged": identity} or
// {"Committed": {"identity": identity}}.
func (o PersistedHostProcessOwnership) MarshalCBOR() ([]byte, error) {
	if err := o.Validate(); err != nil {
		return nil, fmt.Errorf("encoding process ownership: %w", err)
	}
	var w ownershipCBOR
	switch o.Phase {
	case Unassigned:
		w.Unassigned = &struct{}{}
	case Staged:
		id := o.Identity
		w.Staged = &id
	case Committed:
		w.Committed = &HostProcessIdentity{Identity: o.Identity}
	}
	return codec.Marshal(w)
}

// UnmarshalCBOR decodes what MarshalCBOR encodes and validates the union.
func (o *PersistedHostProcessOwnership) UnmarshalCBOR(b []byte) error {
	var w ownershipCBOR
	if err := codec.Unmarshal(b, &w); err != nil {
		return fmt.Errorf("decoding process ownership: %w", err)
	}
	n := 0
	var v PersistedHostProcessOwnership
	if w.Unassigned != nil {
		n++
	}
	if w.Staged != nil {
		n++
		v = StagedOwnership(*w.Staged)
	}
	if w.Committed != nil {
		n++
		v = CommittedOwnership(w.Committed.Identity)
	}
	if n != 1 {
		return fmt.Errorf("decoding process ownership: %w: union has %d variants, want exactly 1", codec.ErrDecode, n)
	}
	if err := v.Validate(); err != nil {
		return fmt.Errorf("decoding process ownership: %w: %w", codec.ErrDecode, err)
	}
	*o = v
	return nil
}
