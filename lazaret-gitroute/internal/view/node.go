package view

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"lazaret.dev/pkg/sys"
)

// node is one view inode. It holds no descriptor while it has a path:
// every operation resolves the node's current view path beneath the
// backing root that path routes to, so a rename in the view or on the host
// can never leave a node bound to a file the routing no longer allows.
// A regular file the sandbox unlinks or renames over keeps, in kept, a
// descriptor of its backing file, so that what still has it open reads
// it as before (handleless.go); it is closed when the kernel forgets the
// node.
type node struct {
	fs.Inode
	f    *FS
	kept atomic.Pointer[fs.LoopbackFile]

	// wmu guards writer: the descriptor of a file the sandbox created
	// through the view, opened with the create's flags, for the writes a
	// descriptor opened by path is refused (handleless.go, "writers").
	wmu    sync.Mutex
	writer int // descriptor + 1; 0 for none
}

var (
	_ fs.NodeLookuper       = (*node)(nil)
	_ fs.NodeGetattrer      = (*node)(nil)
	_ fs.NodeSetattrer      = (*node)(nil)
	_ fs.NodeOpener         = (*node)(nil)
	_ fs.NodeCreater        = (*node)(nil)
	_ fs.NodeMkdirer        = (*node)(nil)
	_ fs.NodeMknoder        = (*node)(nil)
	_ fs.NodeSymlinker      = (*node)(nil)
	_ fs.NodeLinker         = (*node)(nil)
	_ fs.NodeReadlinker     = (*node)(nil)
	_ fs.NodeUnlinker       = (*node)(nil)
	_ fs.NodeRmdirer        = (*node)(nil)
	_ fs.NodeRenamer        = (*node)(nil)
	_ fs.NodeStatfser       = (*node)(nil)
	_ fs.NodeAccesser       = (*node)(nil)
	_ fs.NodeGetxattrer     = (*node)(nil)
	_ fs.NodeSetxattrer     = (*node)(nil)
	_ fs.NodeListxattrer    = (*node)(nil)
	_ fs.NodeRemovexattrer  = (*node)(nil)
	_ fs.NodeReader         = (*node)(nil)
	_ fs.NodeWriter         = (*node)(nil)
	_ fs.NodeFlusher        = (*node)(nil)
	_ fs.NodeFsyncer        = (*node)(nil)
	_ fs.NodeAllocater      = (*node)(nil)
	_ fs.NodeLseeker        = (*node)(nil)
	_ fs.NodeOnForgetter    = (*node)(nil)
	_ fs.NodeOpendirHandler = (*node)(nil)

	_ fs.FileReaddirenter = (*dirHandle)(nil)
	_ fs.FileSeekdirer    = (*dirHandle)(nil)
	_ fs.FileReleasedirer = (*dirHandle)(nil)
)

// rel returns the node's current view path. A node that has been removed
// from the tree (unlinked while open) has none: it reports false, and the
// operation fails with ESTALE instead of acting on some other path.
func (n *node) rel() (string, bool) {
	in := n.EmbeddedInode()
	var segs []string
	for !in.IsRoot() {
		name, parent := in.Parent()
		if parent == nil {
			return "", false
		}
		segs = append(segs, name)
		in = parent
	}
	slices.Reverse(segs)
	return strings.Join(segs, "/"), true
}

func (n *node) isDir() bool { return n.StableAttr().Mode&syscall.S_IFMT == syscall.S_IFDIR }

// where returns the node's path and the backing its kind routes to.
func (n *node) where() (string, Backing, syscall.Errno) {
	p, ok := n.rel()
	if !ok {
		return "", Host, syscall.ESTALE
	}
	return p, n.f.router.Route(p, n.isDir()), 0
}

