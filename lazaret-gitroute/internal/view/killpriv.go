package view

import (
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// KillPrivCapability is the INIT capability a view server offers
// (fuse.MountOptions.ExtraCapabilities) so that the kernel leaves the
// clearing of set-user-ID and set-group-ID bits to the view: it then stops
// asking GETXATTR security.capability before every write (the backing file
// system clears capabilities itself when the daemon writes) and flags the
// writes, truncations and truncating opens of a caller without CAP_FSETID
// instead. Serve the view through KillPriv, which honours those flags.
const KillPrivCapability = fuse.CAP_HANDLE_KILLPRIV_V2

// KillPriv wraps raw so that a write, truncation or truncating open the
// kernel flags for it clears the file's set-user-ID bit, and its
// set-group-ID bit when group execution is allowed, as a local file system
// does for a caller without CAP_FSETID. The daemon cannot leave that to the
// backing file system: its own writes keep the bits when it runs with
// CAP_FSETID, and go-fuse's node API does not pass the flags on.
func KillPriv(raw fuse.RawFileSystem) fuse.RawFileSystem {
	return &killPriv{RawFileSystem: raw}
}

type killPriv struct {
	fuse.RawFileSystem
}

// kill clears the bits of the node named by h. A node without a path (an
// unlinked open file) keeps them: nothing can execute it any more.
// The stat goes through the open file fh when there is one (an open
// backing answers with one fstat).
func (k *killPriv) kill(cancel <-chan struct{}, h *fuse.InHeader, fh uint64, hasFh bool) {
	var out fuse.AttrOut
	in := fuse.GetAttrIn{InHeader: *h}
	if hasFh {
		in.Flags_, in.Fh_ = fuse.FUSE_GETATTR_FH, fh
	}
	if st := k.RawFileSystem.GetAttr(cancel, &in, &out); st != fuse.OK {
		return
	}
	mode := killedMode(out.Mode)
	if mode == out.Mode {
		return
	}
	set := fuse.SetAttrIn{SetAttrInCommon: fuse.SetAttrInCommon{InHeader: *h, Valid: fuse.FATTR_MODE, Mode: mode}}
	k.RawFileSystem.SetAttr(cancel, &set, &out)
}

// killedMode is mode without the bits a write by an unprivileged caller
// clears: set-user-ID, and set-group-ID when the group may execute (without
// it, the bit marks mandatory locking and stays).
func killedMode(mode uint32) uint32 {
	if mode&syscall.S_IFMT != syscall.S_IFREG {
		return mode
	}
	mode &^= syscall.S_ISUID
	if mode&syscall.S_IXGRP != 0 {
		mode &^= syscall.S_ISGID
	}
	return mode
}

func (k *killPriv) Write(cancel <-chan struct{}, in *fuse.WriteIn, data []byte) (uint32, fuse.Status) {
	if in.WriteFlags&fuse.WRITE_KILL_SUIDGID != 0 {
		k.kill(cancel, &in.InHeader, in.Fh, true)
	}
	return k.RawFileSystem.Write(cancel, in, data)
}

func (k *killPriv) Writev(cancel <-chan struct{}, in *fuse.WriteIn, data [][]byte) (uint32, fuse.Status) {
	if in.WriteFlags&fuse.WRITE_KILL_SUIDGID != 0 {
		k.kill(cancel, &in.InHeader, in.Fh, true)
	}
	return k.RawFileSystem.Writev(cancel, in, data)
}

func (k *killPriv) SetAttr(cancel <-chan struct{}, in *fuse.SetAttrIn, out *fuse.AttrOut) fuse.Status {
	if in.Valid&fuse.FATTR_KILL_SUIDGID != 0 && in.Valid&fuse.FATTR_MODE == 0 {
		k.kill(cancel, &in.InHeader, in.Fh, in.Valid&fuse.FATTR_FH != 0)
	}
	return k.RawFileSystem.SetAttr(cancel, in, out)
}

func (k *killPriv) Open(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	st := k.RawFileSystem.Open(cancel, in, out)
	if st == fuse.OK && in.Mode&fuse.OPEN_KILL_SUIDGID != 0 {
		k.kill(cancel, &in.InHeader, out.Fh, true)
	}
	return st
}

func (k *killPriv) Create(cancel <-chan struct{}, in *fuse.CreateIn, name string, out *fuse.CreateOut) fuse.Status {
	st := k.RawFileSystem.Create(cancel, in, name, out)
	if st == fuse.OK && in.OpenFlags&fuse.OPEN_KILL_SUIDGID != 0 {
		h := in.InHeader
		h.NodeId = out.NodeId
		k.kill(cancel, &h, out.Fh, true)
	}
	return st
}
