package view

import (
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"lazaret.dev/pkg/testgate"
)

func TestKilledMode(t *testing.T) {
	for _, c := range []struct{ in, want uint32 }{
		{unix.S_IFREG | 0o4755, unix.S_IFREG | 0o755},
		{unix.S_IFREG | 0o2755, unix.S_IFREG | 0o755},
		{unix.S_IFREG | 0o2745, unix.S_IFREG | 0o2745}, // no group execution: mandatory locking, kept
		{unix.S_IFREG | 0o6777, unix.S_IFREG | 0o777},
		{unix.S_IFREG | 0o644, unix.S_IFREG | 0o644},
		{unix.S_IFDIR | 0o2775, unix.S_IFDIR | 0o2775},
	} {
		if got := killedMode(c.in); got != c.want {
			t.Errorf("killedMode(%o) = %o, want %o", c.in, got, c.want)
		}
	}
}

// xattrCounter counts GETXATTR requests.
type xattrCounter struct {
	fuse.RawFileSystem
	n atomic.Int64
}

func (c *xattrCounter) GetXAttr(cancel <-chan struct{}, h *fuse.InHeader, attr string, dest []byte) (uint32, fuse.Status) {
	c.n.Add(1)
	return c.RawFileSystem.GetXAttr(cancel, h, attr, dest)
}

// TestKillPriv: with the kernel clearing nothing itself, a write, a
// truncating open and a truncation by a caller without CAP_FSETID still
// clear set-user-ID and set-group-ID bits, and writes no longer cost a
// GETXATTR each.
func TestKillPriv(t *testing.T) {
	testgate.Root(t)
	testgate.FUSE(t)
	setpriv := testgate.Command(t, "setpriv")
	base := t.TempDir()
	for _, d := range []string{filepath.Dir(base), base} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	host, iso, mnt := filepath.Join(base, "host"), filepath.Join(base, "iso"), filepath.Join(base, "mnt")
	for _, d := range []string{host, iso, mnt} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string]uint32{"suid": 0o4777, "sgid": 0o2777, "locking": 0o2767, "trunc": 0o4777, "ftrunc": 0o6777, "plain": 0o666}
	for name, mode := range files {
		p := filepath.Join(host, name)
		if err := os.WriteFile(p, []byte("x\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := unix.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
	hostFd, err := OpenRoot(host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(hostFd) })
	isoFd, err := OpenRoot(iso)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(isoFd) })
	v := New(hostFd, isoFd, Router{C: fixed{}}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	mo := fuse.MountOptions{FsName: "view-test", DirectMount: true, AllowOther: true, ExtraCapabilities: KillPrivCapability}
	counter := &xattrCounter{RawFileSystem: KillPriv(v.Activity(fs.NewNodeFS(v.Root(), Options(mo))))}
	srv, err := fuse.NewServer(counter, mnt, &mo)
	if err != nil {
		t.Fatalf("mounting the view: %v", err)
	}
	go srv.Serve()
	if err := srv.WaitMount(); err != nil {
		t.Fatalf("serving the view: %v", err)
	}
	t.Cleanup(func() {
		if err := srv.Unmount(); err != nil {
			t.Errorf("unmounting the view: %v", err)
		}
	})
	if srv.KernelSettings().Flags64()&KillPrivCapability == 0 {
		t.Skip("the kernel does not offer FUSE_HANDLE_KILLPRIV_V2 (Linux 5.11)")
	}

	nobody := func(script string) {
		t.Helper()
		out, err := exec.Command(setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", "sh", "-c", script).CombinedOutput()
		if err != nil {
			t.Fatalf("%s as nobody: %v: %s", script, err, out)
		}
	}
	at := func(name string) string { return filepath.Join(mnt, name) }
	nobody("echo y >>" + at("suid") + "; echo y >>" + at("sgid") + "; echo y >>" + at("locking") +
		"; : >" + at("trunc") + "; truncate -s 0 " + at("ftrunc"))
	for name, want := range map[string]uint32{"suid": 0o777, "sgid": 0o777, "locking": 0o2767, "trunc": 0o777, "ftrunc": 0o777} {
		var st unix.Stat_t
		if err := unix.Lstat(filepath.Join(host, name), &st); err != nil {
			t.Fatal(err)
		}
		if got := st.Mode & 0o7777; got != want {
			t.Errorf("%s (mode %o) after nobody changed it: mode %o, want %o", name, files[name], got, want)
		}
	}

	// Root's writes keep the bits, as on a local file system.
	if err := unix.Chmod(filepath.Join(host, "suid"), 0o4777); err != nil {
		t.Fatal(err)
	}
	write := func(name string) {
		t.Helper()
		f, err := os.OpenFile(at(name), os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteString("z"); err != nil {
			t.Fatal(err)
		}
	}
	write("suid")
	// A file without the bits is checked once, not at every write.
	before := counter.n.Load()
	const writes = 10
	for i := 0; i < writes; i++ {
		write("plain")
	}
	if n := counter.n.Load() - before; n > 1 {
		t.Errorf("%d writes of a plain file asked GETXATTR %d times, want at most once", writes, n)
	}
	var st unix.Stat_t
	if err := unix.Lstat(filepath.Join(host, "suid"), &st); err != nil || st.Mode&0o7777 != 0o4777 {
		t.Errorf("after root's writes: mode %o (%v), want 4777", st.Mode&0o7777, err)
	}
}
