package audit

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"golang.org/x/sys/unix"

	"lazaret.dev/pkg/ids"
	"lazaret.dev/pkg/sys"
)

// Writer appends records to one audit log file. It is safe for concurrent
// use; records are written in the order their Append calls take the lock.
type Writer struct {
	path string

	mu     sync.Mutex
	fd     int        // -1 after Close
	prev   ids.Digest // SHA-256 of the last line
	failed error      // the write or fsync failure that stopped the Writer
}

// Open opens the audit log at path for appending, creating it (mode 0600)
// when it does not exist; its directory must exist. It refuses a path
// that is not a regular file owned by the effective user, a file writable
// by group or others, a file another Writer holds (ErrInUse), and a file
// whose existing chain does not verify (a *LineError naming the line).
// The file is never rewritten or truncated.
func Open(path string) (*Writer, error) {
	path = filepath.Clean(path)
	fd, st, err := openFile(path, unix.O_WRONLY|unix.O_APPEND|unix.O_CREAT, 0o600, true)
	if err != nil {
		return nil, fmt.Errorf("opening the audit log: %w", err)
	}
	w := &Writer{path: path, fd: fd}
	if err := w.open(&st); err != nil {
		unix.Close(fd)
		return nil, err
	}
	// Best effort: without the reserve, Admit refuses requests and says
	// why.
	w.allocate()
	return w, nil
}

func (w *Writer) open(st *unix.Stat_t) error {
	if err := lock(w.fd, unix.F_WRLCK, slotOffset, 1, 0); err != nil {
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EACCES) {
			return fmt.Errorf("%w: %q", ErrInUse, w.path)
		}
		return fmt.Errorf("locking %q: %w", w.path, err)
	}
	// Read the chain through a second description of the same file: the
	// write descriptor is O_WRONLY.
	rfd, rst, err := openFile(w.path, unix.O_RDONLY, 0, true)
	if err != nil {
		return fmt.Errorf("opening the audit log for reading: %w", err)
	}
	defer unix.Close(rfd)
	if rst.Dev != st.Dev || rst.Ino != st.Ino {
		return fmt.Errorf("%w: %q was replaced while it was being opened", ErrUnsafeFile, w.path)
	}
	data, err := readAll(rfd, w.path, rst.Size)
	if err != nil {
		return err
	}
	if _, w.prev, err = parse(w.path, data); err != nil {
		return fmt.Errorf("verifying the audit log before appending: %w; the file was left unchanged: "+
			"keep it as evidence and move it aside, and a new log starts", err)
	}
	if len(data) == 0 {
		// Possibly just created: make its directory entry durable.
		return syncDir(filepath.Dir(w.path))
	}
	return nil
}

func syncDir(dir string) error {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return &os.PathError{Op: "open", Path: dir, Err: err}
	}
	defer unix.Close(fd)
	if err := unix.Fsync(fd); err != nil {
		return &os.PathError{Op: "fsync", Path: dir, Err: err}
	}
	return nil
}

// Path is the file's path.
func (w *Writer) Path() string { return w.path }

// Append sets r.Prev to the chain's last value and writes r as one line
// with a single write(2), then fsyncs the file. A record that breaks a
// field rule is refused (ErrInvalidRecord) and nothing is written. A
// failed or short write, or a failed fsync, stops the Writer: every later
// Append returns ErrWriterFailed, because the file may now end in a
// partial line.
func (w *Writer) Append(r Record) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.fd < 0:
		return fmt.Errorf("audit log %q: %w", w.path, ErrClosed)
	case w.failed != nil:
		return fmt.Errorf("audit log %q: %w: %w", w.path, ErrWriterFailed, w.failed)
	}
	r.Prev = w.prev
	b, err := r.encode()
	if err != nil {
		return fmt.Errorf("audit log %q: %w: %w", w.path, ErrInvalidRecord, err)
	}
	if len(b) > MaxLineBytes {
		return fmt.Errorf("audit log %q: %w: the line would have %d bytes, the limit is %d", w.path, ErrInvalidRecord, len(b), MaxLineBytes)
	}
	next := hash(b)
	b = append(b, '\n')
	if err := lock(w.fd, unix.F_WRLCK, 0, slotOffset, lockWait); err != nil {
		return fmt.Errorf("%w: write lock on %q not obtained within %v: %w", ErrLocked, w.path, lockWait, err)
	}
	defer lock(w.fd, unix.F_UNLCK, 0, slotOffset, 0)
	n, err := sys.Write(w.fd, b)
	switch {
	case err != nil:
		w.failed = err
	case n != len(b):
		w.failed = fmt.Errorf("write %s: short write of %d of %d bytes", w.path, n, len(b))
	default:
		if err := unix.Fsync(w.fd); err != nil {
			w.failed = &os.PathError{Op: "fsync", Path: w.path, Err: err}
		}
	}
	if w.failed != nil {
		return fmt.Errorf("audit log %q: %w", w.path, w.failed)
	}
	w.prev = next
	return nil
}

// Close releases the file and its locks. Later Appends return ErrClosed;
// a second Close does nothing.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fd < 0 {
		return nil
	}
	err := unix.Close(w.fd)
	w.fd = -1
	if err != nil {
		return &os.PathError{Op: "close", Path: w.path, Err: err}
	}
	return nil
}