// child returns the node of an entry the kernel is about to be handed
// (a lookup, or an entry just created), and counts it for Prune.
func (n *node) child(ctx context.Context, st *unix.Stat_t, out *fuse.EntryOut) *fs.Inode {
	n.f.fill(st, &out.Attr)
	if out.EntryTimeout() == 0 {
		// A new entry (Lookup sets its own): long in a watched directory,
		// but a new directory has no watch of its own yet.
		out.SetEntryTimeout(shortFor)
		out.SetAttrTimeout(shortFor)
		if dir, ok := n.rel(); ok && n.f.settled(dir) {
			out.SetEntryTimeout(cacheFor)
			if st.Mode&unix.S_IFMT != unix.S_IFDIR {
				out.SetAttrTimeout(cacheFor)
			}
		}
	}
	n.f.looked()
	return n.NewInode(ctx, &node{f: n.f}, fs.StableAttr{Mode: st.Mode & syscall.S_IFMT, Ino: out.Attr.Ino})
}

func (n *node) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	dir, ok := n.rel()
	if !ok {
		return nil, syscall.ESTALE
	}
	// Whether the directory is watched is read before the host is: a
	// change after this read is reported by the watcher.
	long := n.f.settled(dir)
	_, st, err := n.f.find(join(dir, name))
	if err != nil {
		if !long {
			out.SetEntryTimeout(shortFor) // the negative entry's lifetime
		}
		return nil, errno(err)
	}
	out.SetEntryTimeout(shortFor)
	out.SetAttrTimeout(shortFor)
	if long {
		out.SetEntryTimeout(cacheFor)
		if st.Mode&unix.S_IFMT != unix.S_IFDIR || n.f.settled(join(dir, name)) {
			out.SetAttrTimeout(cacheFor)
		}
	}
	return n.child(ctx, &st, out), 0
}

func (n *node) Getattr(ctx context.Context, fh fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	p, ok := n.rel()
	if !ok {
		// Unlinked while open: only the open file still names it.
		fh = n.handle(fh)
		if g, isG := fh.(fs.FileGetattrer); isG && fh != nil {
			return g.Getattr(ctx, out)
		}
		return syscall.ESTALE
	}
	long := n.f.attrSettled(p, n.isDir())
	st, err := n.f.roots[n.f.router.Route(p, n.isDir())].lstat(p)
	if err != nil {
		return errno(err)
	}
	n.f.fill(&st, &out.Attr)
	if !long {
		out.SetTimeout(shortFor)
	}
	return 0
}

// writable refuses changes to sealed paths (EROFS) and to host regular
// files with more than one link (EPERM): such an inode may also be reachable
// outside the workspace, where the view must not write.
func (n *node) writable(p string, b Backing) syscall.Errno {
	if n.f.router.Rule(p) == Sealed {
		return syscall.EROFS
	}
	if b == Host && !n.isDir() {
		st, err := n.f.roots[b].lstat(p)
		if err != nil {
			return errno(err)
		}
		if st.Mode&unix.S_IFMT == unix.S_IFREG && st.Nlink > 1 {
			return syscall.EPERM
		}
	}
	return 0
}

func (n *node) Setattr(ctx context.Context, fh fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if _, ok := n.rel(); !ok {
		// Unlinked while open: only the file, through what was kept.
		if k := n.kept.Load(); k != nil {
			return n.setattrUnlinked(ctx, k, in, out)
		}
		return syscall.ESTALE
	}
	s, hasFile := fh.(fs.FileSetattrer)
	hasFile = hasFile && fh != nil
	p, b, e := n.where()
	if e != 0 {
		return e
	}
	if e := n.writable(p, b); e != 0 {
		return e
	}
	if hasFile {
		if e := s.Setattr(ctx, in, out); e != 0 {
			return e
		}
		return n.setattrReply(ctx, out)
	}
	fd, err := n.f.roots[b].openPath(p)
	if err != nil {
		return errno(err)
	}
	defer unix.Close(fd)
	name := procPath(fd)
	if m, ok := in.GetMode(); ok {
		if err := unix.Chmod(name, noSetID(m&07777, n.isDir())); err != nil {
			return errno(err)
		}
	}
	if _, uok := in.GetUID(); uok {
		if e := chowned(fd); e != 0 {
			return e
		}
	} else if _, gok := in.GetGID(); gok {
		if e := chowned(fd); e != 0 {
			return e
		}
	}
	if sz, ok := in.GetSize(); ok {
		if e := n.writeTo(func(fd int) syscall.Errno { return errno(unix.Ftruncate(fd, int64(sz))) }); e != 0 {
			return e
		}
	}
	atime, aok := in.GetATime()
	mtime, mok := in.GetMTime()
	if aok || mok {
		ts := []unix.Timespec{{Nsec: unix.UTIME_OMIT}, {Nsec: unix.UTIME_OMIT}}
		if aok {
			ts[0] = unix.NsecToTimespec(atime.UnixNano())
		}
		if mok {
			ts[1] = unix.NsecToTimespec(mtime.UnixNano())
		}
		if err := unix.UtimesNanoAt(unix.AT_FDCWD, name, ts, 0); err != nil {
			return errno(err)
		}
	}
	return n.setattrReply(ctx, out)
}

