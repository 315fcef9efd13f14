package audit

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"lazaret.dev/pkg/ids"
	"lazaret.dev/pkg/sys"
)

// Lock layout: the Writer's lifetime lock on one byte at slotOffset, and
// the data range [0, slotOffset) locked around each append (write) and
// each read (read). The ranges do not overlap, so an open file
// description can hold both and release one without the other.
const slotOffset = math.MaxInt64 - 1

// lockWait bounds the wait for the data range, on both sides.
const lockWait = 2 * time.Second

// checkFile is the planner of the file rules: st is what fstat reported
// for path, euid the effective user. Writers require ownership; readers
// pass owner false.
func checkFile(path string, st *unix.Stat_t, euid int, owner bool) error {
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return fmt.Errorf("%w: %q is not a regular file (mode %#o)", ErrUnsafeFile, path, st.Mode)
	}
	if owner && st.Uid != uint32(euid) {
		return fmt.Errorf("%w: %q is owned by uid %d, not by this user (uid %d)", ErrUnsafeFile, path, st.Uid, euid)
	}
	if owner && st.Mode&0o022 != 0 {
		return fmt.Errorf("%w: %q is writable by group or others (mode %#o); run chmod go-w on it after checking its contents", ErrUnsafeFile, path, st.Mode&0o7777)
	}
	return nil
}

// openFile opens path with flags (O_CLOEXEC, O_NOFOLLOW, O_NONBLOCK and
// O_NOCTTY added), fstats it and applies checkFile; on success it takes
// ownership of the descriptor it returns.
func openFile(path string, flags int, perm uint32, owner bool) (int, unix.Stat_t, error) {
	var st unix.Stat_t
	fd, err := sys.Open(path, flags|unix.O_CLOEXEC|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY, perm)
	switch {
	case errors.Is(err, unix.ELOOP):
		return -1, st, fmt.Errorf("%w: %q is a symbolic link", ErrUnsafeFile, path)
	case errors.Is(err, unix.EISDIR):
		return -1, st, fmt.Errorf("%w: %q is a directory", ErrUnsafeFile, path)
	case errors.Is(err, unix.ENXIO):
		return -1, st, fmt.Errorf("%w: %q is a FIFO or device", ErrUnsafeFile, path)
	case err != nil:
		return -1, st, err
	}
	if err := sys.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, st, fmt.Errorf("%q: %w", path, err)
	}
	if err := checkFile(path, &st, os.Geteuid(), owner); err != nil {
		unix.Close(fd)
		return -1, st, err
	}
	return fd, st, nil
}

// lock takes an OFD lock of kind typ (F_RDLCK, F_WRLCK or F_UNLCK) on
// [start, start+n), retrying for at most wait while another description
// holds a conflicting one.
func lock(fd int, typ int16, start, n int64, wait time.Duration) error {
	fl := unix.Flock_t{Type: typ, Whence: io.SeekStart, Start: start, Len: n}
	deadline := time.Now().Add(wait)
	for delay := time.Millisecond; ; {
		err := sys.FcntlFlock(fd, unix.F_OFD_SETLK, &fl)
		switch {
		case err == nil:
			return nil
		case !errors.Is(err, unix.EAGAIN) && !errors.Is(err, unix.EACCES):
			return err
		case !time.Now().Before(deadline):
			return err
		}
		time.Sleep(delay)
		delay = min(2*delay, 50*time.Millisecond)
	}
}

// readAll reads fd from offset 0 to its end.
func readAll(fd int, path string, size int64) ([]byte, error) {
	buf := make([]byte, 0, max(size, 0)+1)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := sys.Pread(fd, buf[len(buf):cap(buf)], int64(len(buf)))
		switch {
		case err != nil:
			return nil, fmt.Errorf("%q: %w", path, err)
		case n == 0:
			return buf, nil
		}
		buf = buf[:len(buf)+n]
	}
}

// Read reads and verifies the audit log at path. It returns every record
// before the first bad line and, for a bad line, a *LineError naming it.
// A missing file is an error satisfying errors.Is(err, fs.ErrNotExist);
// an empty file has no records.
func Read(path string) ([]Record, error) {
	fd, st, err := openFile(path, unix.O_RDONLY, 0, false)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	if err := lock(fd, unix.F_RDLCK, 0, slotOffset, lockWait); err != nil {
		return nil, fmt.Errorf("%w: read lock on %q not obtained within %v: %w", ErrLocked, path, lockWait, err)
	}
	data, err := readAll(fd, path, st.Size)
	if err != nil {
		return nil, err
	}
	recs, _, err := parse(path, data)
	return recs, err
}

// parse verifies data line by line. It returns the records before the
// first bad line, the SHA-256 of the last good line (zero when there is
// none) and a *LineError for the bad line.
func parse(path string, data []byte) ([]Record, ids.Digest, error) {
	var recs []Record
	var prev ids.Digest
	for n := 1; len(data) > 0; n++ {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			return recs, prev, &LineError{Path: path, Line: n, Class: ErrTruncated,
				Detail: fmt.Sprintf("%d bytes without a newline at the end of the file (a write cut short, or an edit)", len(data))}
		}
		b := data[:i]
		data = data[i+1:]
		if len(b) > MaxLineBytes {
			return recs, prev, &LineError{Path: path, Line: n, Class: ErrInvalidRecord,
				Detail: fmt.Sprintf("%d bytes exceed the limit of %d", len(b), MaxLineBytes)}
		}
		if len(b) == 0 {
			return recs, prev, &LineError{Path: path, Line: n, Class: ErrInvalidRecord, Detail: "empty line"}
		}
		r, err := decode(b)
		if err != nil {
			return recs, prev, &LineError{Path: path, Line: n, Class: ErrInvalidRecord, Err: err}
		}
		if r.Prev != prev {
			what := "the first line's prev must be 64 zeros"
			if n > 1 {
				what = fmt.Sprintf("prev is %v, but the SHA-256 of line %d is %v: line %d was changed, "+
					"lines were removed or inserted between the two, or this line was changed", r.Prev, n-1, prev, n-1)
			}
			return recs, prev, &LineError{Path: path, Line: n, Class: ErrChainBroken, Detail: what}
		}
		recs = append(recs, r)
		prev = hash(b)
	}
	return recs, prev, nil
}
