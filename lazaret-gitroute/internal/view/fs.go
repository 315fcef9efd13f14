package view

import (
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// FS is the state shared by every node of one view.
type FS struct {
	roots  [2]backing
	router Router
	log    *slog.Logger

	mu   sync.Mutex
	inos map[[2]uint64]uint64 // (device, inode) of a backing file -> view inode
	next uint64

	// root is the root node, set by Root; Prune names the nodes to the
	// kernel through it.
	root *node
	// lookups counts the nodes handed to the kernel since the last sweep
	// (prune.go); kick starts a sweep early; busy says whether a request
	// came since the pruner's last tick (Activity).
	lookups atomic.Uint64
	kick    chan struct{}
	busy    atomic.Bool
	// budget is how many nodes the view holds before a sweep prunes
	// (pruneBudget; tests lower it).
	budget int

	// w is the host tree's watcher while it runs (watch.go); nil serves
	// every host entry with one-second timeouts.
	w atomic.Pointer[watcher]

	// writers are the nodes holding a create's descriptor, oldest first
	// (handleless.go, addWriter).
	wmu     sync.Mutex
	writers []*node
}

// New returns the view over the retained O_PATH roots hostFd and isolatedFd
// (borrowed, not closed by the view) with the given router.
func New(hostFd, isolatedFd int, router Router, log *slog.Logger) *FS {
	return &FS{
		roots:  [2]backing{{fd: hostFd}, {fd: isolatedFd}},
		router: router,
		log:    log,
		inos:   make(map[[2]uint64]uint64),
		next:   2, // 1 is the root
		kick:   make(chan struct{}, 1),
		budget: pruneBudget,
	}
}

// Root returns the root node to pass to fs.NewNodeFS (once).
func (f *FS) Root() fs.InodeEmbedder {
	f.root = &node{f: f}
	return f.root
}

// Cache lifetimes. An entry, its attributes or a negative entry in a
// directory the watcher watches are cached for cacheFor: the watcher
// invalidates them when the host changes (watch.go). In a host directory
// without a watch they are cached for shortFor, so that a host change
// shows within that.
const (
	cacheFor = time.Hour
	shortFor = time.Second
)

// Options returns the node options of a view: long attribute, entry and
// negative-entry caching, which Lookup and Getattr shorten where the host
// tree is not watched.
func Options(mo fuse.MountOptions) *fs.Options {
	long := cacheFor
	return &fs.Options{
		MountOptions:    mo,
		EntryTimeout:    &long,
		AttrTimeout:     &long,
		NegativeTimeout: &long,
		RootStableAttr:  &fs.StableAttr{Ino: 1, Mode: syscall.S_IFDIR},
	}
}

// settled reports whether what the kernel caches of the entries of the
// directory at view path dir may stay cached for long: the directory has a
// watch, or it routes to the isolated root, which only the view writes
// during a generation.
func (f *FS) settled(dir string) bool {
	if w := f.w.Load(); w != nil && w.watched(dir) {
		return true
	}
	return f.router.Route(dir, true) == Isolated
}

// attrSettled reports whether the attributes of the node at p may stay
// cached for long: its entry is settled, and a directory's own entries
// too (its times and link count change with them).
func (f *FS) attrSettled(p string, isDir bool) bool {
	if p == "" {
		return f.settled("")
	}
	dir, _ := split(p)
	return f.settled(dir) && (!isDir || f.settled(p))
}

// ino maps a backing (device, inode) to a stable view inode number; the two
// roots may share a filesystem or not, and the view must never hand out one
// number for two files.
func (f *FS) ino(st *unix.Stat_t) uint64 {
	key := [2]uint64{st.Dev, st.Ino}
	f.mu.Lock()
	defer f.mu.Unlock()
	if v, ok := f.inos[key]; ok {
		return v
	}
	v := f.next
	f.next++
	f.inos[key] = v
	return v
}

// find locates the entry shown at path: the backing it is served from and
// its lstat. A host entry is shown only when the path, with the entry's own
// kind, routes to the host; likewise for the isolated root. It returns
// ENOENT when neither root holds a visible entry.
func (f *FS) find(path string) (Backing, unix.Stat_t, error) {
	rf, rd := f.router.Route(path, false), f.router.Route(path, true)
	order := []Backing{rf}
	if rd != rf {
		order = []Backing{Host, Isolated}
	}
	for _, b := range order {
		st, err := f.roots[b].lstat(path)
		if err != nil {
			if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
				continue
			}
			return b, st, err
		}
		if f.router.Route(path, st.Mode&unix.S_IFMT == unix.S_IFDIR) == b {
			return b, st, nil
		}
	}
	return Host, unix.Stat_t{}, unix.ENOENT
}

// fill copies st into out with the view's inode number.
func (f *FS) fill(st *unix.Stat_t, out *fuse.Attr) {
	var s syscall.Stat_t
	s.Dev, s.Ino, s.Nlink, s.Mode, s.Uid, s.Gid = st.Dev, st.Ino, st.Nlink, st.Mode, st.Uid, st.Gid
	s.Rdev, s.Size, s.Blksize, s.Blocks = st.Rdev, st.Size, st.Blksize, st.Blocks
	s.Atim = syscall.Timespec(st.Atim)
	s.Mtim = syscall.Timespec(st.Mtim)
	s.Ctim = syscall.Timespec(st.Ctim)
	out.FromStat(&s)
	out.Ino = f.ino(st)
}

// hiddenBelow reports whether the host directory dir holds, at any depth,
// an entry the view does not show from the host (one that routes to the
// isolated root). Renaming such a directory would carry a host-ignored file
// to a path where it might be shown, so the view refuses it.
func (f *FS) hiddenBelow(dir string) (bool, error) {
	ents, _, err := f.roots[Host].readDir(dir)
	if err != nil {
		return false, err
	}
	for _, e := range ents {
		p := join(dir, e.name)
		isDir := e.typ == unix.DT_DIR
		if e.typ == unix.DT_UNKNOWN {
			st, err := f.roots[Host].lstat(p)
			if err != nil {
				return false, err
			}
			isDir = st.Mode&unix.S_IFMT == unix.S_IFDIR
		}
		if f.router.Route(p, isDir) != Host {
			return true, nil
		}
		if isDir {
			if h, err := f.hiddenBelow(p); err != nil || h {
				return h, err
			}
		}
	}
	return false, nil
}

// errno converts a backing error to the errno the view returns.
func errno(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	return fs.ToErrno(err)
}