// setattrUnlinked changes a file unlinked or renamed over through the view,
// through the descriptor the node kept of it. Only while no name reaches
// the file: one with a link left (another name the host gave it, perhaps
// outside the workspace, which is why the view kept it read-only) is
// refused (EPERM), as a write to it would be. The change follows the
// view's rules: no set-ID bits, no owner change (chowned).
func (n *node) setattrUnlinked(ctx context.Context, k *fs.LoopbackFile, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	var cur fuse.AttrOut
	if e := k.Getattr(ctx, &cur); e != 0 {
		return e
	}
	if cur.Nlink > 0 {
		return syscall.EPERM
	}
	c := *in
	if m, ok := in.GetMode(); ok {
		c.Mode = noSetID(m&07777, false)
	}
	if c.Valid&(fuse.FATTR_UID|fuse.FATTR_GID) != 0 {
		c.Valid &^= fuse.FATTR_UID | fuse.FATTR_GID
		if c.Valid&fuse.FATTR_MODE == 0 {
			if m := killedMode(cur.Mode); m != cur.Mode {
				c.Valid |= fuse.FATTR_MODE
				c.Mode = m & 07777
			}
		}
	}
	if e := k.Setattr(ctx, &c, out); e != 0 {
		return e
	}
	if out.Timeout() == 0 {
		out.SetTimeout(cacheFor)
	}
	return 0
}

// noSetID is mode without the set-user-ID and set-group-ID bits unless it
// is a directory's: the view gives no file it creates or changes either bit
// (chmod, create, mknod), so that nothing the sandbox writes becomes a
// program that runs with the developer's privileges, or root's, when
// anyone on the host runs it. A directory keeps set-group-ID, which only
// makes new entries inherit its group.
func noSetID(mode uint32, isDir bool) uint32 {
	if isDir {
		return mode &^ syscall.S_ISUID
	}
	return mode &^ (syscall.S_ISUID | syscall.S_ISGID)
}

// chowned does what a chown through the view does to the file open as fd
// (an O_PATH descriptor): it changes no owner (workspace files stay the
// developer's whatever the sandbox asks; gVisor chowns every file it
// creates to the creating user, who has no host identity) and, as any
// chown, clears set-user-ID, and set-group-ID where the group may execute
// (KillPrivCapability leaves that to the view).
func chowned(fd int) syscall.Errno {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return errno(err)
	}
	if m := killedMode(st.Mode); m != st.Mode {
		if err := unix.Chmod(procPath(fd), m&07777); err != nil {
			return errno(err)
		}
	}
	return 0
}

// setattrReply fills a SETATTR reply with the node's attributes and their
// lifetime: go-fuse gives a GETATTR reply its default lifetime but leaves
// a SETATTR reply's at 0, which would make the kernel ask again at once
// (after every chown gVisor makes of a file it creates, for one).
func (n *node) setattrReply(ctx context.Context, out *fuse.AttrOut) syscall.Errno {
	if e := n.Getattr(ctx, nil, out); e != 0 {
		return e
	}
	if out.Timeout() == 0 {
		out.SetTimeout(cacheFor)
	}
	return 0
}

// openFlags are the open flags passed on to the backing file; openat2
// refuses any other bit.
const openFlags = unix.O_ACCMODE | unix.O_APPEND | unix.O_TRUNC | unix.O_EXCL | unix.O_NONBLOCK |
	unix.O_DSYNC | unix.O_SYNC | unix.O_DIRECT | unix.O_NOATIME | unix.O_LARGEFILE | unix.O_DIRECTORY

