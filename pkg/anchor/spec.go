package anchor

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"lazaret.dev/pkg/fsroot"
	"lazaret.dev/pkg/image/idmap"
)

// NsenterPath is util-linux's nsenter, used to start commands inside an
// anchor's namespaces.
const NsenterPath = "/usr/bin/nsenter"

// ErrSpec means a Spec breaks a rule; the wrapping error names the field,
// the path and the rule.
var ErrSpec = errors.New("invalid state anchor spec")

// Spec is what the Host Coordinator gives Start.
type Spec struct {
	// AnchorPath is the absolute path of the lazaret-anchor binary.
	AnchorPath string
	// Lower is the prepared artifact directory, the overlay's read-only
	// layer. It must be owned by the host UID that container UID 0 maps
	// to.
	Lower string
	// Upper and Work are the per-Domain overlay state directories under
	// the storage root. Missing ones are created with mode 0700 (their
	// parent must exist); existing ones must be directories owned by the
	// caller with no group or other permissions. Both must be on one
	// filesystem.
	Upper, Work string
	// Merged is the mount point under the runtime root, with the same
	// ownership and mode rules as Upper, and empty.
	Merged string
	// IDMap is the anchor's user-namespace ID map (see ChooseIDMap).
	IDMap idmap.Map
	// NewUIDMap and NewGIDMap override the helper paths; empty means
	// NewUIDMapPath and NewGIDMapPath.
	NewUIDMap, NewGIDMap string
	// Nsenter overrides NsenterPath.
	Nsenter string
	// Env is the anchor's environment; empty by default.
	Env []string
	// Stderr receives the anchor's log; nil discards it.
	Stderr io.Writer
	// Logger logs the Host Coordinator's side; nil discards.
	Logger *slog.Logger
}

// pathInfo is a checked directory.
type pathInfo struct {
	PathCheck
	uid  uint32
	mode uint32
}

// plan checks s and creates missing state directories. It returns the
// Setup to send, with the device and inode of every directory.
func (s *Spec) plan(euid, egid uint32) (Setup, MapMethod, error) {
	setup := Setup{Version: ProtocolVersion}
	if err := checkPath(s.AnchorPath); err != nil {
		return setup, 0, fmt.Errorf("anchor binary %q: %w: %w", s.AnchorPath, err, ErrSpec)
	}
	if st, err := os.Stat(s.AnchorPath); err != nil {
		return setup, 0, fmt.Errorf("anchor binary: %w", err)
	} else if !st.Mode().IsRegular() || st.Mode()&0o111 == 0 {
		return setup, 0, fmt.Errorf("anchor binary %q is not an executable regular file: %w", s.AnchorPath, ErrSpec)
	}
	method, err := MethodFor(s.IDMap, euid, egid)
	if err != nil {
		return setup, 0, err
	}
	rootUID, _ := s.IDMap.HostUID(0)
	fields := []struct {
		name string
		path string
	}{{"lower", s.Lower}, {"upper", s.Upper}, {"work", s.Work}, {"merged", s.Merged}}
	for i, f := range fields {
		if err := checkPath(f.path); err != nil {
			return setup, 0, fmt.Errorf("%s directory %q: %w: %w", f.name, f.path, err, ErrSpec)
		}
		for _, g := range fields[:i] {
			if f.path == g.path || within(f.path, g.path) || within(g.path, f.path) {
				return setup, 0, fmt.Errorf("%s directory %q and %s directory %q overlap: they must be disjoint: %w", g.name, g.path, f.name, f.path, ErrSpec)
			}
		}
	}
	lower, err := inspectDir(s.Lower, false)
	if err != nil {
		return setup, 0, fmt.Errorf("lower directory: %w", err)
	}
	if lower.uid != rootUID {
		return setup, 0, fmt.Errorf("lower directory %q is owned by UID %d: want %d (container root under ID map %s): %w", s.Lower, lower.uid, rootUID, s.IDMap, ErrSpec)
	}
	var state [3]pathInfo
	for i, f := range fields[1:] {
		pi, err := inspectDir(f.path, true)
		if err != nil {
			return setup, 0, fmt.Errorf("%s directory: %w", f.name, err)
		}
		if pi.uid != euid {
			return setup, 0, fmt.Errorf("%s directory %q is owned by UID %d: want the caller, %d: %w", f.name, f.path, pi.uid, euid, ErrSpec)
		}
		if pi.mode&0o077 != 0 {
			return setup, 0, fmt.Errorf("%s directory %q has mode %#o: want no group or other permissions (0700): %w", f.name, f.path, pi.mode&0o7777, ErrSpec)
		}
		state[i] = pi
	}
	if state[0].Device != state[1].Device {
		return setup, 0, fmt.Errorf("upper directory %q (device %d) and work directory %q (device %d) are on different filesystems: overlay needs them on one: %w",
			s.Upper, state[0].Device, s.Work, state[1].Device, ErrSpec)
	}
	if err := checkEmpty(s.Merged); err != nil {
		return setup, 0, err
	}
	setup.Lower, setup.Upper, setup.Work, setup.Merged = lower.PathCheck, state[0].PathCheck, state[1].PathCheck, state[2].PathCheck
	return setup, method, nil
}

func within(p, dir string) bool { return strings.HasPrefix(p, dir+"/") }

// inspectDir opens a directory, creating it with mode 0700 first when
// create is set and it is missing, and returns its identity.
func inspectDir(path string, create bool) (pathInfo, error) {
	fd, err := fsroot.OpenDir(unix.AT_FDCWD, path)
	if create && errors.Is(err, unix.ENOENT) {
		parent, perr := fsroot.OpenDir(unix.AT_FDCWD, filepath.Dir(path))
		if perr != nil {
			return pathInfo{}, fmt.Errorf("creating %q: parent directory: %w", path, perr)
		}
		merr := unix.Mkdirat(parent, filepath.Base(path), 0o700)
		unix.Close(parent)
		if merr != nil && merr != unix.EEXIST {
			return pathInfo{}, &os.PathError{Op: "mkdirat", Path: path, Err: merr}
		}
		fd, err = fsroot.OpenDir(unix.AT_FDCWD, path)
	}
	if err != nil {
		if errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) {
			return pathInfo{}, fmt.Errorf("%q is not a directory reached without symlinks: %w: %w", path, err, ErrSpec)
		}
		return pathInfo{}, err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return pathInfo{}, &os.PathError{Op: "fstat", Path: path, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return pathInfo{}, fmt.Errorf("%q is not a directory: %w", path, ErrSpec)
	}
	return pathInfo{PathCheck: PathCheck{Path: path, Device: st.Dev, Inode: st.Ino}, uid: st.Uid, mode: st.Mode}, nil
}

func checkEmpty(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("merged directory: %w", err)
	}
	defer f.Close()
	names, err := f.Readdirnames(1)
	if err != nil && err != io.EOF {
		return fmt.Errorf("merged directory: reading %q: %w", path, err)
	}
	if len(names) > 0 {
		return fmt.Errorf("merged directory %q is not empty (holds %q): a mount point must be empty: %w", path, names[0], ErrSpec)
	}
	return nil
}
