package store

import (
	"errors"
	"sync"

	"golang.org/x/sys/unix"

	"lazaret.dev/pkg/sys"
)

// Reserve is how many bytes past the end of a writable store file DB
// keeps allocated. The sandbox can fill the file system the stores share
// with its persistent directories, and bbolt grows its file by
// truncation (a hole) and then writes into it, which fails on a full file
// system. With the holes filled and Reserve bytes allocated past the end
// (fallocate(2) FALLOC_FL_KEEP_SIZE: size and content unchanged), the
// commits that follow, growth included, land in blocks already held
// until the reserve is used up, and only then fail with their own errors.
const Reserve = 4 << 20

// reserve holds the allocation of a writable store: a descriptor of its
// own on the file (bbolt keeps its own unexported) and the size it was
// last allocated for.
type reserve struct {
	mu   sync.Mutex
	fd   int
	size int64
	// err is the last allocation's failure (nil when it held).
	err error
}

// openReserve opens path for the reserve and allocates it once. A file
// system without fallocate, or one already full, leaves the store usable
// without it: the error is kept for Reserved.
func openReserve(path string) *reserve {
	fd, err := sys.Open(path, unix.O_WRONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return &reserve{fd: -1, err: err}
	}
	r := &reserve{fd: fd, size: -1}
	r.renew()
	return r
}

// renew allocates every block of the file and Reserve bytes past its end
// when the file's size changed since the last allocation that held.
func (r *reserve) renew() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fd < 0 {
		return
	}
	var st unix.Stat_t
	if err := unix.Fstat(r.fd, &st); err != nil {
		r.err = err
		return
	}
	if st.Size == r.size && r.err == nil {
		return
	}
	err := sys.Fallocate(r.fd, unix.FALLOC_FL_KEEP_SIZE, 0, st.Size+Reserve)
	if errors.Is(err, unix.EOPNOTSUPP) {
		// Nothing to hold on this file system; do not try again.
		unix.Close(r.fd)
		r.fd = -1
	}
	r.err = err
	if err == nil {
		r.size = st.Size
	}
}

func (r *reserve) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fd >= 0 {
		unix.Close(r.fd)
		r.fd = -1
	}
}

// Reserved reports whether the store's reserve is held: nil when it is,
// else why not (ENOSPC on a full file system, EOPNOTSUPP where fallocate
// is not supported). A read-only store has none and reports nil.
func (db *DB) Reserved() error {
	if db.reserve == nil {
		return nil
	}
	db.reserve.mu.Lock()
	defer db.reserve.mu.Unlock()
	return db.reserve.err
}
