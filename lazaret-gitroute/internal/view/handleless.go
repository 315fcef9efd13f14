package view

import (
	"context"
	"errors"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// Regular files are served without open handles. The view answers the
// kernel's first OPEN of a regular file with ENOSYS, after which the kernel
// opens every regular file of the mount itself (FUSE "no open" support):
// no OPEN, FLUSH or RELEASE request, and file handle 0 on every READ and
// WRITE. gVisor opens a host descriptor for each file it keeps a dentry
// of (docs/RUNSC.md, "The workspace mount"), so with handles every walk
// of a tree larger than its dentry cache cost three daemon round trips per
// file; without them it costs none once the kernel caches the entry and
// its attributes.
//
// What an OPEN used to refuse is refused where it takes effect: a write
// (Write, Allocate) or a truncation (Setattr, which an O_TRUNC open
// becomes) of a sealed path fails with EROFS and one of a host file with
// more than one link with EPERM, checked on the descriptor the request
// writes through. Each request opens its backing file by the node's
// current path beneath the root that path routes to, exactly as an OPEN
// did, so routing and confinement are unchanged. The kernel keeps the
// file's cached pages across opens (FOPEN_KEEP_CACHE is its default for a
// file it opens itself); the watcher's NotifyContent drops them on a host
// change, and in a host directory without a watch the kernel drops them
// when it next reads the file's attributes (at most shortFor later) and
// finds its size or modification time changed (FUSE_AUTO_INVAL_DATA).
//
// CREATE returns no handle either: in "no open" mode the kernel sends no
// RELEASE, so a handle would never be closed. The create's descriptor is
// kept as the file's writer instead (addWriter).

// Open refuses to open: the kernel then opens regular files itself.
func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	return nil, 0, syscall.ENOSYS
}

// handle returns fh, or for a node without a path the descriptor kept of
// its backing file when it was unlinked or renamed over (nil if none).
func (n *node) handle(fh fs.FileHandle) fs.FileHandle {
	if fh != nil {
		return fh
	}
	if k := n.kept.Load(); k != nil {
		if _, ok := n.rel(); !ok {
			return k
		}
	}
	return nil
}

// backingFile opens the node's backing file for reading one request. A
// node without a path has only what it kept.
func (n *node) backingFile() (int, syscall.Errno) {
	p, b, e := n.where()
	if e != 0 {
		return -1, e
	}
	fd, err := n.f.roots[b].open(p, unix.O_RDONLY|unix.O_NOFOLLOW, 0)
	return fd, errno(err)
}

// writeTo calls write with a descriptor that writes the node's backing
// file, after the checks an open for writing has always had: a sealed path
// is refused (EROFS), and so is, checked on the descriptor, a host regular
// file with more than one link (EPERM). Before the write, the file's
// set-ID bits a write clears are cleared (beforeWrite). The descriptor is opened by the
// node's path; when that open is refused for the file's mode (EACCES, for
// a daemon without CAP_DAC_OVERRIDE where it runs) and the sandbox created
// the file through the view, the create's own descriptor is used, as the
// descriptor a create(2) returns writes whatever the new file's mode.
func (n *node) writeTo(write func(fd int) syscall.Errno) syscall.Errno {
	p, b, e := n.where()
	if e != 0 {
		return e
	}
	if n.f.router.Rule(p) == Sealed {
		return syscall.EROFS
	}
	fd, err := n.f.roots[b].open(p, unix.O_WRONLY|unix.O_NOFOLLOW, 0)
	if err == nil {
		defer unix.Close(fd)
		if e := beforeWrite(fd, b); e != 0 {
			return e
		}
		return write(fd)
	}
	if !errors.Is(err, unix.EACCES) {
		return errno(err)
	}
	n.wmu.Lock()
	defer n.wmu.Unlock()
	if n.writer == 0 {
		return syscall.EACCES
	}
	if e := beforeWrite(n.writer-1, b); e != 0 {
		return e
	}
	return write(n.writer - 1)
}

