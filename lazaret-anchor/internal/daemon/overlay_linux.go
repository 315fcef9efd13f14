package daemon

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"lazaret.dev/pkg/anchor"
	"lazaret.dev/pkg/fsroot"
	"lazaret.dev/pkg/hostid"
)

// Steps named in Failure reports.
const (
	stepChannel   = "reading the control channel"
	stepNamespace = "checking the user namespace"
	stepPrivate   = "making mounts private"
	stepOpen      = "opening the %s directory"
	stepOverlay   = "creating the overlay"
	stepAttach    = "attaching the overlay"
	stepIdentity  = "reading identities"
	stepUnmount   = "unmounting the overlay"
	stepReexec    = "re-executing after the ID map"
)

// stepError is a failure at one step on one path.
type stepError struct {
	step, path string
	err        error
}

func (e *stepError) Error() string {
	if e.path == "" {
		return e.step + ": " + e.err.Error()
	}
	return fmt.Sprintf("%s %q: %v", e.step, e.path, e.err)
}

func (e *stepError) Unwrap() error { return e.err }

func fail(step, path string, err error) error { return &stepError{step: step, path: path, err: err} }

// errMismatch means a directory or mount is not the object it should be.
var errMismatch = errors.New("identity differs from the one checked")

// overlay is the mounted root filesystem. mnt is the descriptor fsmount
// returned: it refers to the overlay's mount and its root.
type overlay struct {
	merged string
	mnt    int
	id     hostid.MountIdentity
	log    *slog.Logger
}

// openChecked opens the directory of c and confirms its device and inode.
func openChecked(name string, c anchor.PathCheck) (int, error) {
	step := fmt.Sprintf(stepOpen, name)
	fd, err := fsroot.OpenDir(unix.AT_FDCWD, c.Path)
	if err != nil {
		return -1, fail(step, c.Path, os.NewSyscallError("openat2", err))
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, fail(step, c.Path, os.NewSyscallError("fstat", err))
	}
	if st.Dev != c.Device || st.Ino != c.Inode {
		unix.Close(fd)
		return -1, fail(step, c.Path, fmt.Errorf("device %d inode %d, want device %d inode %d: %w", st.Dev, st.Ino, c.Device, c.Inode, errMismatch))
	}
	return fd, nil
}

// makePrivate stops mount events propagating between the anchor's mount
// namespace and the host's, in both directions.
func makePrivate() error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fail(stepPrivate, "/", os.NewSyscallError("mount", err))
	}
	return nil
}

// mountOverlay assembles the overlay of s on its merged directory. Every
// directory is opened once, checked against the device and inode the Host
// Coordinator saw, and handed to the kernel as that descriptor; the mount is
// attached to the opened merged directory, and the merged path is then
// re-resolved and must show the new mount.
func mountOverlay(s *anchor.Setup, log *slog.Logger) (*overlay, error) {
	fds := map[string]int{}
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	for _, p := range []struct {
		name string
		c    anchor.PathCheck
	}{{"lower", s.Lower}, {"upper", s.Upper}, {"work", s.Work}, {"merged", s.Merged}} {
		fd, err := openChecked(p.name, p.c)
		if err != nil {
			return nil, err
		}
		fds[p.name] = fd
	}
	fsfd, err := unix.Fsopen("overlay", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return nil, fail(stepOverlay, s.Merged.Path, fmt.Errorf("%w (is the overlay filesystem available?)", os.NewSyscallError("fsopen", err)))
	}
	defer unix.Close(fsfd)
	if err := configureLayers(fsfd, fds); err != nil {
		return nil, fail(stepOverlay, s.Merged.Path, withKernelLog(fsfd, err))
	}
	// In a user namespace trusted.* xattrs are out of reach; overlay keeps
	// its metadata in user.overlay.* instead.
	if err := unix.FsconfigSetFlag(fsfd, "userxattr"); err != nil {
		return nil, fail(stepOverlay, s.Merged.Path, withKernelLog(fsfd, os.NewSyscallError("fsconfig userxattr", err)))
	}
	if err := unix.FsconfigCreate(fsfd); err != nil {
		return nil, fail(stepOverlay, s.Merged.Path, withKernelLog(fsfd, os.NewSyscallError("fsconfig create", err)))
	}
	mnt, err := unix.Fsmount(fsfd, unix.FSMOUNT_CLOEXEC, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV)
	if err != nil {
		return nil, fail(stepOverlay, s.Merged.Path, withKernelLog(fsfd, os.NewSyscallError("fsmount", err)))
	}
	o := &overlay{merged: s.Merged.Path, mnt: mnt, log: log}
	if err := unix.MoveMount(mnt, "", fds["merged"], "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH); err != nil {
		unix.Close(mnt)
		return nil, fail(stepAttach, s.Merged.Path, os.NewSyscallError("move_mount", err))
	}
	log.Info("overlay mounted", "lower", s.Lower.Path, "upper", s.Upper.Path, "work", s.Work.Path, "merged", s.Merged.Path)
	id, err := hostid.MountOf(mnt)
	if err != nil {
		o.detach()
		return nil, fail(stepIdentity, s.Merged.Path, err)
	}
	o.id = id
	if err := o.checkPath(); err != nil {
		o.detach()
		return nil, err
	}
	return o, nil
}

