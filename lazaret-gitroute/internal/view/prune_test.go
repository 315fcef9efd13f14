package view

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"lazaret.dev/pkg/testgate"
)

// mounted serves a view over a fresh host root in this process and
// returns it with its mountpoint and the server.
func mounted(t *testing.T, populate func(host string)) (*FS, string, *fuse.Server) {
	t.Helper()
	testgate.FUSE(t)
	base := t.TempDir()
	host, iso, mnt := filepath.Join(base, "host"), filepath.Join(base, "iso"), filepath.Join(base, "mnt")
	for _, d := range []string{host, iso, mnt} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	populate(host)
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
	mo := fuse.MountOptions{FsName: "view-test", DirectMount: os.Geteuid() == 0}
	srv, err := fuse.NewServer(v.Activity(fs.NewNodeFS(v.Root(), Options(mo))), mnt, &mo)
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
	return v, mnt, srv
}

// nodes counts the view's nodes below the root.
func nodes(v *FS) int {
	n := 0
	var below func(in *fs.Inode)
	below = func(in *fs.Inode) {
		for _, c := range in.Children() {
			n++
			below(c)
		}
	}
	below(v.root.EmbeddedInode())
	return n
}

func inode(t *testing.T, path string) uint64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

// TestPruneDropsWhatNobodyUses: after a walk, a sweep leaves the nodes of
// an open file and an open directory (and their parents), drops the
// rest, and a dropped entry looked up again keeps its inode number.
func TestPruneDropsWhatNobodyUses(t *testing.T) {
	const dirs, files = 4, 100
	v, mnt, srv := mounted(t, func(host string) {
		for d := 0; d < dirs; d++ {
			dir := filepath.Join(host, fmt.Sprintf("d%d", d))
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			for f := 0; f < files; f++ {
				if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%d", f)), []byte("x"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
	})
	inos := map[string]uint64{}
	for d := 0; d < dirs; d++ {
		for f := 0; f < files; f++ {
			p := filepath.Join(mnt, fmt.Sprintf("d%d/f%d", d, f))
			inos[p] = inode(t, p)
		}
	}
	open, err := os.Open(filepath.Join(mnt, "d1/f7"))
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	dir, err := os.Open(filepath.Join(mnt, "d2"))
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	if got := nodes(v); got < dirs*files {
		t.Fatalf("%d nodes after the walk, want at least %d", got, dirs*files)
	}

	v.budget = 0 // prune whatever is unused
	named, err := v.sweep()
	if !srv.KernelSettings().SupportsNotify(fuse.NOTIFY_PRUNE) {
		if !errors.Is(err, ErrPruneUnsupported) {
			t.Fatalf("sweep on a kernel without prune notifications: %v, want ErrPruneUnsupported", err)
		}
		t.Logf("kernel FUSE %d.%d has no prune notification; checked only that the sweep says so", srv.KernelSettings().Major, srv.KernelSettings().Minor)
		return
	}
	if err != nil || named < dirs*files {
		t.Fatalf("sweep named %d nodes, %v; want at least %d", named, err, dirs*files)
	}
	// FORGET arrives after the notification: wait for it.
	for deadline := time.Now().Add(20 * time.Second); nodes(v) > 3; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d nodes 20 s after the sweep, want 3 (d1, d1/f7, d2)", nodes(v))
		}
	}
	root := v.root.EmbeddedInode()
	d1 := root.GetChild("d1")
	if d1 == nil || d1.GetChild("f7") == nil || root.GetChild("d2") == nil {
		t.Fatal("the sweep dropped a node in use")
	}
	if _, err := open.Seek(0, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	if b, err := io.ReadAll(open); err != nil || string(b) != "x" {
		t.Fatalf("reading the open file after the sweep: %q, %v", b, err)
	}
	if names, err := dir.Readdirnames(-1); err != nil || len(names) != files {
		t.Fatalf("listing the open directory after the sweep: %d names, %v", len(names), err)
	}
	for p, want := range inos {
		if got := inode(t, p); got != want {
			t.Fatalf("%s: inode %d after the sweep, %d before", p, got, want)
		}
	}
}

func TestNextStep(t *testing.T) {
	tests := []struct {
		name      string
		busy      bool
		handed    uint64
		unsettled bool
		want      step
	}{
		{"idle, nothing handed out", false, 0, false, wait},
		{"busy, nodes handed out: wait for an idle tick", true, 10, false, wait},
		{"busy after a burst: sweep anyway", true, pruneBurst, false, sweepNodes},
		{"idle with nodes handed out: sweep", false, 1, true, sweepNodes},
		{"idle after a sweep: settle", false, 0, true, settleMemory},
		{"busy after a sweep: wait to settle", true, 0, true, wait},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := next(tt.busy, tt.handed, tt.unsettled); got != tt.want {
				t.Fatalf("next(%v, %d, %v) = %d, want %d", tt.busy, tt.handed, tt.unsettled, got, tt.want)
			}
		})
	}
}