// beforeWrite prepares a write through fd. It refuses (EPERM) a write to a
// host regular file with more than one link, which may share its inode
// with a file outside the workspace. It clears the file's set-user-ID bit,
// and its set-group-ID bit when the group may execute it, as a local file
// system does at a write by a caller without CAP_FSETID (killedMode): the
// view negotiates FUSE_HANDLE_KILLPRIV_V2 (KillPrivCapability), so the
// kernel leaves that to the daemon, whose own write would keep the bits
// where it holds CAP_FSETID. Every write through the view clears them,
// whoever makes it: the sandbox's callers never hold CAP_FSETID on the
// host.
func beforeWrite(fd int, b Backing) syscall.Errno {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return errno(err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return 0
	}
	if b == Host && st.Nlink > 1 {
		return syscall.EPERM
	}
	if m := killedMode(st.Mode); m != st.Mode {
		if err := unix.Fchmod(fd, m&07777); err != nil {
			return errno(err)
		}
	}
	return 0
}

// KillPrivCapability is the INIT capability the view's server offers
// (fuse.MountOptions.ExtraCapabilities): the kernel then leaves the
// clearing of set-ID bits at a write, a truncation or a chown to the
// view. A write or truncation clears them in beforeWrite; a chown clears
// them in the backing file system, which does so whoever calls (the
// set-group-ID bit when the group may execute; chown(2)). In exchange the
// kernel no longer reads a file's attributes before every chown, a
// round trip for each file gVisor creates (it chowns every one).
const KillPrivCapability = fuse.CAP_HANDLE_KILLPRIV_V2

// killedMode is mode without the bits a write by an unprivileged caller
// clears: set-user-ID, and set-group-ID when the group may execute (without
// it, the bit marks mandatory locking and stays).
func killedMode(mode uint32) uint32 {
	if mode&unix.S_IFMT != unix.S_IFREG {
		return mode
	}
	mode &^= unix.S_ISUID
	if mode&unix.S_IXGRP != 0 {
		mode &^= unix.S_ISGID
	}
	return mode
}

// writers bounds how many create descriptors the view keeps (FS.addWriter).
// The kernel tells the view of no close in "no open" mode, so a writer
// lives until its node is forgotten or this many newer files were
// created; the writes it serves (to a file created read-only, by a daemon
// without CAP_DAC_OVERRIDE) come right after the create, as git's object
// files do.
const writers = 256

// addWriter keeps fd, opened by the create of c, as c's writer, closing
// the oldest writer beyond the bound.
func (f *FS) addWriter(c *node, fd int) {
	c.wmu.Lock()
	if c.writer != 0 {
		unix.Close(c.writer - 1)
	}
	c.writer = fd + 1
	c.wmu.Unlock()
	f.wmu.Lock()
	f.writers = append(f.writers, c)
	var old *node
	if len(f.writers) > writers {
		old = f.writers[0]
		f.writers = f.writers[1:]
	}
	f.wmu.Unlock()
	old.dropWriter()
}

// dropWriter closes the node's writer, if it has one.
func (n *node) dropWriter() {
	if n == nil {
		return
	}
	n.wmu.Lock()
	defer n.wmu.Unlock()
	if n.writer != 0 {
		unix.Close(n.writer - 1)
		n.writer = 0
	}
}

// Read reads through the open handle if there is one, else from the
// backing file.
func (n *node) Read(ctx context.Context, fh fs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	if fh = n.handle(fh); fh != nil {
		if r, ok := fh.(fs.FileReader); ok {
			return r.Read(ctx, dest, off)
		}
		return nil, syscall.EBADF
	}
	fd, e := n.backingFile()
	if e != 0 {
		return nil, e
	}
	defer unix.Close(fd)
	got := 0
	for got < len(dest) {
		k, err := unix.Pread(fd, dest[got:], off+int64(got))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, errno(err)
		}
		if k == 0 {
			break
		}
		got += k
	}
	return fuse.ReadResultData(dest[:got]), 0
}