// configureLayers passes the layers as descriptors where the kernel takes
// them (overlay's "lowerdir+", "upperdir" and "workdir" accept a descriptor
// since Linux 6.13); older kernels get /proc/self/fd paths, which the kernel
// resolves to the same opened directories.
func configureLayers(fsfd int, fds map[string]int) error {
	err := unix.FsconfigSetFd(fsfd, "lowerdir+", fds["lower"])
	if err == nil {
		if err := unix.FsconfigSetFd(fsfd, "upperdir", fds["upper"]); err != nil {
			return os.NewSyscallError("fsconfig upperdir", err)
		}
		if err := unix.FsconfigSetFd(fsfd, "workdir", fds["work"]); err != nil {
			return os.NewSyscallError("fsconfig workdir", err)
		}
		return nil
	}
	if err != unix.EINVAL && err != unix.EOPNOTSUPP {
		return os.NewSyscallError("fsconfig lowerdir+", err)
	}
	for _, k := range []string{"lower", "upper", "work"} {
		if err := unix.FsconfigSetString(fsfd, k+"dir", "/proc/self/fd/"+strconv.Itoa(fds[k])); err != nil {
			return os.NewSyscallError("fsconfig "+k+"dir", err)
		}
	}
	return nil
}

// withKernelLog appends the messages the kernel queued on the filesystem
// context, which name the overlay rule that was broken.
func withKernelLog(fsfd int, err error) error {
	var msgs []string
	buf := make([]byte, 512)
	for range 8 {
		n, rerr := unix.Read(fsfd, buf)
		if rerr != nil || n <= 0 {
			break
		}
		msgs = append(msgs, string(bytes.TrimSpace(buf[:n])))
	}
	if len(msgs) == 0 {
		return err
	}
	return fmt.Errorf("%w (kernel: %s)", err, strings.Join(msgs, "; "))
}

// checkPath confirms that the merged path resolves to the overlay's root.
func (o *overlay) checkPath() error {
	fd, err := fsroot.OpenDir(unix.AT_FDCWD, o.merged)
	if err != nil {
		return fail(stepIdentity, o.merged, os.NewSyscallError("openat2", err))
	}
	defer unix.Close(fd)
	got, err := hostid.MountOf(fd)
	if err != nil {
		return fail(stepIdentity, o.merged, err)
	}
	if got != o.id {
		return fail(stepIdentity, o.merged, fmt.Errorf("path shows mount %+v, the overlay is %+v: %w", got, o.id, errMismatch))
	}
	return nil
}

// detach removes the overlay mount through its own descriptor and drops
// the descriptor. Detaching (MNT_DETACH) cannot fail on a busy mount, and
// once the descriptor is closed nothing in this namespace references the
// overlay.
func (o *overlay) detach() error {
	if o.mnt < 0 {
		return nil
	}
	err := unix.Unmount("/proc/self/fd/"+strconv.Itoa(o.mnt), unix.MNT_DETACH)
	unix.Close(o.mnt)
	o.mnt = -1
	if err != nil {
		return fail(stepUnmount, o.merged, os.NewSyscallError("umount2", err))
	}
	return nil
}

// unmount checks that the merged path still shows the overlay, detaches it,
// and proves absence: afterwards the merged path resolves to another mount.
func (o *overlay) unmount() error {
	if err := o.checkPath(); err != nil {
		return err
	}
	if err := o.detach(); err != nil {
		return err
	}
	fd, err := fsroot.OpenDir(unix.AT_FDCWD, o.merged)
	if err != nil {
		return fail(stepUnmount, o.merged, os.NewSyscallError("openat2", err))
	}
	defer unix.Close(fd)
	after, err := hostid.MountOf(fd)
	if err != nil {
		return fail(stepUnmount, o.merged, err)
	}
	if after.MountID == o.id.MountID {
		return fail(stepUnmount, o.merged, fmt.Errorf("mount %d is still attached after detaching", o.id.MountID))
	}
	o.log.Info("overlay unmounted", "merged", o.merged, "mount_id", o.id.MountID)
	return nil
}
