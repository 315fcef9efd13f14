package view

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"golang.org/x/sys/unix"
)

// Watching the host tree. The kernel caches the view's entries, attributes
// and negative entries for an hour and keeps the page cache of host files
// across opens (Options, Open); that is only correct because the daemon
// tells the kernel about every change the developer makes on the host.
// The watcher holds an inotify watch on every host directory the view
// shows (.git and its subdirectories included; not the isolated root,
// which only the view writes during a generation, nor host directories the
// view hides) and, for each event, invalidates what the kernel holds of
// the entry named (NotifyEntry, NotifyDelete) and of the node behind it
// (NotifyContent: attributes and cached pages). A directory without a
// watch (the bound was reached, the kernel refused one, or the host root
// is on a network file system, where inotify does not see other machines'
// changes) is served with one-second timeouts instead (Short).
//
// fanotify would report changes for a whole file system with one mark,
// but filesystem and mount marks need CAP_SYS_ADMIN in the initial user
// namespace (fanotify_init(2), fanotify_mark(2)); the daemon runs inside
// the State Anchor's user namespace, where it may only place inode marks,
// one per directory like inotify's, with a smaller event set.

const (
	// watchBatch is how long the watcher gathers events after the first
	// of a burst before it tells the kernel: a burst (a checkout, a save
	// that writes, renames and changes a file, the view's own creates) is
	// coalesced into one invalidation per entry.
	watchBatch = 5 * time.Millisecond
	// watchMax bounds the watches of one view. Watches count against the
	// user's fs.inotify.max_user_watches, shared with the developer's own
	// tools (an IDE's file watcher), and the sandbox can create
	// directories at will.
	watchMax = 32768
	// watchMask is what a directory's watch reports: every change to an
	// entry's name, content or attributes. IN_DONT_FOLLOW does not fit:
	// the watch is added through /proc/self/fd/N, a magic link that must
	// be followed to the directory the O_PATH descriptor holds (opened
	// beneath the retained root through no link).
	watchMask = unix.IN_CREATE | unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO |
		unix.IN_MODIFY | unix.IN_ATTRIB | unix.IN_CLOSE_WRITE | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF |
		unix.IN_ONLYDIR | unix.IN_EXCL_UNLINK
)

// networkMagic are the statfs types of file systems whose changes may come
// from another machine, which inotify never reports.
var networkMagic = map[int64]string{
	0x6969:     "NFS",
	0x517b:     "SMB",
	0xff534d42: "CIFS",
	0xfe534d42: "SMB2",
	0x65735546: "FUSE",
	0x01021997: "9P",
	0x00c36400: "Ceph",
}

// watcher is the inotify instance of one view.
type watcher struct {
	f     *FS
	file  *os.File // the inotify descriptor, non-blocking, read through the poller
	limit int

	mu    sync.RWMutex
	paths map[int32]string // watch descriptor -> view path of the directory
	wds   map[string]int32 // view path of a watched directory -> watch descriptor

	// warned makes the first directory left without a watch log once.
	warned sync.Once
}

// Watch starts watching the host tree: it adds a watch on every host
// directory the view shows and serves events until ctx ends. From then on
// the view caches for long what lies in watched directories. It returns
// an error when no watcher can be made at all (the view then keeps
// one-second timeouts everywhere) and, once started, runs until ctx ends.
// ready is closed once the initial watches are in place.
func (f *FS) Watch(ctx context.Context, ready chan<- struct{}) error {
	var sf unix.Statfs_t
	if err := unix.Fstatfs(f.roots[Host].fd, &sf); err != nil {
		close(ready)
		return fmt.Errorf("statfs of the host root: %w", err)
	}
	if name, ok := networkMagic[int64(sf.Type)]; ok {
		close(ready)
		return fmt.Errorf("the host root is on %s (statfs type %#x), whose changes inotify may not see: %w", name, sf.Type, ErrNotWatched)
	}
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		close(ready)
		return fmt.Errorf("creating an inotify instance: %w", err)
	}
	w := &watcher{f: f, file: os.NewFile(uintptr(fd), "inotify"), limit: watchLimit(),
		paths: make(map[int32]string), wds: make(map[string]int32)}
	defer w.file.Close()
	w.addTree("")
	f.w.Store(w)
	close(ready)
	f.log.Info("watching the host tree", "directories", w.count(), "limit", w.limit)
	// Closing the descriptor ends a Read in progress; Control holds it
	// open while a watch is added, so its number is never reused under it.
	stop := context.AfterFunc(ctx, func() { _ = w.file.Close() })
	defer stop()
	err = w.serve(ctx)
	f.w.Store(nil)
	if err != nil {
		// Nothing reports host changes any more: what the kernel cached
		// for long goes, and comes back with one-second timeouts.
		f.invalidateAll()
	}
	return err
}

// ErrNotWatched means the view cannot watch the host tree and keeps
// one-second timeouts.
var ErrNotWatched = errors.New("host changes are not watched; entries and attributes are cached for one second")