// Write writes through the open handle if there is one, else to the
// backing file.
func (n *node) Write(ctx context.Context, fh fs.FileHandle, data []byte, off int64) (uint32, syscall.Errno) {
	if fh = n.handle(fh); fh != nil {
		if w, ok := fh.(fs.FileWriter); ok {
			return w.Write(ctx, data, off)
		}
		return 0, syscall.EBADF
	}
	done := 0
	e := n.writeTo(func(fd int) syscall.Errno {
		for done < len(data) {
			k, err := unix.Pwrite(fd, data[done:], off+int64(done))
			if err == unix.EINTR {
				continue
			}
			if err != nil {
				if done > 0 {
					return 0
				}
				return errno(err)
			}
			done += k
		}
		return 0
	})
	return uint32(done), e
}

// Flush answers ENOSYS, so that the kernel stops sending FLUSH on every
// close: the view's writes reach the backing file as they are made, and
// nothing is held that a close would have to release.
func (n *node) Flush(ctx context.Context, fh fs.FileHandle) syscall.Errno {
	return syscall.ENOSYS
}

// Fsync syncs the backing file.
func (n *node) Fsync(ctx context.Context, fh fs.FileHandle, flags uint32) syscall.Errno {
	if fh = n.handle(fh); fh != nil {
		if s, ok := fh.(fs.FileFsyncer); ok {
			return s.Fsync(ctx, flags)
		}
		return syscall.EBADF
	}
	fd, e := n.backingFile()
	if e != 0 {
		return e
	}
	defer unix.Close(fd)
	if flags&1 != 0 { // FUSE_FSYNC_FDATASYNC
		return errno(unix.Fdatasync(fd))
	}
	return errno(unix.Fsync(fd))
}

// Allocate allocates or punches space in the backing file, which is a write.
func (n *node) Allocate(ctx context.Context, fh fs.FileHandle, off uint64, size uint64, mode uint32) syscall.Errno {
	if fh = n.handle(fh); fh != nil {
		if a, ok := fh.(fs.FileAllocater); ok {
			return a.Allocate(ctx, off, size, mode)
		}
		return syscall.EBADF
	}
	return n.writeTo(func(fd int) syscall.Errno {
		return errno(unix.Fallocate(fd, mode, int64(off), int64(size)))
	})
}

// Lseek answers ENOSYS: the kernel then serves SEEK_DATA and SEEK_HOLE
// itself, taking the whole file for data.
func (n *node) Lseek(ctx context.Context, fh fs.FileHandle, off uint64, whence uint32) (uint64, syscall.Errno) {
	return 0, syscall.ENOSYS
}

// keep opens the regular file at view path p, about to be unlinked or
// renamed over, and keeps the descriptor in its node, so that whatever has
// the file open reads (and, if it could before, writes) it after its path
// is gone. A host file with another link, or a sealed one, is kept read
// only. Failing to keep it is not an error: the removal goes on, and what
// had the file open then reads ESTALE.
func (n *node) keep(p string, b Backing) {
	if n == nil || n.isDir() || n.kept.Load() != nil {
		return
	}
	if st, err := n.f.roots[b].lstat(p); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return
	}
	const flags = unix.O_NOFOLLOW | unix.O_NONBLOCK
	fd, err := n.f.roots[b].open(p, unix.O_RDWR|flags, 0)
	if err == nil && n.writable(p, b) != 0 {
		unix.Close(fd)
		err = unix.EPERM
	}
	if err != nil {
		fd, err = n.f.roots[b].open(p, unix.O_RDONLY|flags, 0)
	}
	if err != nil {
		return
	}
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return
	}
	if !n.kept.CompareAndSwap(nil, fs.NewLoopbackFile(fd).(*fs.LoopbackFile)) {
		unix.Close(fd)
	}
}

// unkeep drops what keep kept, when the removal it was kept for failed.
func (n *node) unkeep() {
	if n == nil {
		return
	}
	if k := n.kept.Swap(nil); k != nil {
		k.Release(context.Background())
	}
}

// OnForget closes the descriptors the node kept, once the kernel has
// forgotten the node.
func (n *node) OnForget() {
	n.unkeep()
	n.dropWriter()
}

// childNode returns the node of the entry name in n, if the kernel knows it.
func (n *node) childNode(name string) *node {
	c := n.GetChild(name)
	if c == nil {
		return nil
	}
	cn, _ := c.Operations().(*node)
	return cn
}
