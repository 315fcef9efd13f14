package mailbox

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"lazaret.dev/pkg/fsroot"
	"lazaret.dev/pkg/protocol"
	"lazaret.dev/pkg/sys"
)

// MaxFileBytes bounds a mailbox file: the largest SignedProtocolRecord, a
// one-byte variant, a three-byte length of MaxSignedPayloadBytes, the
// payload and a 64-byte signature.
const MaxFileBytes = 1 + 3 + protocol.MaxSignedPayloadBytes + 64

// StaleTemp is how old a temporary file must be before a host sweep
// removes it as abandoned by a writer that died.
const StaleTemp = time.Minute

// Subdirectory names below the mailbox root.
const (
	OutboxDir = "outbox"
	InboxDir  = "inbox"
)

// SandboxPath is where the mailbox root appears inside the sandbox.
const SandboxPath = "/run/lazaret/mailbox"

// Create makes root and its outbox and inbox subdirectories with perm,
// refusing a root reached through a symbolic link. Existing directories
// are kept.
func Create(root string, perm os.FileMode) error {
	if err := os.Mkdir(root, perm); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("creating mailbox %q: %w", root, err)
	}
	fd, err := openDirFd(unix.AT_FDCWD, root)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	for _, sub := range []string{OutboxDir, InboxDir} {
		if err := unix.Mkdirat(fd, sub, uint32(perm.Perm())); err != nil && err != unix.EEXIST {
			return fmt.Errorf("creating mailbox directory %q: %w", filepath.Join(root, sub), err)
		}
		sfd, err := openDirFd(fd, sub)
		if err != nil {
			return err
		}
		unix.Close(sfd)
	}
	return nil
}

// openDirFd opens a directory without following a symbolic link anywhere
// in path (openat2 RESOLVE_NO_SYMLINKS), falling back to O_NOFOLLOW on the
// last component where openat2 is missing (kernels before 5.6, and
// sandboxes that do not implement it).
func openDirFd(dirfd int, path string) (int, error) {
	const flags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW
	fd, err := fsroot.OpenNoLinks(dirfd, path, flags, 0)
	if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM) {
		fd, err = sys.Openat(dirfd, path, flags|unix.O_CLOEXEC, 0)
	}
	switch {
	case err == nil:
		return fd, nil
	case errors.Is(err, unix.ELOOP), errors.Is(err, unix.ENOTDIR):
		return -1, fmt.Errorf("opening mailbox directory: %w: %w", ErrNotRegular, err)
	}
	return -1, fmt.Errorf("opening mailbox directory: %w", err)
}

// Dir is one mailbox direction, held open by a retained directory
// descriptor; every entry is resolved relative to it.
type Dir struct {
	fd   int
	path string
	dir  Direction
	log  *slog.Logger
	// stuck are entries that could not be removed and were reported;
	// only the directory's single reader uses it.
	stuck map[stuckKey]bool
}

// OpenDir opens the outbox or inbox below root. log receives the reasons
// for discarded files; nil discards them.
func OpenDir(root string, d Direction, log *slog.Logger) (*Dir, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	sub := OutboxDir
	if d == Inbox {
		sub = InboxDir
	}
	path := filepath.Join(root, sub)
	fd, err := openDirFd(unix.AT_FDCWD, path)
	if err != nil {
		return nil, err
	}
	return &Dir{fd: fd, path: path, dir: d, log: log.With("mailbox", d.String())}, nil
}

// Close releases the directory descriptor.
func (d *Dir) Close() error {
	if d.fd < 0 {
		return nil
	}
	err := unix.Close(d.fd)
	d.fd = -1
	return err
}

// Path is the directory's path, for messages.
func (d *Dir) Path() string { return d.path }

// Direction is the direction the directory carries.
func (d *Dir) Direction() Direction { return d.dir }

// Fd is the retained directory descriptor; it stays owned by d.
func (d *Dir) Fd() int { return d.fd }

// Write signs nothing: it encodes rec and writes it under n. The record's
// variant must match the name's kind and the kind must belong in d.
func (d *Dir) Write(n Name, rec *protocol.SignedProtocolRecord) error {
	if !d.dir.Accepts(n.Kind) {
		return fmt.Errorf("writing %q: %w: %s files do not belong in the %s", n, ErrName, n.Kind, d.dir)
	}
	if rec.Kind != n.Kind.RecordKind() {
		return fmt.Errorf("writing %q: %w: record is %v", n, ErrRecord, rec.Kind)
	}
	b, err := protocol.Encode(rec)
	if err != nil {
		return fmt.Errorf("encoding %q: %w", n, err)
	}
	return d.WriteBytes(n.String(), b)
}

