package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"lazaret.dev/pkg/fsroot"
	"lazaret.dev/pkg/sys"
)

// noCopy makes `go vet` (copylocks) report copies of the structs that
// embed it: they own descriptors and must be moved, never duplicated.
type noCopy struct{}

func (*noCopy) Lock()   {}
func (*noCopy) Unlock() {}

// Identity is the device, inode and mount ID of a filesystem object.
type Identity struct {
	Device  uint64
	Inode   uint64
	MountID uint64
}

// Errors about volume sources and executables; test with errors.Is.
var (
	ErrSymlink      = errors.New("path crosses a symbolic link")
	ErrMountCross   = errors.New("path crosses a mount point")
	ErrSpecialFile  = errors.New("object is a socket, FIFO, device or other special file")
	ErrWrongKind    = errors.New("object has the wrong type")
	ErrMissing      = errors.New("object does not exist")
	ErrNoMountID    = errors.New("kernel does not report mount IDs through statx (Linux 5.8 or later is required)")
	ErrPlanClosed   = errors.New("confined path plan is closed")
	ErrIdentity     = errors.New("object identity changed since the configuration was resolved")
	ErrNotRegular   = errors.New("executable is not a regular file")
	ErrHardLinks    = errors.New("executable does not have exactly one hard link")
	ErrOwner        = errors.New("executable is owned neither by root nor by the invoking user")
	ErrWritable     = errors.New("executable is writable by its group or by others")
	ErrNotExecuting = errors.New("executable is not executable by the invoking user")
)

const statxMask = unix.STATX_TYPE | unix.STATX_MODE | unix.STATX_NLINK | unix.STATX_UID | unix.STATX_INO | unix.STATX_MNT_ID

// statFd returns the statx data of fd itself, including its mount ID.
func statFd(fd int) (unix.Statx_t, error) {
	var st unix.Statx_t
	if err := sys.Statx(fd, "", unix.AT_EMPTY_PATH|unix.AT_SYMLINK_NOFOLLOW, statxMask, &st); err != nil {
		return st, err
	}
	if st.Mask&unix.STATX_MNT_ID == 0 {
		return st, ErrNoMountID
	}
	return st, nil
}

func identityOf(st *unix.Statx_t) Identity {
	return Identity{Device: unix.Mkdev(st.Dev_major, st.Dev_minor), Inode: st.Ino, MountID: st.Mnt_id}
}

func typeName(mode uint16) string {
	switch uint32(mode) & unix.S_IFMT {
	case unix.S_IFREG:
		return "regular file"
	case unix.S_IFDIR:
		return "directory"
	case unix.S_IFLNK:
		return "symbolic link"
	case unix.S_IFSOCK:
		return "socket"
	case unix.S_IFIFO:
		return "FIFO"
	case unix.S_IFCHR:
		return "character device"
	case unix.S_IFBLK:
		return "block device"
	}
	return "special file"
}

// checkKind returns nil when mode is the type kind asks for.
func checkKind(mode uint16, kind VolumeKind) error {
	t := uint32(mode) & unix.S_IFMT
	switch {
	case t == unix.S_IFREG && kind == KindFile, t == unix.S_IFDIR && kind == KindDirectory:
		return nil
	case t == unix.S_IFREG || t == unix.S_IFDIR:
		return fmt.Errorf("found a %s where the volume declares kind %q: %w", typeName(mode), kind, ErrWrongKind)
	}
	return fmt.Errorf("found a %s: %w", typeName(mode), ErrSpecialFile)
}

// ConfinedPathPlan is a volume source reached through a retained O_PATH
// descriptor of an existing ancestor directory and a relative suffix. The
// ancestor is the source's parent directory, or, for a create=true source
// that does not exist yet, its deepest existing ancestor. Consumers reopen
// the source with Reopen; the absolute label is for diagnostics and the
// fingerprint only.
type ConfinedPathPlan struct {
	_          noCopy
	ancestor   *os.File
	ancestorID Identity
	suffix     string
	label      string
	kind       VolumeKind
	pending    bool
	sourceID   Identity
}

// AncestorIdentity is the device, inode and mount ID of the retained
// ancestor directory.
func (p *ConfinedPathPlan) AncestorIdentity() Identity { return p.ancestorID }

// Suffix is the normalized relative path from the ancestor to the source.
func (p *ConfinedPathPlan) Suffix() string { return p.suffix }

// Label is the canonical absolute host path of the source.
func (p *ConfinedPathPlan) Label() string { return p.label }

// Kind is the declared source type.
func (p *ConfinedPathPlan) Kind() VolumeKind { return p.kind }

// Pending reports whether the source is a create=true directory that did
// not exist at resolution; it has not been created.
func (p *ConfinedPathPlan) Pending() bool { return p.pending }

// SourceIdentity is the identity of the source as found at resolution; ok
// is false for a pending source.
func (p *ConfinedPathPlan) SourceIdentity() (id Identity, ok bool) {
	return p.sourceID, !p.pending
}

