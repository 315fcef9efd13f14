package daemon

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"

	"golang.org/x/sys/unix"

	"lazaret.dev/pkg/seqpacket"
)

// MountMethod selects how the view is mounted.
type MountMethod string

// Mount methods.
const (
	// MountAuto uses fusermount3 when it is installed, else a direct
	// mount(2) when running as root.
	MountAuto MountMethod = "auto"
	// MountFusermount uses fusermount3 with auto_unmount: the helper stays
	// behind and unmounts the view as soon as the daemon dies.
	MountFusermount MountMethod = "fusermount"
	// MountDirect calls mount(2) itself (root only). A dead daemon then
	// leaves a disconnected mount, which the coordinator's client detaches.
	MountDirect MountMethod = "direct"
)

// ParseMountMethod checks a --mount-method value.
func ParseMountMethod(s string) (MountMethod, error) {
	switch m := MountMethod(s); m {
	case MountAuto, MountFusermount, MountDirect:
		return m, nil
	}
	return "", fmt.Errorf("mount method %q: want auto, fusermount or direct", s)
}

// fuseMount is a mounted, not yet served, FUSE connection.
type fuseMount struct {
	fd int // /dev/fuse connection
	// watch is the fusermount3 control socket; the helper unmounts the view
	// when its last reference closes. nil for a direct mount.
	watch *os.File
}

const (
	fsName  = "lazaret-workspace"
	subtype = "lazaret-gitroute"
	// maxRead is the largest READ and WRITE request (the mount's max_read
	// and the server's MaxWrite). Every reader goroutine of the server
	// holds a request buffer of this size plus a page, and go-fuse runs
	// one reader per CPU (2 to 16); 128 KiB, the kernel's default request
	// size, keeps those buffers at 2 MiB at most (1 MiB requests held up
	// to 17 MiB on a 16-CPU host). Buffered reads come in readahead
	// windows of 128 KiB anyway, and the daemon's throughput benchmarks
	// measured no difference in 64 MiB reads or writes
	// (docs/WORKSPACE.md, "Measured cost").
	maxRead = 128 << 10
)

func mountView(mountpoint string, method MountMethod) (*fuseMount, error) {
	if method == MountAuto {
		method = MountDirect
		if _, err := exec.LookPath("fusermount3"); err == nil {
			method = MountFusermount
		} else if os.Geteuid() != 0 {
			return nil, fmt.Errorf("mounting %q: fusermount3 not found and not running as root (install fuse3): %w", mountpoint, err)
		}
	}
	if method == MountDirect {
		return mountDirect(mountpoint)
	}
	return mountFusermount(mountpoint)
}

func mountFusermount(mountpoint string) (*fuseMount, error) {
	bin, err := exec.LookPath("fusermount3")
	if err != nil {
		return nil, fmt.Errorf("mounting %q: fusermount3 not found (install fuse3): %w", mountpoint, err)
	}
	local, remote, err := seqpacket.Socketpair("fusermount")
	if err != nil {
		return nil, fmt.Errorf("creating fusermount3 socketpair: %w", err)
	}
	opts := strings.Join([]string{"fsname=" + fsName, "subtype=" + subtype, "auto_unmount", "nosuid", "nodev", fmt.Sprintf("max_read=%d", maxRead)}, ",")
	cmd := exec.Command(bin, "-o", opts, "--", mountpoint)
	cmd.ExtraFiles = []*os.File{remote}
	cmd.Env = append(os.Environ(), "_FUSE_COMMFD=3")
	// With auto_unmount the helper stays running after it sends the
	// descriptor and unmounts when the socket's other end closes, so it is
	// not waited for here; a helper that fails exits without sending one.
	cmd.Stdout = os.Stderr
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		remote.Close()
		local.Close()
		return nil, fmt.Errorf("starting fusermount3: %w", err)
	}
	remote.Close()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	fd, err := receiveFd(local)
	if err != nil {
		local.Close()
		if werr := <-exited; werr != nil {
			err = fmt.Errorf("%w (fusermount3: %v)", err, werr)
		}
		return nil, fmt.Errorf("mounting %q with fusermount3: %w", mountpoint, err)
	}
	return &fuseMount{fd: fd, watch: local}, nil
}

// receiveFd reads the one descriptor fusermount3 sends.
func receiveFd(f *os.File) (int, error) {
	_, fds, err := seqpacket.Recv(int(f.Fd()), make([]byte, 8), 1)
	switch {
	case err == io.EOF:
		return -1, errors.New("fusermount3 closed the socket without sending a descriptor")
	case err != nil:
		return -1, err
	case len(fds) != 1:
		for _, fd := range fds {
			unix.Close(fd)
		}
		return -1, fmt.Errorf("got %d descriptors, want 1", len(fds))
	}
	return fds[0], nil
}

// errNotRoot refuses a direct mount without privilege.
var errNotRoot = errors.New("a direct mount needs root")

func mountDirect(mountpoint string) (*fuseMount, error) {
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("mounting %q: %w", mountpoint, errNotRoot)
	}
	fd, err := unix.Open("/dev/fuse", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("opening /dev/fuse: %w", &os.PathError{Op: "open", Path: "/dev/fuse", Err: err})
	}
	data := fmt.Sprintf("fd=%d,rootmode=40000,user_id=%d,group_id=%d,max_read=%d", fd, os.Geteuid(), os.Getegid(), maxRead)
	if err := unix.Mount(fsName, mountpoint, "fuse."+subtype, unix.MS_NOSUID|unix.MS_NODEV, data); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("mounting %q: %w", mountpoint, &os.PathError{Op: "mount", Path: mountpoint, Err: err})
	}
	return &fuseMount{fd: fd}, nil
}
