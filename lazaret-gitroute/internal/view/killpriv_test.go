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

// getattrCounter counts GETATTR requests.
type getattrCounter struct {
	fuse.RawFileSystem
	n atomic.Int64
}

func (c *getattrCounter) GetAttr(cancel <-chan struct{}, in *fuse.GetAttrIn, out *fuse.AttrOut) fuse.Status {
	c.n.Add(1)
	return c.RawFileSystem.GetAttr(cancel, in, out)
}

// TestKillPriv: with the kernel leaving set-ID bits to the view, a write,
// a truncating open, a truncation and a chown through the view still clear
// them as a local file system clears them for an unprivileged caller, and
// a chown costs no GETATTR. The view gives no file either bit (chmod,
// create) and changes no owner.
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
		if err := os.Mkdir(d, 0o777); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string]uint32{"suid": 0o4777, "sgid": 0o2777, "locking": 0o2767, "trunc": 0o4777,
		"ftrunc": 0o6777, "rootwrite": 0o4777, "chown": 0o6755, "chownlocking": 0o2745, "plain": 0o666}
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
	counter := &getattrCounter{RawFileSystem: v.Activity(fs.NewNodeFS(v.Root(), Options(mo)))}
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

	at := func(name string) string { return filepath.Join(mnt, name) }
	script := "echo y >>" + at("suid") + "; echo y >>" + at("sgid") + "; echo y >>" + at("locking") +
		"; : >" + at("trunc") + "; truncate -s 0 " + at("ftrunc")
	if out, err := exec.Command(setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", "sh", "-c", script).CombinedOutput(); err != nil {
		t.Fatalf("writing as nobody: %v: %s", err, out)
	}
	// Root's writes clear them too: every write through the view does.
	f, err := os.OpenFile(at("rootwrite"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("z"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	// A chown clears set-user-ID, and set-group-ID where the group may
	// execute; it reads no attributes first.
	for _, name := range []string{"chown", "chownlocking", "plain"} {
		if err := unix.Lstat(at(name), new(unix.Stat_t)); err != nil {
			t.Fatal(err)
		}
		before := counter.n.Load()
		if err := unix.Lchown(at(name), 0, 0); err != nil {
			t.Fatal(err)
		}
		if n := counter.n.Load() - before; n != 0 {
			t.Errorf("chown of %s asked GETATTR %d times, want none", name, n)
		}
	}
	// The view gives no file a set-ID bit: not by chmod, not at a create;
	// a directory keeps set-group-ID.
	if err := unix.Chmod(at("plain"), 0o6755); err != nil {
		t.Fatal(err)
	}
	cfd, err := unix.Open(at("created"), unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY, 0o6755)
	if err != nil {
		t.Fatal(err)
	}
	unix.Close(cfd)
	if err := os.Mkdir(at("dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Chmod(at("dir"), 0o2775); err != nil {
		t.Fatal(err)
	}
	// A chown changes no owner on the host.
	if err := unix.Lchown(at("created"), 4321, 4321); err != nil {
		t.Fatalf("chown through the view: %v", err)
	}
	var own unix.Stat_t
	if err := unix.Lstat(filepath.Join(host, "created"), &own); err != nil || own.Uid != 0 || own.Gid != 0 {
		t.Errorf("owner of the host file after a chown to 4321 through the view: %d:%d (%v), want 0:0", own.Uid, own.Gid, err)
	}
	for name, want := range map[string]uint32{"plain": 0o755, "created": 0o755, "dir": 0o2775,
		"suid": 0o777, "sgid": 0o777, "locking": 0o2767, "trunc": 0o777,
		"ftrunc": 0o777, "rootwrite": 0o777, "chown": 0o755, "chownlocking": 0o2745} {
		var st unix.Stat_t
		if err := unix.Lstat(filepath.Join(host, name), &st); err != nil {
			t.Fatal(err)
		}
		if got := st.Mode & 0o7777; got != want {
			t.Errorf("%s (mode %o) after the writes: mode %o, want %o", name, files[name], got, want)
		}
	}
}
