package daemon_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestFilesWithoutHandles covers the view's handleless regular files: the
// kernel opens them itself, so what an OPEN used to refuse is refused at
// the write or truncation, an unlinked or replaced file stays readable
// through what has it open, and nothing the view keeps for that outlives
// the kernel's use of it.
func TestFilesWithoutHandles(t *testing.T) {
	e := setup(t, baseFiles, "")
	h, v := e.host, e.mnt

	t.Run("unlinked while open", func(t *testing.T) {
		writeFile(t, filepath.Join(v, "docs/gone.txt"), "still here\n")
		f, err := os.OpenFile(filepath.Join(v, "docs/gone.txt"), os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := os.Remove(filepath.Join(v, "docs/gone.txt")); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Lstat(filepath.Join(h, "docs/gone.txt")); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("host file after unlink through the view: %v", err)
		}
		buf := make([]byte, 64)
		k, err := f.ReadAt(buf, 0)
		if string(buf[:k]) != "still here\n" {
			t.Fatalf("reading the unlinked file: %q, %v", buf[:k], err)
		}
		if _, err := f.WriteAt([]byte("STILL"), 0); err != nil {
			t.Fatalf("writing the unlinked file: %v", err)
		}
		if err := f.Truncate(5); err != nil {
			t.Fatalf("truncating the unlinked file: %v", err)
		}
		st, err := f.Stat()
		if err != nil || st.Size() != 5 {
			t.Fatalf("stat of the unlinked file: %v, %v", st, err)
		}
		k, _ = f.ReadAt(buf, 0)
		if string(buf[:k]) != "STILL" {
			t.Fatalf("reading the unlinked file back: %q", buf[:k])
		}
	})

	t.Run("renamed over while open", func(t *testing.T) {
		writeFile(t, filepath.Join(v, "docs/a.txt"), "old\n")
		f, err := os.Open(filepath.Join(v, "docs/a.txt"))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		writeFile(t, filepath.Join(v, "docs/a.tmp"), "new\n")
		if err := os.Rename(filepath.Join(v, "docs/a.tmp"), filepath.Join(v, "docs/a.txt")); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 64)
		if k, err := f.ReadAt(buf, 0); string(buf[:k]) != "old\n" {
			t.Fatalf("the replaced file through its open descriptor: %q, %v", buf[:k], err)
		}
		if got := readFile(t, filepath.Join(v, "docs/a.txt")); got != "new\n" {
			t.Fatalf("the path after the rename: %q", got)
		}
	})

	t.Run("sealed path opened for writing", func(t *testing.T) {
		p := filepath.Join(v, ".git/config")
		before := readFile(t, filepath.Join(h, ".git/config"))
		for _, flag := range []int{os.O_WRONLY, os.O_WRONLY | os.O_APPEND, os.O_RDWR} {
			f, err := os.OpenFile(p, flag, 0)
			if err != nil {
				if !errors.Is(err, syscall.EROFS) {
					t.Errorf("open flags %#x: %v, want success or EROFS", flag, err)
				}
				continue
			}
			if _, err := f.Write([]byte("[core]\n\thooksPath = /tmp\n")); !errors.Is(err, syscall.EROFS) {
				t.Errorf("write, open flags %#x: %v, want EROFS", flag, err)
			}
			if err := f.Truncate(0); !errors.Is(err, syscall.EROFS) {
				t.Errorf("ftruncate, open flags %#x: %v, want EROFS", flag, err)
			}
			if err := unix.Fallocate(int(f.Fd()), 0, 0, 4096); !errors.Is(err, syscall.EROFS) {
				t.Errorf("fallocate, open flags %#x: %v, want EROFS", flag, err)
			}
			f.Close()
		}
		if _, err := os.OpenFile(p, os.O_WRONLY|os.O_TRUNC, 0); !errors.Is(err, syscall.EROFS) {
			t.Errorf("open with O_TRUNC: %v, want EROFS", err)
		}
		if got := readFile(t, filepath.Join(h, ".git/config")); got != before {
			t.Errorf("host .git/config changed:\n%s", got)
		}
	})

	t.Run("multiply linked host file opened for writing", func(t *testing.T) {
		if err := os.Link(filepath.Join(h, "src/important.log"), filepath.Join(t.TempDir(), "outside")); err != nil {
			t.Skipf("cannot hard-link across test dirs: %v", err)
		}
		time.Sleep(1100 * time.Millisecond)
		f, err := os.OpenFile(filepath.Join(v, "src/important.log"), os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			if !errors.Is(err, syscall.EPERM) {
				t.Fatalf("open: %v, want success or EPERM", err)
			}
			return
		}
		defer f.Close()
		if _, err := f.Write([]byte("through the view\n")); !errors.Is(err, syscall.EPERM) {
			t.Errorf("write: %v, want EPERM", err)
		}
		if got := readFile(t, filepath.Join(h, "src/important.log")); got != "important\n" {
			t.Errorf("host file = %q", got)
		}
	})

	t.Run("multiply linked host file unlinked while open", func(t *testing.T) {
		// What the view keeps of an unlinked file is not a way to change
		// the inode that another link, outside the workspace, still names:
		// no mode, owner, size or times through the open descriptor.
		writeFile(t, filepath.Join(h, "docs/linked.txt"), "linked\n")
		outside := filepath.Join(t.TempDir(), "outside")
		if err := os.Link(filepath.Join(h, "docs/linked.txt"), outside); err != nil {
			t.Skipf("cannot hard-link across test dirs: %v", err)
		}
		var before unix.Stat_t
		if err := unix.Stat(outside, &before); err != nil {
			t.Fatal(err)
		}
		time.Sleep(1100 * time.Millisecond)
		f, err := os.Open(filepath.Join(v, "docs/linked.txt"))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := os.Remove(filepath.Join(v, "docs/linked.txt")); err != nil {
			t.Fatal(err)
		}
		fd := int(f.Fd())
		if err := unix.Fchmod(fd, 0o4777); err == nil {
			t.Errorf("fchmod 4777 of the unlinked file: succeeded, want an error")
		}
		if err := unix.Fchown(fd, 4321, 4321); err == nil {
			st, _ := f.Stat()
			if s, ok := st.Sys().(*syscall.Stat_t); ok && s.Uid == 4321 {
				t.Errorf("fchown of the unlinked file changed its owner to 4321")
			}
		}
		if err := unix.Ftruncate(fd, 0); err == nil {
			t.Errorf("ftruncate of the unlinked file: succeeded, want an error")
		}
		if err := unix.Futimes(fd, []unix.Timeval{{Sec: 1}, {Sec: 1}}); err == nil {
			t.Errorf("futimes of the unlinked file: succeeded, want an error")
		}
		var after unix.Stat_t
		if err := unix.Stat(outside, &after); err != nil {
			t.Fatal(err)
		}
		if after.Mode != before.Mode || after.Uid != before.Uid || after.Gid != before.Gid || after.Size != before.Size ||
			after.Mtim != before.Mtim {
			t.Errorf("the file outside: mode %o uid %d gid %d size %d mtime %v, was mode %o uid %d gid %d size %d mtime %v",
				after.Mode, after.Uid, after.Gid, after.Size, after.Mtim, before.Mode, before.Uid, before.Gid, before.Size, before.Mtim)
		}
	})

	t.Run("mapped read", func(t *testing.T) {
		want := bytes.Repeat([]byte("0123456789abcdef"), 64<<10>>4)
		if err := os.WriteFile(filepath.Join(h, "docs/big.bin"), want, 0o644); err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(filepath.Join(v, "docs/big.bin"))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		m, err := unix.Mmap(int(f.Fd()), 0, len(want), unix.PROT_READ, unix.MAP_SHARED)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Munmap(m)
		if !bytes.Equal(m, want) {
			t.Fatal("mapped content differs from the host file")
		}
	})

	t.Run("a file created read-only writes through its create descriptor", func(t *testing.T) {
		f, err := os.OpenFile(filepath.Join(v, "docs/ro.txt"), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o444)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write([]byte("read-only content\n")); err != nil {
			t.Fatalf("writing a file created read-only: %v", err)
		}
		if err := f.Truncate(9); err != nil {
			t.Fatalf("truncating a file created read-only: %v", err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		if got := readFile(t, filepath.Join(h, "docs/ro.txt")); got != "read-only" {
			t.Fatalf("host file = %q", got)
		}
		if st, err := os.Stat(filepath.Join(h, "docs/ro.txt")); err != nil || st.Mode().Perm() != 0o444 {
			t.Fatalf("host file mode: %v, %v", st, err)
		}
	})

	fds := func(t *testing.T) int {
		ents, err := os.ReadDir("/proc/" + strconv.Itoa(int(e.d.Process().HostPID)) + "/fd")
		if errors.Is(err, os.ErrPermission) {
			t.Skipf("the daemon's descriptors cannot be counted here (it is not dumpable): %v", err)
		}
		if err != nil {
			t.Fatal(err)
		}
		return len(ents)
	}

	t.Run("create descriptors are bounded", func(t *testing.T) {
		before := fds(t)
		if err := os.Mkdir(filepath.Join(v, "many"), 0o755); err != nil {
			t.Fatal(err)
		}
		for i := range 400 {
			writeFile(t, filepath.Join(v, "many/f"+strconv.Itoa(i)), "x")
		}
		if n := fds(t); n > before+300 {
			t.Fatalf("the view holds %d descriptors after creating 400 files, %d before", n, before)
		}
	})

	t.Run("kept descriptors are closed", func(t *testing.T) {
		if err := os.RemoveAll(filepath.Join(v, "many")); err != nil {
			t.Fatal(err)
		}
		fds := func() int { return fds(t) }
		before := fds()
		for i := range 50 {
			p := filepath.Join(v, "docs/tmp"+strconv.Itoa(i))
			writeFile(t, p, "x")
			f, err := os.Open(p)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			f.Close()
		}
		deadline := time.Now().Add(5 * time.Second)
		for fds() > before+5 && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		if n := fds(); n > before+5 {
			dir := "/proc/" + strconv.Itoa(int(e.d.Process().HostPID)) + "/fd"
			ents, _ := os.ReadDir(dir)
			var names []string
			for _, de := range ents {
				l, _ := os.Readlink(filepath.Join(dir, de.Name()))
				names = append(names, l)
			}
			t.Fatalf("the view holds %d descriptors after 50 files unlinked while open and closed, %d before: %q", n, before, names)
		}
	})
}

// TestCachedListingsFollowChanges: the kernel keeps a watched directory's
// listing; a change through the view shows in the next listing at once,
// and a host change within the staleness bound.
func TestCachedListingsFollowChanges(t *testing.T) {
	e := setup(t, map[string]string{".gitignore": "*.log\n", "d/a.txt": "a\n", "d/b.txt": "b\n"}, "")
	h, v := e.host, e.mnt
	list := func() string {
		ents, err := os.ReadDir(filepath.Join(v, "d"))
		if err != nil {
			return err.Error()
		}
		var names []string
		for _, de := range ents {
			names = append(names, de.Name())
		}
		return strings.Join(names, " ")
	}
	lists := func(want string) func() (string, bool) {
		return func() (string, bool) { got := list(); return got, got == want }
	}
	// Give the watcher its first walk, then fill the kernel's cache.
	within(t, "the first listing", lists("a.txt b.txt"))
	if got := list(); got != "a.txt b.txt" {
		t.Fatalf("listing = %q", got)
	}
	writeFile(t, filepath.Join(v, "d/c.txt"), "c\n")
	if got := list(); got != "a.txt b.txt c.txt" {
		t.Fatalf("listing right after a create through the view = %q", got)
	}
	if err := os.Remove(filepath.Join(v, "d/a.txt")); err != nil {
		t.Fatal(err)
	}
	if got := list(); got != "b.txt c.txt" {
		t.Fatalf("listing right after an unlink through the view = %q", got)
	}
	writeFile(t, filepath.Join(h, "d/h.txt"), "h\n")
	within(t, "listing after a host create", lists("b.txt c.txt h.txt"))
	writeFile(t, filepath.Join(h, "d/hidden.log"), "ignored on the host\n")
	if err := os.Remove(filepath.Join(h, "d/b.txt")); err != nil {
		t.Fatal(err)
	}
	within(t, "listing after a host delete", lists("c.txt h.txt"))
	if err := os.Rename(filepath.Join(h, "d/h.txt"), filepath.Join(h, "d/i.txt")); err != nil {
		t.Fatal(err)
	}
	within(t, "listing after a host rename", lists("c.txt i.txt"))
}

// TestNoExtendedAttributes: the view serves no extended attributes, so no
// attribute the sandbox sets reaches a host file and none of the host's
// is read.
func TestNoExtendedAttributes(t *testing.T) {
	e := setup(t, baseFiles, "")
	h, v := e.host, e.mnt
	if err := unix.Setxattr(filepath.Join(h, "README.md"), "user.host", []byte("host"), 0); err != nil {
		t.Skipf("the host file system takes no user attributes: %v", err)
	}
	buf := make([]byte, 256)
	for _, c := range []struct {
		name string
		err  error
	}{
		{"getxattr", func() error { _, err := unix.Getxattr(filepath.Join(v, "README.md"), "user.host", buf); return err }()},
		{"listxattr", func() error { _, err := unix.Listxattr(filepath.Join(v, "README.md"), buf); return err }()},
		{"setxattr", unix.Setxattr(filepath.Join(v, "README.md"), "user.lz", []byte("1"), 0)},
		{"setxattr on a new file", func() error {
			writeFile(t, filepath.Join(v, "docs/new.txt"), "new\n")
			return unix.Setxattr(filepath.Join(v, "docs/new.txt"), "user.lz", []byte("1"), 0)
		}()},
		{"removexattr", unix.Removexattr(filepath.Join(v, "README.md"), "user.host")},
		// A version 2 capability set granting CAP_NET_BIND_SERVICE; a
		// caller without CAP_SETFCAP is refused before the view.
		{"setxattr security.capability", unix.Setxattr(filepath.Join(v, "README.md"), "security.capability",
			[]byte{0, 0, 0, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, 0)},
	} {
		if !errors.Is(c.err, unix.EOPNOTSUPP) && (c.name != "setxattr security.capability" || !errors.Is(c.err, unix.EPERM)) {
			t.Errorf("%s through the view: %v, want EOPNOTSUPP", c.name, c.err)
		}
	}
	if k, err := unix.Getxattr(filepath.Join(h, "README.md"), "user.host", buf); err != nil || string(buf[:k]) != "host" {
		t.Errorf("host attribute after the view's calls: %q, %v", buf[:k], err)
	}
	for _, p := range []string{"README.md", "docs/new.txt"} {
		if k, err := unix.Listxattr(filepath.Join(h, p), buf); err != nil || (p != "README.md" && k != 0) {
			t.Errorf("host %s attributes: %q, %v", p, buf[:max(k, 0)], err)
		}
	}
}