// writeFlags reports whether open flags can change the file.
func writeFlags(flags uint32) bool {
	return flags&syscall.O_ACCMODE != syscall.O_RDONLY || flags&syscall.O_TRUNC != 0
}

// prepare checks that a new entry may be created at path with the given
// kind and returns the backing it goes to, with that backing's parent
// directories in place.
func (n *node) prepare(name string, isDir bool) (string, Backing, syscall.Errno) {
	dir, ok := n.rel()
	if !ok {
		return "", Host, syscall.ESTALE
	}
	p := join(dir, name)
	if n.f.router.Rule(p) == Sealed {
		return "", Host, syscall.EROFS
	}
	b := n.f.router.Route(p, isDir)
	if ob, _, err := n.f.find(p); err == nil && ob != b {
		return "", Host, syscall.EEXIST
	}
	if b == Isolated {
		if err := n.f.roots[Isolated].mkdirAll(dir); err != nil {
			return "", Host, errno(err)
		}
	}
	return p, b, 0
}

// created stats a new entry and returns its node.
func (n *node) created(ctx context.Context, p string, b Backing, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	st, err := n.f.roots[b].lstat(p)
	if err != nil {
		return nil, errno(err)
	}
	return n.child(ctx, &st, out), 0
}

func (n *node) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	p, b, e := n.prepare(name, false)
	if e != 0 {
		return nil, nil, 0, e
	}
	fd, err := n.f.roots[b].open(p, int(flags)&openFlags|unix.O_CREAT|unix.O_NOFOLLOW, noSetID(mode&07777, false))
	if err != nil {
		return nil, nil, 0, errno(err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, nil, 0, errno(err)
	}
	if b == Host && st.Nlink > 1 && writeFlags(flags) {
		unix.Close(fd)
		return nil, nil, 0, syscall.EPERM
	}
	// No handle: the file is served as every other (handleless.go), but
	// the descriptor the create opened stays as the file's writer.
	in := n.child(ctx, &st, out)
	if c, ok := in.Operations().(*node); ok && flags&syscall.O_ACCMODE != syscall.O_RDONLY {
		n.f.addWriter(c, fd)
	} else {
		unix.Close(fd)
	}
	return in, nil, fuse.FOPEN_KEEP_CACHE, 0
}

func (n *node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	p, b, e := n.prepare(name, true)
	if e != 0 {
		return nil, e
	}
	pfd, base, err := n.f.roots[b].parent(p)
	if err != nil {
		return nil, errno(err)
	}
	err = sys.Mkdirat(pfd, base, mode&07777)
	unix.Close(pfd)
	if err != nil {
		return nil, errno(err)
	}
	return n.created(ctx, p, b, out)
}

func (n *node) Mknod(ctx context.Context, name string, mode uint32, dev uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	switch mode & syscall.S_IFMT {
	case syscall.S_IFREG, syscall.S_IFIFO, syscall.S_IFSOCK:
	default:
		return nil, syscall.EPERM // no device nodes in the workspace
	}
	p, b, e := n.prepare(name, false)
	if e != 0 {
		return nil, e
	}
	if mode&syscall.S_IFMT != syscall.S_IFREG && n.f.router.Area(p) != "" {
		return nil, syscall.EPERM // nothing but files and directories in an administrative area
	}
	pfd, base, err := n.f.roots[b].parent(p)
	if err != nil {
		return nil, errno(err)
	}
	err = sys.Mknodat(pfd, base, mode&syscall.S_IFMT|noSetID(mode&07777, false), 0)
	unix.Close(pfd)
	if err != nil {
		return nil, errno(err)
	}
	return n.created(ctx, p, b, out)
}

func (n *node) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	p, b, e := n.prepare(name, false)
	if e != 0 {
		return nil, e
	}
	if n.f.router.Area(p) != "" {
		return nil, syscall.EPERM // git reads a linked ref, config or object wherever it points
	}
	pfd, base, err := n.f.roots[b].parent(p)
	if err != nil {
		return nil, errno(err)
	}
	err = sys.Symlinkat(target, pfd, base)
	unix.Close(pfd)
	if err != nil {
		return nil, errno(err)
	}
	return n.created(ctx, p, b, out)
}

