package audit

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"lazaret.dev/pkg/sys"
)

// Reserve is how many bytes past the end of the log the Writer keeps
// allocated, and how much free space its file system must have, before
// a request is admitted. 4 MiB hold every record of four requests whose
// argv has the largest size a mailbox record allows (eight lines of at
// most 98,304 bytes of argv each, JSON-escaped), and of thousands of
// ordinary ones.
const Reserve = 4 << 20

// RefusingName is the file in a Domain's runtime directory that the
// coordinator keeps while its audit log refuses escalation requests; it
// holds the reason, one line, for status.
const RefusingName = "audit-refusing"

// ErrNoSpace: the log's file system has too little free space, or the
// reserve past its end could not be allocated, so the records of a new
// request could not all be made durable.
var ErrNoSpace = errors.New("no space to make the audit records of a request durable")

// Admit is called before a request is admitted. It reports why the
// records of one more request might not all become durable: a Writer
// that is closed or stopped after a failed write, a reserve of Reserve
// bytes past the end of the file that cannot be allocated
// (fallocate(2) FALLOC_FL_KEEP_SIZE, so the file's size is unchanged and
// the appends of admitted requests land in blocks already allocated even
// when the file system fills afterwards), or less than Reserve bytes free
// for unprivileged users on the file system (ErrNoSpace). On file systems
// without fallocate only the free space is checked.
func (w *Writer) Admit() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.fd < 0:
		return fmt.Errorf("audit log %q: %w", w.path, ErrClosed)
	case w.failed != nil:
		return fmt.Errorf("audit log %q: %w: %w", w.path, ErrWriterFailed, w.failed)
	}
	if err := w.allocate(); err != nil {
		return err
	}
	return checkFree(w.path, func(s *unix.Statfs_t) error { return unix.Fstatfs(w.fd, s) })
}

// allocate keeps Reserve bytes allocated past the end of the file. Open
// calls it too, so that the reserve exists before the first request even
// when the file system fills before it arrives.
func (w *Writer) allocate() error {
	var st unix.Stat_t
	if err := unix.Fstat(w.fd, &st); err != nil {
		return fmt.Errorf("audit log %q: %w", w.path, &os.PathError{Op: "fstat", Path: w.path, Err: err})
	}
	err := sys.Fallocate(w.fd, unix.FALLOC_FL_KEEP_SIZE, st.Size, Reserve)
	switch {
	case err == nil, errors.Is(err, unix.EOPNOTSUPP):
		return nil
	case errors.Is(err, unix.ENOSPC), errors.Is(err, unix.EDQUOT):
		return fmt.Errorf("audit log %q: %w: allocating %d bytes past its end: %w", w.path, ErrNoSpace, Reserve, err)
	default:
		return fmt.Errorf("audit log %q: allocating its reserve: %w", w.path, err)
	}
}

// CheckSpace reports, for status and doctor, whether the file system that
// holds (or would hold) the audit log at path has the free space Admit
// requires: ErrNoSpace when it has not. path need not exist; its
// directory must.
func CheckSpace(path string) error {
	return checkFree(path, func(s *unix.Statfs_t) error {
		err := unix.Statfs(path, s)
		if errors.Is(err, unix.ENOENT) {
			err = unix.Statfs(filepath.Dir(path), s)
		}
		return err
	})
}

func checkFree(path string, statfs func(*unix.Statfs_t) error) error {
	var s unix.Statfs_t
	if err := statfs(&s); err != nil {
		return fmt.Errorf("audit log %q: %w", path, &os.PathError{Op: "statfs", Path: path, Err: err})
	}
	if free := s.Bavail * uint64(s.Bsize); free < Reserve {
		return fmt.Errorf("audit log %q: %w: %d bytes free on its file system, a request needs %d", path, ErrNoSpace, free, Reserve)
	}
	return nil
}