// TestActivityMarksBusy: a request through the view marks it busy.
func TestActivityMarksBusy(t *testing.T) {
	v, mnt, _ := mounted(t, func(host string) {
		if err := os.WriteFile(filepath.Join(host, "f"), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	})
	v.busy.Store(false)
	if _, err := os.ReadFile(filepath.Join(mnt, "f")); err != nil {
		t.Fatal(err)
	}
	if !v.busy.Load() {
		t.Fatal("reading a file left the view idle")
	}
}

// TestPruneSweepsAfterABurst: pruneBurst nodes handed out call for a
// sweep at once; Prune answers it, settles when the view turns idle, and
// returns when its context ends.
func TestPruneSweepsAfterABurst(t *testing.T) {
	v, mnt, srv := mounted(t, func(host string) {
		for f := 0; f < pruneBurst+10; f++ {
			if err := os.WriteFile(filepath.Join(host, fmt.Sprintf("f%d", f)), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	})
	if len(v.kick) != 0 {
		t.Fatal("a sweep was called for before any lookup")
	}
	for f := 0; f < pruneBurst+10; f++ {
		var st unix.Stat_t
		if err := unix.Lstat(filepath.Join(mnt, fmt.Sprintf("f%d", f)), &st); err != nil {
			t.Fatal(err)
		}
	}
	v.budget = 0
	if len(v.kick) != 1 || v.lookups.Load() < pruneBurst {
		t.Fatalf("after %d lookups: %d sweeps called for, %d counted", pruneBurst+10, len(v.kick), v.lookups.Load())
	}
	if !srv.KernelSettings().SupportsNotify(fuse.NOTIFY_PRUNE) {
		if err := v.Prune(context.Background(), nil); !errors.Is(err, ErrPruneUnsupported) {
			t.Fatalf("Prune on a kernel without prune notifications: %v, want ErrPruneUnsupported", err)
		}
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	settled := make(chan struct{}, 1)
	go func() {
		done <- v.Prune(ctx, func() {
			select {
			case settled <- struct{}{}:
			default:
			}
		})
	}()
	select {
	case <-settled:
	case err := <-done:
		t.Fatalf("Prune returned %v before settling", err)
	case <-time.After(30 * time.Second):
		t.Fatalf("no settle 30 s after the burst (%d nodes)", nodes(v))
	}
	for deadline := time.Now().Add(20 * time.Second); nodes(v) > 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d nodes left after the burst's sweep", nodes(v))
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Prune: %v", err)
	}
}

// TestPruneKeepsTheBudget: a sweep of a view holding no more nodes than
// its budget names none (the kernel's cache is worth keeping); over the
// budget it names the oldest down to three quarters of it, and the newest
// stay.
func TestPruneKeepsTheBudget(t *testing.T) {
	const files, budget = 400, 100
	v, mnt, srv := mounted(t, func(host string) {
		for f := 0; f < files; f++ {
			if err := os.WriteFile(filepath.Join(host, fmt.Sprintf("f%d", f)), []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	})
	if !srv.KernelSettings().SupportsNotify(fuse.NOTIFY_PRUNE) {
		t.Skipf("kernel FUSE %d.%d has no prune notification", srv.KernelSettings().Major, srv.KernelSettings().Minor)
	}
	for f := 0; f < files; f++ {
		inode(t, filepath.Join(mnt, fmt.Sprintf("f%d", f)))
	}
	v.budget = files
	if named, err := v.sweep(); named != 0 || err != nil {
		t.Fatalf("sweep within the budget named %d nodes, %v; want none", named, err)
	}
	v.budget = budget
	named, err := v.sweep()
	if err != nil || named != files-budget*3/4 {
		t.Fatalf("sweep over the budget named %d nodes, %v; want %d", named, err, files-budget*3/4)
	}
	for deadline := time.Now().Add(20 * time.Second); nodes(v) > budget*3/4; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d nodes 20 s after the sweep, want %d", nodes(v), budget*3/4)
		}
	}
	root := v.root.EmbeddedInode()
	for f := files - budget*3/4; f < files; f++ {
		if root.GetChild(fmt.Sprintf("f%d", f)) == nil {
			t.Fatalf("f%d, among the newest, was pruned", f)
		}
	}
}