func (n *node) Link(ctx context.Context, target fs.InodeEmbedder, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	src, ok := target.(*node)
	if !ok {
		return nil, syscall.EXDEV
	}
	sp, sb, e := src.where()
	if e != 0 {
		return nil, e
	}
	if n.f.router.Rule(sp) == Sealed {
		return nil, syscall.EROFS
	}
	p, b, e := n.prepare(name, false)
	if e != 0 {
		return nil, e
	}
	if sb != b || n.f.router.Area(sp) != n.f.router.Area(p) {
		return nil, syscall.EXDEV
	}
	sfd, sbase, err := n.f.roots[sb].parent(sp)
	if err != nil {
		return nil, errno(err)
	}
	defer unix.Close(sfd)
	dfd, dbase, err := n.f.roots[b].parent(p)
	if err != nil {
		return nil, errno(err)
	}
	defer unix.Close(dfd)
	if err := sys.Linkat(sfd, sbase, dfd, dbase, 0); err != nil {
		return nil, errno(err)
	}
	return n.created(ctx, p, b, out)
}

func (n *node) Readlink(ctx context.Context) ([]byte, syscall.Errno) {
	p, b, e := n.where()
	if e != 0 {
		return nil, e
	}
	pfd, base, err := n.f.roots[b].parent(p)
	if err != nil {
		return nil, errno(err)
	}
	defer unix.Close(pfd)
	buf := make([]byte, unix.PathMax)
	k, err := sys.Readlinkat(pfd, base, buf)
	if err != nil {
		return nil, errno(err)
	}
	return buf[:k], 0
}

// remove unlinks the visible entry name (a directory when dir is set).
func (n *node) remove(name string, dir bool) syscall.Errno {
	d, ok := n.rel()
	if !ok {
		return syscall.ESTALE
	}
	p := join(d, name)
	if n.f.router.Rule(p) == Sealed {
		return syscall.EROFS
	}
	b, _, err := n.f.find(p)
	if err != nil {
		return errno(err)
	}
	pfd, base, err := n.f.roots[b].parent(p)
	if err != nil {
		return errno(err)
	}
	defer unix.Close(pfd)
	flags := 0
	var c *node
	if dir {
		flags = unix.AT_REMOVEDIR
	} else {
		c = n.childNode(name)
		c.keep(p, b)
	}
	if e := errno(sys.Unlinkat(pfd, base, flags)); e != 0 {
		c.unkeep()
		return e
	}
	return 0
}

func (n *node) Unlink(ctx context.Context, name string) syscall.Errno { return n.remove(name, false) }

func (n *node) Rmdir(ctx context.Context, name string) syscall.Errno { return n.remove(name, true) }

