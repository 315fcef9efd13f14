package view

import (
	"context"
	"sync"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// file is an open regular file of the view. Opening it costs the daemon
// nothing: gVisor opens every file it caches a dentry for (its control
// descriptor), and most of those are never read, so the backing file is
// opened at the first operation that needs it, through the node's current
// path and routing with the confinement of every other access, and closed
// on release. A file the view creates, or opens with O_TRUNC, holds its
// backing descriptor from the start.
type file struct {
	n     *node
	flags int // backing open flags

	mu       sync.Mutex
	lf       *fs.LoopbackFile // nil until the backing is open
	fd       int              // lf's descriptor
	released bool
	// written says whether a write came since the last flush, which then
	// closes a duplicate of the descriptor so that the backing file system
	// reports deferred write errors; a flush with nothing written has no
	// work to do.
	written bool
}

var (
	_ fs.FileReader    = (*file)(nil)
	_ fs.FileWriter    = (*file)(nil)
	_ fs.FileWritever  = (*file)(nil)
	_ fs.FileFlusher   = (*file)(nil)
	_ fs.FileFsyncer   = (*file)(nil)
	_ fs.FileReleaser  = (*file)(nil)
	_ fs.FileGetattrer = (*file)(nil)
	_ fs.FileSetattrer = (*file)(nil)
	_ fs.FileAllocater = (*file)(nil)
	_ fs.FileLseeker   = (*file)(nil)
)

// lazyFile returns a file of n whose backing opens with flags on first use,
// and records it with n so that an unlink of n opens it first.
func lazyFile(n *node, flags int) *file {
	fl := &file{n: n, flags: flags, fd: -1}
	n.f.fileMu.Lock()
	n.lazy = append(n.lazy, fl)
	n.f.fileMu.Unlock()
	return fl
}

// openFile returns a file of n over the backing descriptor fd, which it
// takes ownership of.
func openFile(n *node, fd int) *file {
	return &file{n: n, fd: fd, lf: fs.NewLoopbackFile(fd).(*fs.LoopbackFile)}
}

// backing returns the open backing file, opening it on first use. The
// opened file must be the one the node stands for (same view inode): a
// node whose path now names another file, after the host replaced it, gets
// ESTALE, as a node with no path does.
func (fl *file) backing() (*fs.LoopbackFile, syscall.Errno) {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	if fl.lf != nil {
		return fl.lf, 0
	}
	if fl.released {
		return nil, syscall.EBADF
	}
	p, b, e := fl.n.where()
	if e != 0 {
		return nil, e
	}
	fd, err := fl.n.f.roots[b].open(p, fl.flags|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, errno(err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, errno(err)
	}
	if ino, ok := fl.n.f.knownIno(&st); !ok || ino != fl.n.StableAttr().Ino {
		unix.Close(fd)
		return nil, syscall.ESTALE
	}
	fl.fd, fl.lf = fd, fs.NewLoopbackFile(fd).(*fs.LoopbackFile)
	fl.n.f.forget(fl)
	return fl.lf, 0
}

// pin opens the backing of every not yet opened file of n, before the
// entry it is reached by goes away (an unlink, or a rename over it): an
// open file outlives its name. A file that cannot be opened fails with
// ESTALE at its first use.
func (n *node) pin() {
	n.f.fileMu.Lock()
	pending := n.lazy
	n.lazy = nil
	n.f.fileMu.Unlock()
	for _, fl := range pending {
		if _, e := fl.backing(); e != 0 {
			n.f.log.Debug("an open file loses its backing with its name", "errno", e)
		}
	}
}

// forget drops fl from its node's files awaiting a backing.
func (f *FS) forget(fl *file) {
	f.fileMu.Lock()
	defer f.fileMu.Unlock()
	l := fl.n.lazy
	for i, x := range l {
		if x == fl {
			l[i] = l[len(l)-1]
			l[len(l)-1] = nil
			fl.n.lazy = l[:len(l)-1]
			break
		}
	}
	if len(fl.n.lazy) == 0 {
		fl.n.lazy = nil
	}
}

// opened returns the backing if it is open, without opening it.
func (fl *file) opened() *fs.LoopbackFile {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	return fl.lf
}

func (fl *file) Read(ctx context.Context, buf []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	lf, e := fl.backing()
	if e != 0 {
		return nil, e
	}
	return lf.Read(ctx, buf, off)
}

func (fl *file) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	lf, e := fl.backing()
	if e != 0 {
		return 0, e
	}
	fl.markWritten()
	return lf.Write(ctx, data, off)
}

func (fl *file) Writev(ctx context.Context, data [][]byte, off int64) (uint32, syscall.Errno) {
	lf, e := fl.backing()
	if e != 0 {
		return 0, e
	}
	fl.markWritten()
	return lf.Writev(ctx, data, off)
}

func (fl *file) markWritten() {
	fl.mu.Lock()
	fl.written = true
	fl.mu.Unlock()
}

func (fl *file) Flush(ctx context.Context) syscall.Errno {
	fl.mu.Lock()
	lf, written := fl.lf, fl.written
	fl.written = false
	fl.mu.Unlock()
	if lf == nil || !written {
		return 0
	}
	return lf.Flush(ctx)
}

func (fl *file) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	lf, e := fl.backing()
	if e != 0 {
		return e
	}
	return lf.Fsync(ctx, flags)
}

func (fl *file) Release(ctx context.Context) syscall.Errno {
	fl.mu.Lock()
	lf := fl.lf
	fl.lf, fl.fd, fl.released = nil, -1, true
	fl.mu.Unlock()
	if lf == nil {
		fl.n.f.forget(fl)
		return 0
	}
	return lf.Release(ctx)
}

// Getattr stats the open backing file, for a node that has lost its name;
// the view's inode number stays the node's.
func (fl *file) Getattr(ctx context.Context, out *fuse.AttrOut) syscall.Errno {
	if _, e := fl.backing(); e != 0 {
		return e
	}
	fl.mu.Lock()
	defer fl.mu.Unlock()
	if fl.lf == nil {
		return syscall.EBADF
	}
	var st unix.Stat_t
	if err := unix.Fstat(fl.fd, &st); err != nil {
		return errno(err)
	}
	fl.n.f.fill(&st, &out.Attr)
	return 0
}

func (fl *file) Setattr(ctx context.Context, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	lf, e := fl.backing()
	if e != 0 {
		return e
	}
	return lf.Setattr(ctx, in, out)
}

func (fl *file) Allocate(ctx context.Context, off uint64, size uint64, mode uint32) syscall.Errno {
	lf, e := fl.backing()
	if e != 0 {
		return e
	}
	fl.markWritten()
	return lf.Allocate(ctx, off, size, mode)
}

func (fl *file) Lseek(ctx context.Context, off uint64, whence uint32) (uint64, syscall.Errno) {
	lf, e := fl.backing()
	if e != 0 {
		return 0, e
	}
	return lf.Lseek(ctx, off, whence)
}
