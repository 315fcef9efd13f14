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

// fsync is unix.Fsync; tests count and fail it.
var fsync = unix.Fsync

// Writer appends records to one audit log file. It is safe for concurrent
// use; records are written in the order their Write or Append calls take
// the lock.
//
// A record is written with one write(2) as soon as it is given, so that
// it survives the death of the writing process, and becomes durable with
// the next fsync(2): Append syncs at once, Write leaves the sync to the
// next Commit (or Append, or Close), which covers every record written
// before it. The escalation engine says which transitions must be durable
// before it acts on them (escalation.Event.Durable), so a request costs
// one fsync per durable point rather than one per record.
type Writer struct {
	path string

	// syncMu serialises fsyncs, without holding mu, so that records can
	// be written while an earlier commit waits for the disk.
	syncMu sync.Mutex

	mu      sync.Mutex
	fd      int        // -1 after Close
	prev    ids.Digest // SHA-256 of the last line
	failed  error      // the write or fsync failure that stopped the Writer
	written uint64     // records written
	synced  uint64     // records known durable: written before the last fsync
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

// Append writes r as Write does and then makes it, and every record
// written before it, durable as Commit does.
func (w *Writer) Append(r Record) error {
	if err := w.Write(r); err != nil {
		return err
	}
	return w.Commit()
}

// Write sets r.Prev to the chain's last value and writes r as one line
// with a single write(2), without waiting for it to reach the disk: the
// next Commit makes it durable. A record that breaks a field rule is
// refused (ErrInvalidRecord) and nothing is written. A failed or short
// write stops the Writer: every later Write, Append and Commit returns
// ErrWriterFailed, because the file may now end in a partial line.
func (w *Writer) Write(r Record) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.usable(); err != nil {
		return err
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
	}
	if w.failed != nil {
		return fmt.Errorf("audit log %q: %w", w.path, w.failed)
	}
	w.prev = next
	w.written++
	return nil
}

// usable reports why the Writer takes no more records; w.mu is held.
func (w *Writer) usable() error {
	switch {
	case w.fd < 0:
		return fmt.Errorf("audit log %q: %w", w.path, ErrClosed)
	case w.failed != nil:
		return fmt.Errorf("audit log %q: %w: %w", w.path, ErrWriterFailed, w.failed)
	}
	return nil
}

// Commit makes every record written so far durable with one fsync(2),
// or none when an earlier Commit already covered them (a commit of
// another request that ran meanwhile counts). A failed fsync stops the
// Writer, as a failed write does.
func (w *Writer) Commit() error {
	w.mu.Lock()
	if err := w.usable(); err != nil {
		w.mu.Unlock()
		return err
	}
	target := w.written
	w.mu.Unlock()
	w.syncMu.Lock()
	defer w.syncMu.Unlock()
	w.mu.Lock()
	if err := w.usable(); err != nil {
		w.mu.Unlock()
		return err
	}
	if w.synced >= target {
		w.mu.Unlock()
		return nil
	}
	// Everything written up to here is covered by the fsync below.
	fd, upto := w.fd, w.written
	w.mu.Unlock()
	err := fsync(fd)
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		if w.failed == nil {
			w.failed = &os.PathError{Op: "fsync", Path: w.path, Err: err}
		}
		return fmt.Errorf("audit log %q: %w", w.path, w.failed)
	}
	w.synced = upto
	return nil
}

// Close makes the records written since the last Commit durable and
// releases the file and its locks. Later Writes, Appends and Commits
// return ErrClosed; a second Close does nothing.
func (w *Writer) Close() error {
	cerr := w.Commit()
	if errors.Is(cerr, ErrClosed) || errors.Is(cerr, ErrWriterFailed) {
		cerr = nil // nothing more to make durable
	}
	w.syncMu.Lock()
	defer w.syncMu.Unlock()
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
	return cerr
}