func (n *node) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	np, ok := newParent.(*node)
	if !ok {
		return syscall.EXDEV
	}
	sd, ok1 := n.rel()
	dd, ok2 := np.rel()
	if !ok1 || !ok2 {
		return syscall.ESTALE
	}
	sp, dp := join(sd, name), join(dd, newName)
	if n.f.router.Rule(sp) == Sealed || n.f.router.Rule(dp) == Sealed {
		return syscall.EROFS
	}
	if n.f.router.Area(sp) != n.f.router.Area(dp) {
		// Nothing moves into an administrative area from outside (it
		// could carry a link or a FIFO there), out of it, or between
		// two of them.
		return syscall.EXDEV
	}
	sb, sst, err := n.f.find(sp)
	if err != nil {
		return errno(err)
	}
	srcDir := sst.Mode&unix.S_IFMT == unix.S_IFDIR
	if srcDir && n.f.router.HoldsRepo(sp) || n.f.router.Shelters(sp) || n.f.router.Shelters(dp) {
		return syscall.EXDEV
	}
	if n.f.router.Route(dp, srcDir) != sb {
		return syscall.EXDEV
	}
	dstDir := false
	if db, dst, err := n.f.find(dp); err == nil {
		if db != sb {
			return syscall.EXDEV
		}
		dstDir = dst.Mode&unix.S_IFMT == unix.S_IFDIR
		if flags&unix.RENAME_EXCHANGE != 0 && n.f.router.Route(sp, dstDir) != sb {
			return syscall.EXDEV
		}
		if flags&unix.RENAME_EXCHANGE != 0 && dstDir && n.f.router.HoldsRepo(dp) {
			return syscall.EXDEV
		}
	}
	if sb == Host {
		for _, c := range []struct {
			path  string
			isDir bool
		}{{sp, srcDir}, {dp, dstDir && flags&unix.RENAME_EXCHANGE != 0}} {
			if !c.isDir {
				continue
			}
			hidden, err := n.f.hiddenBelow(c.path)
			if err != nil {
				return errno(err)
			}
			if hidden {
				return syscall.EXDEV
			}
		}
	}
	if sb == Isolated {
		if err := n.f.roots[Isolated].mkdirAll(dd); err != nil {
			return errno(err)
		}
	}
	var replaced *node
	if flags&unix.RENAME_EXCHANGE == 0 && !dstDir {
		replaced = np.childNode(newName)
		replaced.keep(dp, sb)
	}
	if e := n.f.renameIn(sb, sp, dp, flags); e != 0 {
		replaced.unkeep()
		return e
	}
	if sb == Host && srcDir && flags&unix.RENAME_EXCHANGE == 0 {
		// Carry the directory's isolated entries along, so that its
		// ignored children stay with it.
		if _, err := n.f.roots[Isolated].lstat(sp); err == nil {
			if err := n.f.roots[Isolated].mkdirAll(dd); err == nil {
				if e := n.f.renameIn(Isolated, sp, dp, unix.RENAME_NOREPLACE); e != 0 {
					n.f.log.Warn("isolated entries of a renamed directory stay behind", "from", sp, "to", dp, "errno", e)
				}
			}
		}
	}
	return 0
}

func (f *FS) renameIn(b Backing, sp, dp string, flags uint32) syscall.Errno {
	sfd, sbase, err := f.roots[b].parent(sp)
	if err != nil {
		return errno(err)
	}
	defer unix.Close(sfd)
	dfd, dbase, err := f.roots[b].parent(dp)
	if err != nil {
		return errno(err)
	}
	defer unix.Close(dfd)
	return errno(sys.Renameat2(sfd, sbase, dfd, dbase, uint(flags)))
}

// OpendirHandle opens a directory for listing. In a directory whose
// changes the view learns of (settled: a watched host directory, or the
// isolated root), the kernel keeps the listing (FOPEN_CACHE_DIR) until a
// change through the view, or the watcher's NotifyContent of the
// directory, drops it; elsewhere, or when the watch is lost, it lists
// anew on each open (and drops a cached listing when it sees the
// directory's modification time change, at most shortFor after it last
// fetched its attributes).
func (n *node) OpendirHandle(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	p, ok := n.rel()
	if !ok {
		return nil, 0, syscall.ESTALE
	}
	var open uint32
	if n.f.settled(p) {
		open = fuse.FOPEN_CACHE_DIR | fuse.FOPEN_KEEP_CACHE
	}
	return &dirHandle{n: n}, open, 0
}

// dirHandle is an open directory's entries, read at the first readdir or
// seek. gVisor keeps one host handle per directory and rewinds it to the
// start before every getdents, so a rewind to offset 0 lists the directory
// again: a listing read once and replayed would hide every entry made
// after the directory was opened (git status would miss new files, git
// add would skip them).
type dirHandle struct {
	n    *node
	ents []fuse.DirEntry
	read bool
	idx  int
}

// Readdirent returns the next entry, whose offset is its position plus
// one; nil at the end.
func (d *dirHandle) Readdirent(ctx context.Context) (*fuse.DirEntry, syscall.Errno) {
	if !d.read {
		if e := d.Seekdir(ctx, 0); e != 0 {
			return nil, e
		}
	}
	if d.idx >= len(d.ents) {
		return nil, 0
	}
	ent := d.ents[d.idx]
	d.idx++
	ent.Off = uint64(d.idx)
	return &ent, 0
}

