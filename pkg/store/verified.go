package store

import (
	"bytes"
	"errors"
	"io"
	"os"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// A store file that this process has seen pass the page check, or has
// itself left behind after its own transactions under its own lock, does
// not need the checker child again while nothing has written the file
// since: Open skips the deep check when the file still shows exactly the
// state recorded then. The state is the file's device and inode, size,
// change and modification times (any write(2), truncate or allocation
// moves them) and the bytes of its two meta pages (any bbolt commit
// rewrites one of them, even within one tick of the file system's
// clock). Another process's commit, a torn write and a damaged page
// written by anything at all each change that state, and the next Open
// checks again. What the state cannot see is a change made without
// writing through the file system (the medium decaying under it); that
// is left to the next process, whose first Open always checks.
//
// Within one start a coordinator opens the Storage Catalog twice (the
// prepared artifact, then its lease), and a teardown once more; each
// checker child costs an exec of the whole binary.

// fileState is what a store file showed at one moment.
type fileState struct {
	dev, ino     uint64
	size         int64
	ctime, mtime unix.Timespec
	metas        []byte // the two meta pages' header and meta bytes
}

func (a fileState) equal(b fileState) bool {
	return a.dev == b.dev && a.ino == b.ino && a.size == b.size &&
		a.ctime == b.ctime && a.mtime == b.mtime && bytes.Equal(a.metas, b.metas)
}

// verified maps a cleaned store path to the state last verified.
var verified struct {
	mu sync.Mutex
	m  map[string]fileState
}

// deepChecks counts checker children started, for tests.
var deepChecks atomic.Int64

// stateOf reads path's state without following a symlink.
func stateOf(path string) (fileState, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return fileState{}, &os.PathError{Op: "open", Path: path, Err: err}
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fileState{}, &os.PathError{Op: "fstat", Path: path, Err: err}
	}
	s := fileState{dev: st.Dev, ino: st.Ino, size: st.Size, ctime: st.Ctim, mtime: st.Mtim}
	const n = boltPageHeader + boltMetaLen
	buf := make([]byte, 2*n)
	if _, err := f.ReadAt(buf[:n], 0); err != nil && !errors.Is(err, io.EOF) {
		return fileState{}, err
	}
	ps := int64(4096)
	if m, err := parseMeta(buf[:n]); err == nil {
		ps = int64(m.pageSize)
	}
	if _, err := f.ReadAt(buf[n:], ps); err != nil && !errors.Is(err, io.EOF) {
		return fileState{}, err
	}
	s.metas = buf
	return s, nil
}

// unchangedSinceVerified reports whether path still shows the state last
// verified; it is false when the state cannot be read.
func unchangedSinceVerified(path string) (fileState, bool) {
	s, err := stateOf(path)
	if err != nil {
		return fileState{}, false
	}
	verified.mu.Lock()
	defer verified.mu.Unlock()
	v, ok := verified.m[path]
	return s, ok && v.equal(s)
}

// remember records s as path's verified state.
func remember(path string, s fileState) {
	verified.mu.Lock()
	defer verified.mu.Unlock()
	if verified.m == nil {
		verified.m = map[string]fileState{}
	}
	verified.m[path] = s
}

// forget drops what is known of path.
func forget(path string) {
	verified.mu.Lock()
	defer verified.mu.Unlock()
	delete(verified.m, path)
}