// Reopen opens the source again beneath the retained ancestor as an O_PATH
// descriptor, through no symbolic link and across no mount, and checks that
// the ancestor and (unless the plan was pending) the source are the objects
// seen at resolution and that the source still has its declared type. The
// caller owns the returned file.
func (p *ConfinedPathPlan) Reopen() (*os.File, error) {
	if p.ancestor == nil {
		return nil, ErrPlanClosed
	}
	ast, err := statFd(int(p.ancestor.Fd()))
	if err != nil {
		return nil, fmt.Errorf("checking ancestor of %q: %w", p.label, err)
	}
	if identityOf(&ast) != p.ancestorID {
		return nil, fmt.Errorf("ancestor of %q: %w", p.label, ErrIdentity)
	}
	fd, err := fsroot.OpenBeneath(int(p.ancestor.Fd()), p.suffix, unix.O_PATH|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, fmt.Errorf("reopening %q: %w", p.label, classifyOpen(err))
	}
	f := os.NewFile(uintptr(fd), p.label)
	st, err := statFd(fd)
	if err == nil {
		err = checkKind(st.Mode, p.kind)
	}
	if err == nil && !p.pending && identityOf(&st) != p.sourceID {
		err = ErrIdentity
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("reopening %q: %w", p.label, err)
	}
	return f, nil
}

// Close releases the retained ancestor descriptor. It is safe to call more
// than once.
func (p *ConfinedPathPlan) Close() error {
	if p.ancestor == nil {
		return nil
	}
	err := p.ancestor.Close()
	p.ancestor = nil
	return err
}

// classifyOpen adds a sentinel to the usual openat2 failures.
func classifyOpen(err error) error {
	switch {
	case errors.Is(err, unix.ELOOP):
		return fmt.Errorf("%w: %w", ErrSymlink, err)
	case errors.Is(err, unix.EXDEV):
		return fmt.Errorf("%w: %w", ErrMountCross, err)
	case errors.Is(err, unix.ENOENT):
		return fmt.Errorf("%w: %w", ErrMissing, err)
	}
	return err
}

// openDir opens the absolute directory path as O_PATH through no symbolic
// or magic link.
func openDir(path string) (*os.File, error) {
	fd, err := fsroot.OpenNoLinks(unix.AT_FDCWD, path, unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, classifyOpen(err)
	}
	return os.NewFile(uintptr(fd), path), nil
}

// planSource resolves the canonical absolute path label into a plan. With
// mayCreate a missing directory source yields a pending plan anchored at
// its deepest existing ancestor; nothing is created.
func planSource(label string, kind VolumeKind, mayCreate bool) (*ConfinedPathPlan, error) {
	parent, base := filepath.Dir(label), filepath.Base(label)
	anc, err := openDir(parent)
	suffix := base
	if err != nil {
		if !errors.Is(err, ErrMissing) || !mayCreate {
			return nil, err
		}
		// Walk up to the deepest existing ancestor.
		cur := parent
		for {
			next := filepath.Dir(cur)
			suffix = filepath.Base(cur) + "/" + suffix
			cur = next
			anc, err = openDir(cur)
			if err == nil {
				break
			}
			if !errors.Is(err, ErrMissing) || cur == "/" {
				return nil, err
			}
		}
	}
	plan := &ConfinedPathPlan{ancestor: anc, suffix: suffix, label: label, kind: kind}
	ast, err := statFd(int(anc.Fd()))
	if err != nil {
		plan.Close()
		return nil, err
	}
	plan.ancestorID = identityOf(&ast)
	if strings.Contains(suffix, "/") {
		// Only a create=true walk leaves more than one component, and
		// then the first of them is known to be missing.
		plan.pending = true
		return plan, nil
	}
	fd, err := fsroot.OpenBeneath(int(anc.Fd()), suffix, unix.O_PATH|unix.O_NOFOLLOW, 0)
	if err != nil {
		err = classifyOpen(err)
		if errors.Is(err, ErrMissing) && mayCreate {
			plan.pending = true
			return plan, nil
		}
		plan.Close()
		return nil, err
	}
	defer unix.Close(fd)
	st, err := statFd(fd)
	if err == nil {
		err = checkKind(st.Mode, kind)
	}
	if err == nil && st.Mnt_id != ast.Mnt_id {
		err = ErrMountCross
	}
	if err != nil {
		plan.Close()
		return nil, err
	}
	plan.sourceID = identityOf(&st)
	return plan, nil
}

// CheckExecutable applies the object rules of an auto-approval executable
// to the canonical path: reached through no symbolic link, a regular file
// with exactly one hard link, owned by root or uid, not writable by group
// or others, and executable by the calling process. Lazaret runs it at load
// and again before every execution.
func CheckExecutable(canonical string, uid int) error {
	fd, err := fsroot.OpenPath(unix.AT_FDCWD, canonical)
	if err != nil {
		return fmt.Errorf("opening executable %q: %w", canonical, classifyOpen(err))
	}
	defer unix.Close(fd)
	st, err := statFd(fd)
	if err != nil {
		return fmt.Errorf("inspecting executable %q: %w", canonical, err)
	}
	switch {
	case uint32(st.Mode)&unix.S_IFMT != unix.S_IFREG:
		return fmt.Errorf("executable %q is a %s: %w", canonical, typeName(st.Mode), ErrNotRegular)
	case st.Nlink != 1:
		return fmt.Errorf("executable %q has %d hard links: %w", canonical, st.Nlink, ErrHardLinks)
	case st.Uid != 0 && int(st.Uid) != uid:
		return fmt.Errorf("executable %q is owned by uid %d: %w", canonical, st.Uid, ErrOwner)
	case st.Mode&0o022 != 0:
		return fmt.Errorf("executable %q has mode %04o: %w", canonical, st.Mode&0o7777, ErrWritable)
	}
	if err := sys.Faccessat2(fd, "", unix.X_OK, unix.AT_EMPTY_PATH|unix.AT_EACCESS); err != nil {
		return fmt.Errorf("executable %q: %w: %w", canonical, ErrNotExecuting, err)
	}
	return nil
}