// Seekdir moves to off; off 0 reads the directory anew.
func (d *dirHandle) Seekdir(ctx context.Context, off uint64) syscall.Errno {
	if off == 0 || !d.read {
		ents, e := d.n.list()
		if e != 0 {
			return e
		}
		d.ents, d.read = ents, true
	}
	if off > uint64(len(d.ents)) {
		return syscall.EINVAL
	}
	d.idx = int(off)
	return 0
}

// Releasedir releases nothing: the entries are plain values.
func (d *dirHandle) Releasedir(ctx context.Context, flags uint32) {}

// list reads the directory's entries through the routing rules.
func (n *node) list() ([]fuse.DirEntry, syscall.Errno) {
	p, b, e := n.where()
	if e != 0 {
		return nil, e
	}
	out := []fuse.DirEntry{{Name: ".", Mode: syscall.S_IFDIR}, {Name: "..", Mode: syscall.S_IFDIR}}
	seen := map[string]bool{}
	found := false
	for _, rb := range []Backing{Host, Isolated} {
		if rb == Host && b != Host {
			continue
		}
		ents, dst, err := n.f.roots[rb].readDir(p)
		if err != nil {
			if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
				continue
			}
			return nil, errno(err)
		}
		found = true
		for _, e := range ents {
			if seen[e.name] {
				continue
			}
			cp := join(p, e.name)
			isDir := e.typ == unix.DT_DIR
			mode := uint32(e.typ) << 12
			if e.typ == unix.DT_UNKNOWN {
				st, err := n.f.roots[rb].lstat(cp)
				if err != nil {
					continue
				}
				isDir = st.Mode&unix.S_IFMT == unix.S_IFDIR
				mode = st.Mode & unix.S_IFMT
			}
			if n.f.router.Route(cp, isDir) != rb {
				continue
			}
			seen[e.name] = true
			ino := n.f.ino(&unix.Stat_t{Dev: dst.Dev, Ino: e.ino})
			out = append(out, fuse.DirEntry{Name: e.name, Mode: mode, Ino: ino})
		}
	}
	if !found {
		return nil, syscall.ENOENT
	}
	return out, 0
}

func (n *node) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	var s unix.Statfs_t
	if err := unix.Fstatfs(n.f.roots[Host].fd, &s); err != nil {
		return errno(err)
	}
	out.Blocks, out.Bfree, out.Bavail = s.Blocks, s.Bfree, s.Bavail
	out.Files, out.Ffree = s.Files, s.Ffree
	out.Bsize, out.NameLen, out.Frsize = uint32(s.Bsize), uint32(s.Namelen), uint32(s.Frsize)
	return 0
}

func (n *node) Access(ctx context.Context, mask uint32) syscall.Errno {
	p, b, e := n.where()
	if e != 0 {
		return e
	}
	if mask&unix.W_OK != 0 {
		if e := n.writable(p, b); e != 0 {
			return e
		}
	}
	fd, err := n.f.roots[b].openPath(p)
	if err != nil {
		return errno(err)
	}
	defer unix.Close(fd)
	return errno(unix.Faccessat(unix.AT_FDCWD, procPath(fd), mask, 0))
}

// Extended attributes are not served: each call answers ENOSYS, after
// which the kernel stops asking and answers EOPNOTSUPP itself. Without
// this the kernel asks for security.capability before every write(2) and
// every chown of a file in the view (to learn whether a write must drop
// file capabilities), one daemon round trip each; a workspace has no use
// for file capabilities, and no attribute the sandbox sets can reach a
// host file.

func (n *node) Getxattr(ctx context.Context, attr string, dest []byte) (uint32, syscall.Errno) {
	return 0, syscall.ENOSYS
}

func (n *node) Listxattr(ctx context.Context, dest []byte) (uint32, syscall.Errno) {
	return 0, syscall.ENOSYS
}

func (n *node) Setxattr(ctx context.Context, attr string, data []byte, flags uint32) syscall.Errno {
	return syscall.ENOSYS
}

func (n *node) Removexattr(ctx context.Context, attr string) syscall.Errno {
	return syscall.ENOSYS
}