// WriteBytes writes b under name through a temporary file and a rename that
// never replaces an existing file (ErrExists).
func (d *Dir) WriteBytes(name string, b []byte) error {
	if len(b) > MaxFileBytes {
		return fmt.Errorf("writing %q: %w: %d bytes, the limit is %d", name, ErrTooLarge, len(b), MaxFileBytes)
	}
	if err := d.room(len(b)); err != nil {
		return fmt.Errorf("writing %q: %w", filepath.Join(d.path, name), err)
	}
	var r [8]byte
	rand.Read(r[:])
	tmp := TempPrefix + name + "." + hex.EncodeToString(r[:])
	fd, err := sys.Openat(d.fd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return fmt.Errorf("creating %q: %w", filepath.Join(d.path, tmp), err)
	}
	f := os.NewFile(uintptr(fd), filepath.Join(d.path, tmp))
	_, werr := f.Write(b)
	cerr := f.Close()
	if werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = d.publish(tmp, name)
	}
	if werr != nil {
		unix.Unlinkat(d.fd, tmp, 0)
		return fmt.Errorf("writing %q: %w", filepath.Join(d.path, name), werr)
	}
	return nil
}

// publish moves tmp to name without replacing an existing file: renameat2
// RENAME_NOREPLACE, or link and unlink where the file system or sandbox
// does not offer that flag.
//
// Under gVisor a rename or link carried out on the host reports ENOENT
// when the reader took the new name before the sandbox looked it up
// again. So ENOENT from the rename with the temporary name gone, or from
// the link with the temporary name still there, means the file was
// published: in a directory that still exists no other cause of ENOENT
// leaves the temporary name in that state.
func (d *Dir) publish(tmp, name string) error {
	err := unix.Renameat2(d.fd, tmp, d.fd, name, unix.RENAME_NOREPLACE)
	switch {
	case err == unix.EINVAL || err == unix.ENOSYS:
		err = unix.Linkat(d.fd, tmp, d.fd, name, 0)
		if err == unix.ENOENT && d.exists(tmp) {
			err = nil
		}
		if err == nil {
			unix.Unlinkat(d.fd, tmp, 0)
		}
	case err == unix.ENOENT && !d.exists(tmp):
		err = nil
	}
	if err == unix.EEXIST {
		return ErrExists
	}
	return err
}

