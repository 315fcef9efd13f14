package mailbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"lazaret.dev/pkg/sys"
)

// Bounds of the outbox. The guest keeps at most a few files there at a
// time (a request, an acknowledgment per batch of chunks, a cancellation)
// and the host takes each within a rescan, so these are far above normal
// use and only stop a sandbox that fills the directory.
const (
	// MaxEntries bounds the entries (files, directories, anything) in the
	// outbox.
	MaxEntries = 256
	// MaxBytes bounds the bytes of the regular files in the outbox.
	MaxBytes = 64 * MaxFileBytes
)

// maxRemoveDepth bounds how deep the host descends into a directory the
// sandbox left in the outbox; each level holds one descriptor.
const maxRemoveDepth = 32

// ErrFull: writing would take the outbox past MaxEntries or MaxBytes.
var ErrFull = errors.New("mailbox outbox is full")

// usage counts the entries of d and the bytes of its regular files.
func (d *Dir) usage() (entries int, bytes int64, err error) {
	names, err := d.readNames()
	if err != nil {
		return 0, 0, err
	}
	for _, s := range names {
		var st unix.Stat_t
		if unix.Fstatat(d.fd, s, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
			continue // taken meanwhile
		}
		entries++
		if st.Mode&unix.S_IFMT == unix.S_IFREG {
			bytes += st.Size
		}
	}
	return entries, bytes, nil
}

// room reports ErrFull when one more file of n bytes would take the
// outbox past its bounds. The guest checks it before every write, so a
// full outbox is one clear error rather than a file the host removes.
func (d *Dir) room(n int) error {
	if d.dir != Outbox {
		return nil
	}
	entries, bytes, err := d.usage()
	if err != nil {
		return err
	}
	if entries+1 > MaxEntries || bytes+int64(n) > MaxBytes {
		return fmt.Errorf("%w: %q holds %d entries of %d bytes, the limit is %d entries and %d bytes; "+
			"remove what does not belong there, the host takes only mailbox files", ErrFull, d.path, entries, bytes, MaxEntries, MaxBytes)
	}
	return nil
}

// removeEntry removes name from the directory whatever it is: a file, a
// link, a special file, or a directory tree (descended relative to
// descriptors opened O_NOFOLLOW, at most maxRemoveDepth levels).
func removeEntry(dirfd int, name string, depth int) error {
	err := unix.Unlinkat(dirfd, name, 0)
	if err == nil || err == unix.ENOENT {
		return nil
	}
	if err != unix.EISDIR && err != unix.EPERM {
		return err
	}
	err = unix.Unlinkat(dirfd, name, unix.AT_REMOVEDIR)
	if err == nil || err == unix.ENOENT {
		return nil
	}
	if err != unix.ENOTEMPTY && err != unix.EEXIST {
		return err
	}
	if depth >= maxRemoveDepth {
		return fmt.Errorf("a directory tree deeper than %d levels", maxRemoveDepth)
	}
	fd, err := sys.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), name)
	names, rerr := f.Readdirnames(-1)
	for _, n := range names {
		if err := removeEntry(fd, n, depth+1); err != nil && rerr == nil {
			rerr = err
		}
	}
	f.Close()
	if rerr != nil {
		return rerr
	}
	if err := unix.Unlinkat(dirfd, name, unix.AT_REMOVEDIR); err != nil && err != unix.ENOENT {
		return err
	}
	return nil
}

// stuckKey identifies an entry the host could not remove, so that it is
// reported once, not on every rescan.
type stuckKey struct {
	name string
	ino  uint64
}

// maxStuck bounds the memory of entries reported once.
const maxStuck = 4 * MaxEntries

// remove removes an entry the reader will not process. The first failure
// for an entry is logged; later ones are not.
func (d *Dir) remove(fileName string) {
	err := removeEntry(d.fd, fileName, 0)
	if err == nil {
		return
	}
	var st unix.Stat_t
	unix.Fstatat(d.fd, fileName, &st, unix.AT_SYMLINK_NOFOLLOW)
	k := stuckKey{fileName, st.Ino}
	if d.stuck[k] {
		return
	}
	if d.stuck == nil || len(d.stuck) >= maxStuck {
		d.stuck = map[stuckKey]bool{}
	}
	d.stuck[k] = true
	d.log.Error("removing discarded mailbox entry", "file", fmt.Sprintf("%q", filepath.Join(d.path, fileName)), "err", err)
}

type temp struct {
	name  string
	size  int64
	mtime time.Time
}

// sweepTemps removes temporary files older than StaleTemp or larger than
// any mailbox file, then, when the outbox is still past its bounds,
// the newest temporary files until it is within them, with one line.
func (d *Dir) sweepTemps(now time.Time) {
	names, err := d.readNames()
	if err != nil {
		return
	}
	var temps []temp
	entries, bytes := 0, int64(0)
	for _, s := range names {
		var st unix.Stat_t
		if unix.Fstatat(d.fd, s, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
			continue
		}
		regular := st.Mode&unix.S_IFMT == unix.S_IFREG
		if !strings.HasPrefix(s, TempPrefix) {
			entries++
			if regular {
				bytes += st.Size
			}
			continue
		}
		switch mtime := time.Unix(st.Mtim.Unix()); {
		case now.Sub(mtime) > StaleTemp:
			d.Discard(s, errors.New("temporary file abandoned by its writer"))
		case !regular:
			d.Discard(s, fmt.Errorf("%w: a temporary name that is not a regular file", ErrNotRegular))
		case st.Size > MaxFileBytes:
			d.Discard(s, fmt.Errorf("%w: a temporary file of %d bytes, the limit is %d", ErrTooLarge, st.Size, MaxFileBytes))
		default:
			entries++
			bytes += st.Size
			temps = append(temps, temp{s, st.Size, mtime})
		}
	}
	if entries <= MaxEntries && bytes <= MaxBytes {
		return
	}
	// Newest first: a write in progress for long is the likelier to be
	// the guest's own.
	slices.SortFunc(temps, func(a, b temp) int { return b.mtime.Compare(a.mtime) })
	removed := 0
	for _, t := range temps {
		if entries <= MaxEntries && bytes <= MaxBytes {
			break
		}
		d.remove(t.name)
		entries--
		bytes -= t.size
		removed++
	}
	d.log.Warn("mailbox past its bounds: removed temporary files", "dir", fmt.Sprintf("%q", d.path),
		"removed", removed, "entries", entries, "bytes", bytes, "max_entries", MaxEntries, "max_bytes", MaxBytes)
}