// watchLimit is watchMax, or a quarter of the user's inotify watches when
// that is smaller.
func watchLimit() int {
	b, err := os.ReadFile("/proc/sys/fs/inotify/max_user_watches")
	if err != nil {
		return watchMax
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || n/4 >= watchMax {
		return watchMax
	}
	return max(n/4, 1)
}

func (w *watcher) count() int {
	w.mu.RLock()
	defer w.mu.RUnlock()
	return len(w.wds)
}

// watched reports whether the directory at view path dir has a watch.
func (w *watcher) watched(dir string) bool {
	w.mu.RLock()
	_, ok := w.wds[dir]
	w.mu.RUnlock()
	return ok
}

// add places a watch on the host directory dir and reports whether it has
// one. The directory is opened beneath the retained root through no link
// (O_PATH), and the watch is added through that descriptor.
func (w *watcher) add(dir string) bool {
	fd, err := w.f.roots[Host].open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return false // gone, or no longer a directory: its parent's event says so
	}
	defer unix.Close(fd)
	if w.count() >= w.limit {
		w.unwatched(dir, fmt.Errorf("%d watches, the view's bound", w.limit))
		return false
	}
	var wd int
	rc, err := w.file.SyscallConn()
	if err == nil {
		cerr := rc.Control(func(ifd uintptr) {
			wd, err = unix.InotifyAddWatch(int(ifd), procPath(fd), watchMask)
		})
		if cerr != nil {
			err = cerr
		}
	}
	if err != nil {
		w.unwatched(dir, err)
		return false
	}
	w.mu.Lock()
	if old, ok := w.paths[int32(wd)]; ok && old != dir {
		delete(w.wds, old) // the same directory, renamed: re-keyed
	}
	w.paths[int32(wd)] = dir
	w.wds[dir] = int32(wd)
	w.mu.Unlock()
	return true
}

// unwatched logs, once, that a directory is served with short timeouts.
func (w *watcher) unwatched(dir string, err error) {
	w.warned.Do(func() {
		w.f.log.Warn("host directories left without a watch are cached for one second", "first", dir, "err", err)
	})
}

// addTree watches dir and every host directory the view shows below it,
// then invalidates what the kernel holds below dir: changes made before a
// watch was in place reported nothing.
func (w *watcher) addTree(dir string) {
	if w.f.router.Route(dir, true) != Host || !w.add(dir) {
		return
	}
	ents, _, err := w.f.roots[Host].readDir(dir)
	if err != nil {
		return
	}
	d := w.f.node(dir)
	for _, e := range ents {
		p := join(dir, e.name)
		if e.typ == unix.DT_DIR || e.typ == unix.DT_UNKNOWN {
			w.addTree(p)
		}
		if d != nil {
			w.f.reconcile(d, dir, e.name)
		}
	}
}

// forget drops the watches of dir and of every directory below it from
// the tables, removing them from the kernel when remove is set (a
// directory moved away; a deleted one loses its watches by itself).
func (w *watcher) forget(dir string, remove bool) {
	w.mu.Lock()
	var gone []int32
	for p, wd := range w.wds {
		if p == dir || strings.HasPrefix(p, dir+"/") || dir == "" {
			delete(w.wds, p)
			delete(w.paths, wd)
			gone = append(gone, wd)
		}
	}
	w.mu.Unlock()
	if !remove {
		return
	}
	if rc, err := w.file.SyscallConn(); err == nil {
		_ = rc.Control(func(ifd uintptr) {
			for _, wd := range gone {
				_, _ = unix.InotifyRmWatch(int(ifd), uint32(wd))
			}
		})
	}
}

// batch is one coalesced burst of events.
type batch struct {
	entries  map[[2]string]struct{} // (directory, name) whose entry changed
	dirs     map[string]struct{}    // directories whose own attributes changed
	newDirs  []string               // directories created or moved in
	overflow bool                   // the kernel dropped events
}

// serve reads events until ctx ends, each burst gathered for watchBatch.
func (w *watcher) serve(ctx context.Context) error {
	buf := make([]byte, 64<<10)
	for {
		b := batch{entries: map[[2]string]struct{}{}, dirs: map[string]struct{}{}}
		if err := w.file.SetReadDeadline(time.Time{}); err != nil {
			return nil // closed: ctx ended
		}
		n, err := w.file.Read(buf)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading inotify events: %w", err)
		}
		w.parse(buf[:n], &b)
		_ = w.file.SetReadDeadline(time.Now().Add(watchBatch))
		for {
			n, err := w.file.Read(buf)
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, os.ErrDeadlineExceeded) {
				break
			}
			if err != nil {
				return fmt.Errorf("reading inotify events: %w", err)
			}
			w.parse(buf[:n], &b)
		}
		w.apply(&b)
	}
}