// exists reports whether name is present in the directory.
func (d *Dir) exists(name string) bool {
	var st unix.Stat_t
	return unix.Fstatat(d.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil
}

// Entry is one file taken from a directory: its name, its raw bytes, and
// the undecoded envelope. Record.PayloadBytes has not been decoded and its
// signature has not been checked.
type Entry struct {
	Name   Name
	Raw    []byte
	Record protocol.SignedProtocolRecord
}

// ParseRecord decodes the envelope of a mailbox file: exactly one minimal
// SignedProtocolRecord, payload within bounds, variant equal to the kind
// the name announces. It does not decode the payload.
func ParseRecord(n Name, raw []byte) (protocol.SignedProtocolRecord, error) {
	var rec protocol.SignedProtocolRecord
	if len(raw) > MaxFileBytes {
		return rec, fmt.Errorf("%w: %d bytes, the limit is %d", ErrTooLarge, len(raw), MaxFileBytes)
	}
	if err := protocol.Decode(raw, &rec); err != nil {
		return rec, fmt.Errorf("%w: %w", ErrRecord, err)
	}
	if want := n.Kind.RecordKind(); rec.Kind != want {
		return rec, fmt.Errorf("%w: file named %s holds a %v record", ErrRecord, n.Kind, rec.Kind)
	}
	return rec, nil
}

// Read reads the file n without removing it: opened with O_NOFOLLOW
// relative to the directory descriptor, a regular file, at most
// MaxFileBytes, envelope parsed by ParseRecord.
func (d *Dir) Read(n Name) (Entry, error) {
	raw, err := d.readFile(n.String())
	if err != nil {
		return Entry{}, err
	}
	rec, err := ParseRecord(n, raw)
	if err != nil {
		return Entry{}, fmt.Errorf("reading %q: %w", filepath.Join(d.path, n.String()), err)
	}
	return Entry{Name: n, Raw: raw, Record: rec}, nil
}

// Take reads n and removes it. An entry that exists but cannot be parsed
// (a directory or another special file included) is removed too and the
// error returned.
func (d *Dir) Take(n Name) (Entry, error) {
	e, err := d.Read(n)
	if err != nil && errors.Is(err, ErrMissing) {
		return Entry{}, err
	}
	if err != nil {
		d.remove(n.String())
		return Entry{}, err
	}
	if rerr := d.Remove(n.String()); rerr != nil {
		return e, rerr
	}
	return e, nil
}

// Remove deletes the named entry; a missing entry is not an error.
func (d *Dir) Remove(name string) error {
	if err := unix.Unlinkat(d.fd, name, 0); err != nil && err != unix.ENOENT {
		return fmt.Errorf("removing %q: %w", filepath.Join(d.path, name), err)
	}
	return nil
}

func (d *Dir) readFile(name string) ([]byte, error) {
	path := filepath.Join(d.path, name)
	fd, err := sys.Openat(d.fd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	switch {
	case errors.Is(err, unix.ENOENT):
		return nil, fmt.Errorf("reading %q: %w", path, ErrMissing)
	case errors.Is(err, unix.ELOOP):
		return nil, fmt.Errorf("reading %q: %w: a symbolic link", path, ErrNotRegular)
	case err != nil:
		return nil, fmt.Errorf("reading %q: %w", path, err)
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("inspecting %q: %w", path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, fmt.Errorf("reading %q: %w: mode %o", path, ErrNotRegular, st.Mode&unix.S_IFMT)
	}
	if st.Size > MaxFileBytes {
		return nil, fmt.Errorf("reading %q: %w: %d bytes, the limit is %d", path, ErrTooLarge, st.Size, MaxFileBytes)
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading %q: %w", path, err)
	}
	if len(b) > MaxFileBytes {
		return nil, fmt.Errorf("reading %q: %w: grew beyond %d bytes", path, ErrTooLarge, MaxFileBytes)
	}
	return b, nil
}

// Rejected is a directory entry that is not a mailbox file for d.
type Rejected struct {
	FileName string
	Err      error
}

// List returns the mailbox names in d, sorted by request, kind and
// sequence, and the entries that are not valid names for d. Temporary
// names are in neither list.
func (d *Dir) List() ([]Name, []Rejected, error) {
	names, err := d.readNames()
	if err != nil {
		return nil, nil, err
	}
	var out []Name
	var bad []Rejected
	for _, s := range names {
		if strings.HasPrefix(s, TempPrefix) {
			continue
		}
		n, err := ParseName(s)
		if err == nil && !d.dir.Accepts(n.Kind) {
			err = &NameError{Name: s, Reason: fmt.Sprintf("%s files do not belong in the %s", n.Kind, d.dir)}
		}
		if err != nil {
			bad = append(bad, Rejected{FileName: s, Err: err})
			continue
		}
		out = append(out, n)
	}
	slices.SortFunc(out, func(a, b Name) int {
		switch {
		case less(a, b):
			return -1
		case less(b, a):
			return 1
		}
		return 0
	})
	return out, bad, nil
}

// readNames lists the directory through a fresh descriptor for ".", so
// the retained descriptor's offset is never shared.
func (d *Dir) readNames() ([]string, error) {
	fd, err := sys.Openat(d.fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("listing %q: %w", d.path, err)
	}
	f := os.NewFile(uintptr(fd), d.path)
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, fmt.Errorf("listing %q: %w", d.path, err)
	}
	return names, nil
}

// Discard removes an entry the reader will not process, whatever it is
// (a directory tree included), and logs why. An entry that cannot be
// removed is logged once.
func (d *Dir) Discard(fileName string, reason error) {
	var st unix.Stat_t
	unix.Fstatat(d.fd, fileName, &st, unix.AT_SYMLINK_NOFOLLOW)
	if d.stuck[stuckKey{fileName, st.Ino}] {
		return
	}
	d.log.Warn("discarding mailbox file", "file", fmt.Sprintf("%q", filepath.Join(d.path, fileName)), "reason", reason)
	d.remove(fileName)
}

// drainRank orders the kinds one drain hands on: acknowledgments first,
// then requests, then cancellations. A guest sends its final
// acknowledgment before it exits, and the next request of its session
// only after that, so a drain that finds both must deliver the first
// request's result before it receives the second (the model's
// DeliverResult before ReceiveEscalation), whatever the request IDs. A
// cancellation comes after the request it names.
var drainRank = map[Kind]int{KindAck: 0, KindRequest: 1, KindCancellation: 2}

// Drain takes every valid file in d and passes it to handle, kind by
// kind in drainRank's order and in List order within a kind; invalid
// names, unreadable files and bad envelopes are discarded with a logged
// reason, and temporary files older than StaleTemp are removed. Only the
// directory's single reader (the host for the outbox) calls it.
func (d *Dir) Drain(handle func(Entry)) error {
	names, bad, err := d.List()
	if err != nil {
		return err
	}
	for _, r := range bad {
		d.Discard(r.FileName, r.Err)
	}
	slices.SortStableFunc(names, func(a, b Name) int { return drainRank[a.Kind] - drainRank[b.Kind] })
	for _, n := range names {
		e, err := d.Take(n)
		if errors.Is(err, ErrMissing) {
			continue
		}
		if err != nil {
			// Take removed it, or reported once that it could not.
			d.Discard(n.String(), err)
			continue
		}
		handle(e)
	}
	d.sweepTemps(time.Now())
	return nil
}
