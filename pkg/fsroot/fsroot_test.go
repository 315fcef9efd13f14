package fsroot

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"

	"lazaret.dev/pkg/hostid"
)

// tree builds, under a temporary directory:
//
//	outside                 a file the roots must not reach
//	root/sub/file
//	root/etc/target
//	root/link-in   -> sub/file
//	root/link-up   -> ../outside
//	root/link-abs  -> /etc/target (the image's own file when in the root)
//	root/link-deep -> ../../../../../../outside
func tree(t *testing.T) (base, root string) {
	t.Helper()
	base = t.TempDir()
	root = filepath.Join(base, "root")
	for _, d := range []string{"root/sub", "root/etc"} {
		if err := os.MkdirAll(filepath.Join(base, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"outside", "root/sub/file", "root/etc/target"} {
		if err := os.WriteFile(filepath.Join(base, f), []byte(f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	links := map[string]string{
		"link-in":   "sub/file",
		"link-up":   "../outside",
		"link-abs":  "/etc/target",
		"link-deep": "../../../../../../outside",
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
			t.Fatal(err)
		}
	}
	return base, root
}

func openDir(t *testing.T, path string) int {
	t.Helper()
	fd, err := unix.Open(path, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

func identity(t *testing.T, path string) hostid.MountIdentity {
	t.Helper()
	fd, err := unix.Open(path, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	id, err := hostid.MountOf(fd)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

type opener func(int, string, int, uint32) (int, error)

func TestOpen(t *testing.T) {
	base, root := tree(t)
	rootfd := openDir(t, root)
	// A descriptor whose /proc/self/fd entry is a magic link.
	magic, err := os.Open(filepath.Join(root, "sub", "file"))
	if err != nil {
		t.Fatal(err)
	}
	defer magic.Close()
	magicPath := "/proc/self/fd/" + strconv.Itoa(int(magic.Fd()))

	tests := []struct {
		name  string
		open  opener
		dirfd int
		path  string
		want  string // the object reached, relative to base; "" when refused
		errno unix.Errno
	}{
		{"beneath/plain", OpenBeneath, rootfd, "sub/file", "root/sub/file", 0},
		{"beneath/self", OpenBeneath, rootfd, "", "root", 0},
		{"beneath/dotdot inside", OpenBeneath, rootfd, "sub/../etc/target", "root/etc/target", 0},
		{"beneath/dotdot escape", OpenBeneath, rootfd, "../outside", "", unix.EXDEV},
		{"beneath/absolute", OpenBeneath, rootfd, filepath.Join(base, "outside"), "", unix.EXDEV},
		{"beneath/symlink inside", OpenBeneath, rootfd, "link-in", "", unix.ELOOP},
		{"beneath/symlink escape", OpenBeneath, rootfd, "link-up", "", unix.ELOOP},
		{"beneath/magic link", OpenBeneath, unix.AT_FDCWD, magicPath, "", unix.EXDEV},

		{"in root/plain", OpenInRoot, rootfd, "etc/target", "root/etc/target", 0},
		{"in root/self", OpenInRoot, rootfd, "", "root", 0},
		{"in root/absolute symlink stays inside", OpenInRoot, rootfd, "link-abs", "root/etc/target", 0},
		{"in root/absolute path stays inside", OpenInRoot, rootfd, "/etc/target", "root/etc/target", 0},
		{"in root/dotdot stays inside", OpenInRoot, rootfd, "../../../etc/target", "root/etc/target", 0},
		{"in root/symlink inside", OpenInRoot, rootfd, "link-in", "root/sub/file", 0},
		{"in root/relative symlink escape", OpenInRoot, rootfd, "link-up", "", unix.ENOENT},
		{"in root/deep symlink escape", OpenInRoot, rootfd, "link-deep", "", unix.ENOENT},

		{"no links/plain", OpenNoLinks, unix.AT_FDCWD, filepath.Join(root, "sub/file"), "root/sub/file", 0},
		{"no links/relative", OpenNoLinks, rootfd, "sub/file", "root/sub/file", 0},
		{"no links/dotdot", OpenNoLinks, rootfd, "../outside", "outside", 0},
		{"no links/symlink", OpenNoLinks, rootfd, "link-in", "", unix.ELOOP},
		{"no links/symlink escape", OpenNoLinks, rootfd, "link-up", "", unix.ELOOP},
		{"no links/magic link", OpenNoLinks, unix.AT_FDCWD, magicPath, "", unix.ELOOP},

		{"no magic links/symlink", OpenNoMagicLinks, rootfd, "link-in", "root/sub/file", 0},
		{"no magic links/symlink escape", OpenNoMagicLinks, rootfd, "link-up", "outside", 0},
		{"no magic links/magic link", OpenNoMagicLinks, unix.AT_FDCWD, magicPath, "", unix.ELOOP},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fd, err := tt.open(tt.dirfd, tt.path, unix.O_PATH, 0)
			if tt.want == "" {
				if err == nil {
					unix.Close(fd)
					t.Fatalf("opened %q, want %v", tt.path, tt.errno)
				}
				var pe *os.PathError
				if !errors.As(err, &pe) || !errors.Is(err, tt.errno) {
					t.Fatalf("error %v (%T), want an *os.PathError wrapping %v", err, err, tt.errno)
				}
				return
			}
			if err != nil {
				t.Fatalf("opening %q: %v", tt.path, err)
			}
			defer unix.Close(fd)
			if err := hostid.CheckMount(fd, tt.path, identity(t, filepath.Join(base, tt.want))); err != nil {
				t.Fatalf("reached the wrong object: %v", err)
			}
		})
	}
}

func TestOpenCloexec(t *testing.T) {
	_, root := tree(t)
	fd, err := OpenNoLinks(unix.AT_FDCWD, root, unix.O_PATH, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
	if err != nil {
		t.Fatal(err)
	}
	if flags&unix.FD_CLOEXEC == 0 {
		t.Fatal("descriptor lacks FD_CLOEXEC")
	}
}

func TestOpenPath(t *testing.T) {
	_, root := tree(t)
	rootfd := openDir(t, root)
	fd, err := OpenPath(rootfd, "sub/file")
	if err != nil {
		t.Fatal(err)
	}
	unix.Close(fd)
	// A final link is the link itself, never its target.
	fd, err = OpenPath(rootfd, "link-in")
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		t.Fatal(err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFLNK {
		t.Fatalf("OpenPath of a symbolic link opened mode %o, want the link", st.Mode)
	}
	// A link on the way is refused.
	if fd, err := OpenPath(rootfd, "link-up/x"); !errors.Is(err, unix.ELOOP) {
		if err == nil {
			unix.Close(fd)
		}
		t.Fatalf("OpenPath through a symbolic link: %v, want ELOOP", err)
	}
}

func TestOpenDir(t *testing.T) {
	base, root := tree(t)
	if err := os.Symlink("root", filepath.Join(base, "dir-link")); err != nil {
		t.Fatal(err)
	}
	fd, err := OpenDir(unix.AT_FDCWD, root)
	if err != nil {
		t.Fatal(err)
	}
	unix.Close(fd)
	for path, errno := range map[string]unix.Errno{
		filepath.Join(base, "dir-link"):        unix.ENOTDIR,
		filepath.Join(base, "dir-link", "sub"): unix.ELOOP,
		filepath.Join(root, "sub", "file"):     unix.ENOTDIR,
	} {
		if fd, err := OpenDir(unix.AT_FDCWD, path); !errors.Is(err, errno) {
			if err == nil {
				unix.Close(fd)
			}
			t.Errorf("OpenDir(%q): %v, want %v", path, err, errno)
		}
	}
}

// TestCrossDevice uses /proc, its own mount wherever the tests run.
func TestCrossDevice(t *testing.T) {
	rootfd := openDir(t, "/")
	if identity(t, "/").MountID == identity(t, "/proc").MountID {
		t.Skip("/proc is not a separate mount here")
	}
	for _, open := range []struct {
		name string
		open opener
	}{{"beneath", OpenBeneath}, {"in root", OpenInRoot}} {
		t.Run(open.name, func(t *testing.T) {
			fd, err := open.open(rootfd, "proc/self", unix.O_PATH, 0)
			if err == nil {
				unix.Close(fd)
				t.Fatal("crossed into /proc")
			}
			if !errors.Is(err, unix.EXDEV) {
				t.Fatalf("error %v, want EXDEV", err)
			}
		})
	}
	fd, err := OpenNoLinks(rootfd, "proc", unix.O_PATH, 0)
	if err != nil {
		t.Fatalf("OpenNoLinks may cross mounts: %v", err)
	}
	unix.Close(fd)
}

func TestProbe(t *testing.T) {
	if err := Probe(); err != nil {
		t.Fatal(err)
	}
}