// parse adds the events in buf to b.
func (w *watcher) parse(buf []byte, b *batch) {
	for off := 0; off+unix.SizeofInotifyEvent <= len(buf); {
		wd := int32(nativeU32(buf[off:]))
		mask := nativeU32(buf[off+4:])
		nl := int(nativeU32(buf[off+12:]))
		end := off + unix.SizeofInotifyEvent + nl
		if end > len(buf) {
			return
		}
		name := string(buf[off+unix.SizeofInotifyEvent : end])
		if i := strings.IndexByte(name, 0); i >= 0 {
			name = name[:i]
		}
		off = end
		if mask&unix.IN_Q_OVERFLOW != 0 {
			b.overflow = true
			continue
		}
		w.mu.RLock()
		dir, ok := w.paths[wd]
		w.mu.RUnlock()
		if !ok {
			continue // a watch already forgotten
		}
		if mask&unix.IN_IGNORED != 0 {
			w.mu.Lock()
			if w.paths[wd] == dir {
				delete(w.paths, wd)
				if w.wds[dir] == wd {
					delete(w.wds, dir)
				}
			}
			w.mu.Unlock()
			continue
		}
		if name == "" {
			// The directory itself: its attributes, or it went away (its
			// parent's watch names it too).
			if dir != "" {
				pd, base := split(dir)
				b.entries[[2]string{pd, base}] = struct{}{}
			}
			b.dirs[dir] = struct{}{}
			continue
		}
		p := join(dir, name)
		b.entries[[2]string{dir, name}] = struct{}{}
		if mask&(unix.IN_CREATE|unix.IN_DELETE|unix.IN_MOVED_FROM|unix.IN_MOVED_TO) != 0 {
			b.dirs[dir] = struct{}{}
		}
		if mask&unix.IN_ISDIR == 0 {
			continue
		}
		switch {
		case mask&unix.IN_MOVED_FROM != 0:
			w.forget(p, true)
		case mask&unix.IN_DELETE != 0:
			w.forget(p, false)
		case mask&(unix.IN_CREATE|unix.IN_MOVED_TO) != 0:
			b.newDirs = append(b.newDirs, p)
		}
	}
}

// apply tells the kernel what a batch changed.
func (w *watcher) apply(b *batch) {
	if b.overflow {
		w.f.log.Warn("inotify dropped events: invalidating every cached entry of the view")
		w.addTree("")
		w.f.invalidateAll()
	}
	for _, p := range b.newDirs {
		w.addTree(p)
	}
	for k := range b.entries {
		if d := w.f.node(k[0]); d != nil {
			w.f.reconcile(d, k[0], k[1])
		}
	}
	for dir := range b.dirs {
		if d := w.f.node(dir); d != nil {
			d.NotifyContent(0, 0)
		}
	}
}

// node returns the inode of the view path p if the kernel may hold it (it
// is in go-fuse's tree), else nil: a node the kernel does not know needs
// no invalidation.
func (f *FS) node(p string) *fs.Inode {
	if f.root == nil {
		return nil
	}
	in := f.root.EmbeddedInode()
	for p != "" {
		seg, rest, _ := strings.Cut(p, "/")
		if in = in.GetChild(seg); in == nil {
			return nil
		}
		p = rest
	}
	return in
}

// reconcile brings what the kernel holds of the entry name in directory
// d (at view path dir) in line with the backing roots: the same file
// still there has its attributes and pages invalidated; a file gone or
// replaced is taken out of the tree (so that no operation resolves the
// old node to the new path) and its entry invalidated; a name the tree
// does not hold has its entry invalidated, which drops a cached negative
// entry. Called from the watcher only, never from a request handler: a
// notification waits for the kernel, which may wait for that request.
func (f *FS) reconcile(d *fs.Inode, dir, name string) {
	c := d.GetChild(name)
	if c == nil {
		d.NotifyEntry(name)
		return
	}
	_, st, err := f.find(join(dir, name))
	sa := c.StableAttr()
	if err == nil && st.Mode&unix.S_IFMT == sa.Mode&syscall.S_IFMT && f.ino(&st) == sa.Ino {
		c.NotifyContent(0, 0)
		return
	}
	d.RmChild(name)
	if err != nil && sa.Mode&syscall.S_IFMT == syscall.S_IFDIR {
		d.NotifyDelete(name, c)
		return
	}
	d.NotifyEntry(name)
	c.NotifyContent(0, 0)
}

// invalidateAll reconciles every entry the kernel may hold, and every name
// each directory it holds now lists (a negative entry cached for a name
// the host created since is dropped that way).
func (f *FS) invalidateAll() {
	var walk func(in *fs.Inode, dir string)
	walk = func(in *fs.Inode, dir string) {
		names := map[string]bool{}
		for name, c := range in.Children() {
			names[name] = true
			if c.IsDir() {
				walk(c, join(dir, name))
			}
		}
		for _, b := range []Backing{Host, Isolated} {
			ents, _, err := f.roots[b].readDir(dir)
			if err != nil {
				continue
			}
			for _, e := range ents {
				names[e.name] = true
			}
		}
		for name := range names {
			f.reconcile(in, dir, name)
		}
		in.NotifyContent(0, 0)
	}
	if f.root != nil {
		walk(f.root.EmbeddedInode(), "")
	}
}

// nativeU32 reads an inotify_event field, which is in host byte order.
func nativeU32(b []byte) uint32 { return binary.NativeEndian.Uint32(b) }
