package hostid

import (
	"fmt"

	"lazaret.dev/pkg/postcard"
)

// BootID is the 16-byte UUID of the current Linux boot.
type BootID [16]byte

// PidfsProcessAuthorityV1 is the durable positive authority over one process.
type PidfsProcessAuthorityV1 struct {
	BootID     BootID
	PidfsDev   uint64
	PidfsInode uint64
}

// PidfsProcessIdentityV1 adds negative evidence to the authority.
type PidfsProcessIdentityV1 struct {
	Authority      PidfsProcessAuthorityV1
	HostPID        uint32
	StartTimeTicks uint64
}

// NamespaceIdentity is the nsfs device and inode of a namespace.
type NamespaceIdentity struct {
	Device uint64
	Inode  uint64
}

// MountIdentity is a mount ID with the device and inode of the mount root.
type MountIdentity struct {
	MountID uint64
	Device  uint64
	Inode   uint64
}

func (a PidfsProcessAuthorityV1) String() string {
	return fmt.Sprintf("pidfs(boot=%x dev=%d ino=%d)", a.BootID[:], a.PidfsDev, a.PidfsInode)
}

func (p PidfsProcessIdentityV1) String() string {
	return fmt.Sprintf("%v pid=%d start=%d", p.Authority, p.HostPID, p.StartTimeTicks)
}

// MarshalPostcard writes boot_id, pidfs_st_dev, pidfs_st_ino.
func (a *PidfsProcessAuthorityV1) MarshalPostcard(e *postcard.Encoder) {
	e.Fixed(a.BootID[:])
	e.U64(a.PidfsDev)
	e.U64(a.PidfsInode)
}

// UnmarshalPostcard reads what MarshalPostcard writes.
func (a *PidfsProcessAuthorityV1) UnmarshalPostcard(d *postcard.Decoder) {
	d.Fixed(a.BootID[:])
	a.PidfsDev = d.U64()
	a.PidfsInode = d.U64()
}

// MarshalPostcard writes authority, host_pid, start_time_ticks.
func (p *PidfsProcessIdentityV1) MarshalPostcard(e *postcard.Encoder) {
	p.Authority.MarshalPostcard(e)
	e.U32(p.HostPID)
	e.U64(p.StartTimeTicks)
}

// UnmarshalPostcard reads what MarshalPostcard writes.
func (p *PidfsProcessIdentityV1) UnmarshalPostcard(d *postcard.Decoder) {
	p.Authority.UnmarshalPostcard(d)
	p.HostPID = d.U32()
	p.StartTimeTicks = d.U64()
}

// MarshalPostcard writes device, inode.
func (n *NamespaceIdentity) MarshalPostcard(e *postcard.Encoder) {
	e.U64(n.Device)
	e.U64(n.Inode)
}

// UnmarshalPostcard reads what MarshalPostcard writes.
func (n *NamespaceIdentity) UnmarshalPostcard(d *postcard.Decoder) {
	n.Device = d.U64()
	n.Inode = d.U64()
}

// MarshalPostcard writes mount_id, device, inode.
func (m *MountIdentity) MarshalPostcard(e *postcard.Encoder) {
	e.U64(m.MountID)
	e.U64(m.Device)
	e.U64(m.Inode)
}

// UnmarshalPostcard reads what MarshalPostcard writes.
func (m *MountIdentity) UnmarshalPostcard(d *postcard.Decoder) {
	m.MountID = d.U64()
	m.Device = d.U64()
	m.Inode = d.U64()
}
