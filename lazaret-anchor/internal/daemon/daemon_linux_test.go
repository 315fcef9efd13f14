package daemon

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"lazaret.dev/pkg/anchor"
	"lazaret.dev/pkg/hostid"
	"lazaret.dev/pkg/image/idmap"
	"lazaret.dev/pkg/spawn"
	"lazaret.dev/pkg/testgate"
)

// serveEnv makes the test binary act as lazaret-anchor: Start re-executes
// it with this variable set.
const serveEnv = "LAZARET_ANCHOR_TEST_SERVE"

func TestMain(m *testing.M) {
	if os.Getenv(serveEnv) == "1" {
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
		s, err := anchor.ParseServe(os.Args[2:])
		if err == nil {
			err = s.Inherit()
		}
		if err == nil {
			err = Run(ctx, Options{
				Control:    s.Control,
				AwaitIDMap: s.AwaitIDMap,
				Reexec:     []string{os.Args[0], "serve"},
				Logger:     slog.New(slog.NewTextHandler(os.Stderr, nil)),
			})
		}
		stop()
		if err != nil {
			fmt.Fprintln(os.Stderr, "anchor:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// requireAnchor gates on what an anchor needs: user namespaces (root or
// not, the anchor always creates one) and the overlay filesystem.
func requireAnchor(t testing.TB) {
	t.Helper()
	testgate.UserNamespaces(t)
	testgate.Require(t, "overlay filesystem", func() error {
		b, err := os.ReadFile("/proc/filesystems")
		if err != nil {
			return err
		}
		if !strings.Contains(string(b), "\toverlay\n") {
			return errors.New("overlay missing from /proc/filesystems")
		}
		return nil
	})
}

// layout is one Domain's directories for a test.
type layout struct{ lower, upper, work, merged string }

// newLayout makes a lower directory holding etc/marker and leaves upper,
// work and merged to be created by Start. The parent is 0711 so that an
// unprivileged test run can reach it.
func newLayout(t testing.TB) layout {
	t.Helper()
	root := t.TempDir()
	l := layout{
		lower:  filepath.Join(root, "lower"),
		upper:  filepath.Join(root, "state", "upper"),
		work:   filepath.Join(root, "state", "work"),
		merged: filepath.Join(root, "run", "merged"),
	}
	for _, d := range []string{filepath.Join(l.lower, "etc"), filepath.Join(root, "state"), filepath.Join(root, "run")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(l.lower, "etc", "marker"), []byte("from lower\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return l
}

func testSpec(t testing.TB, l layout, m idmap.Map) anchor.Spec {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return anchor.Spec{
		AnchorPath: exe,
		Lower:      l.lower, Upper: l.upper, Work: l.work, Merged: l.merged,
		IDMap:  m,
		Env:    []string{serveEnv + "=1"},
		Stderr: testWriter{t},
	}
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Logf("anchor: %s", strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

func hostMap(t testing.TB) idmap.Map {
	t.Helper()
	m, err := anchor.HostIDMap()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("host ID map: %s", m)
	return m
}

func start(t testing.TB, spec anchor.Spec) *anchor.Anchor {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	a, err := anchor.Start(ctx, spec)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		a.Kill()
		a.Wait()
	})
	return a
}

// hostMounts returns the lines of this process's mountinfo that name dir.
func hostMounts(t testing.TB, dir string) []string {
	t.Helper()
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if strings.Contains(sc.Text(), dir) {
			out = append(out, sc.Text())
		}
	}
	return out
}

// run runs argv in the anchor's namespaces and returns its stdout.
func run(t testing.TB, a *anchor.Anchor, argv ...string) string {
	t.Helper()
	cmd, err := a.CommandInNamespaces(context.Background(), argv)
	if err != nil {
		t.Fatalf("CommandInNamespaces: %v", err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%q: %v (stderr %q)", argv, err, stderr.String())
	}
	return string(out)
}

func TestAnchorIdentitiesAndRelease(t *testing.T) {
	requireAnchor(t)
	l := newLayout(t)
	m := hostMap(t)
	a := start(t, testSpec(t, l, m))
	r := a.Ready()
	pid := a.Pid()

	t.Run("namespaces match /proc", func(t *testing.T) {
		for _, ns := range []struct {
			kind string
			want hostid.NamespaceIdentity
		}{{"user", r.UserNamespace}, {"mnt", r.MountNamespace}} {
			var st unix.Stat_t
			p := fmt.Sprintf("/proc/%d/ns/%s", pid, ns.kind)
			if err := unix.Stat(p, &st); err != nil {
				t.Fatal(err)
			}
			if st.Dev != ns.want.Device || st.Ino != ns.want.Inode {
				t.Errorf("%s: /proc shows dev %d ino %d, Ready says %+v", p, st.Dev, st.Ino, ns.want)
			}
			own, err := hostid.NamespaceOfProcess(os.Getpid(), ns.kind)
			if err != nil {
				t.Fatal(err)
			}
			if own == ns.want {
				t.Errorf("anchor shares the test's %s namespace", ns.kind)
			}
		}
	})
	t.Run("daemon is the started process", func(t *testing.T) {
		if int(r.Daemon.HostPID) != pid {
			t.Errorf("Ready daemon pid %d, started pid %d", r.Daemon.HostPID, pid)
		}
		start, err := hostid.StartTimeTicks(pid)
		if err != nil || start != r.Daemon.StartTimeTicks {
			t.Errorf("start time %d (%v), Ready says %d", start, err, r.Daemon.StartTimeTicks)
		}
	})
	t.Run("uid map is the chosen map", func(t *testing.T) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/uid_map", pid))
		if err != nil {
			t.Fatal(err)
		}
		var got []idmap.Range
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			var rg idmap.Range
			if _, err := fmt.Sscan(line, &rg.Container, &rg.Host, &rg.Size); err != nil {
				t.Fatalf("uid_map line %q: %v", line, err)
			}
			got = append(got, rg)
		}
		if want := m.Canonical().UIDs; !slices.Equal(idmap.Map{UIDs: got, GIDs: got}.Canonical().UIDs, want) {
			t.Errorf("uid_map %v, want %v", got, want)
		}
	})
	t.Run("mount seen through the anchor's root", func(t *testing.T) {
		p := fmt.Sprintf("/proc/%d/root%s", pid, l.merged)
		fd, err := unix.Open(p, unix.O_PATH|unix.O_CLOEXEC|unix.O_DIRECTORY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(fd)
		got, err := hostid.MountOf(fd)
		if err != nil {
			t.Fatal(err)
		}
		if got != r.Mount {
			t.Errorf("%s is mount %+v, Ready says %+v", p, got, r.Mount)
		}
		var sfs unix.Statfs_t
		if err := unix.Fstatfs(fd, &sfs); err != nil {
			t.Fatal(err)
		}
		if sfs.Type != unix.OVERLAYFS_SUPER_MAGIC {
			t.Errorf("%s has filesystem magic %#x, want overlay", p, sfs.Type)
		}
	})
	t.Run("anchor mount table holds the overlay", func(t *testing.T) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/mountinfo", pid))
		if err != nil {
			t.Fatal(err)
		}
		var line string
		for _, l2 := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l2); len(f) > 4 && f[4] == l.merged {
				line = l2
			}
		}
		if !strings.Contains(line, " - overlay ") || !strings.Contains(line, "upperdir="+l.upper) || !strings.Contains(line, "nosuid") {
			t.Errorf("anchor mountinfo line for %s: %q", l.merged, line)
		}
		t.Logf("anchor mountinfo: %s", line)
	})
	t.Run("host mount table untouched", func(t *testing.T) {
		if got := hostMounts(t, l.merged); len(got) != 0 {
			t.Errorf("host mountinfo names the merged directory: %q", got)
		}
	})
	t.Run("a gated child enters the opened namespaces", func(t *testing.T) {
		ns, err := a.OpenNamespaces()
		if err != nil {
			t.Fatalf("OpenNamespaces: %v", err)
		}
		defer func() {
			for _, f := range ns {
				f.Close()
			}
		}()
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		g, err := spawn.NewThread().StartGated(&spawn.GatedCmd{
			Path: "/bin/sh", Args: []string{"sh", "-c", "id -u; cat " + l.merged + "/etc/marker"},
			Env: []string{"PATH=/usr/bin:/bin"}, Files: []*os.File{nil, w, w}, Namespaces: ns, Pdeathsig: syscall.SIGKILL,
		})
		w.Close()
		if err != nil {
			t.Fatalf("StartGated: %v", err)
		}
		if err := g.Open(); err != nil {
			g.Abandon()
			t.Fatalf("Open: %v", err)
		}
		out, _ := io.ReadAll(r)
		if err := g.Process().Wait(); err != nil || string(out) != "0\nfrom lower\n" {
			t.Errorf("output %q, exit %v", out, err)
		}
		g.Process().Close()
	})
	t.Run("commands run inside and write to upper", func(t *testing.T) {
		out := run(t, a, "/bin/sh", "-c", "id -u; cat "+l.merged+"/etc/marker; echo written > "+l.merged+"/etc/new")
		if out != "0\nfrom lower\n" {
			t.Errorf("output %q", out)
		}
		b, err := os.ReadFile(filepath.Join(l.upper, "etc", "new"))
		if err != nil || string(b) != "written\n" {
			t.Errorf("upper/etc/new = %q, %v", b, err)
		}
		if _, err := os.Stat(filepath.Join(l.lower, "etc", "new")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("write reached the lower directory: %v", err)
		}
	})

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ev, err := a.Release(ctx)
	if err != nil {
		t.Fatalf("Release: %v", err)
	}
	want := anchor.ReleaseEvidence(r)
	if ev != want {
		t.Errorf("evidence %+v, want %+v", ev, want)
	}
	if err := a.Wait(); err != nil {
		t.Errorf("anchor exit after release: %v", err)
	}
	if _, err := a.EnterArgs([]string{"/bin/true"}); !errors.Is(err, anchor.ErrExited) {
		t.Errorf("EnterArgs after exit: %v, want ErrExited", err)
	}
	if _, err := a.OpenNamespaces(); !errors.Is(err, anchor.ErrExited) {
		t.Errorf("OpenNamespaces after exit: %v, want ErrExited", err)
	}
}

func TestKillLeavesNothingMountedAndUpperPersists(t *testing.T) {
	requireAnchor(t)
	l := newLayout(t)
	m := hostMap(t)

	first := start(t, testSpec(t, l, m))
	run(t, first, "/bin/sh", "-c", "mkdir -p "+l.merged+"/home && echo generation-1 > "+l.merged+"/home/state")
	mountID := first.Ready().Mount.MountID
	if err := first.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := first.Wait(); err == nil {
		t.Fatal("anchor killed with SIGKILL exited cleanly")
	}
	if got := hostMounts(t, l.merged); len(got) != 0 {
		t.Fatalf("after kill -9 the host mountinfo names the merged directory: %q", got)
	}
	if got := hostMounts(t, "overlay"); slices.ContainsFunc(got, func(s string) bool { return strings.Contains(s, l.upper) }) {
		t.Fatalf("after kill -9 an overlay on %q remains: %q", l.upper, got)
	}

	second := start(t, testSpec(t, l, m))
	if second.Ready().Mount.MountID == mountID {
		t.Errorf("second generation reuses mount ID %d", mountID)
	}
	if out := run(t, second, "/bin/cat", l.merged+"/home/state"); out != "generation-1\n" {
		t.Errorf("second generation reads %q", out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := second.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestClosedChannelUnmountsAndExits(t *testing.T) {
	requireAnchor(t)
	l := newLayout(t)
	a := start(t, testSpec(t, l, hostMap(t)))
	a.Close()
	select {
	case <-a.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("anchor still running 10s after its channel closed")
	}
	if err := a.Wait(); err != nil {
		t.Errorf("anchor exit after channel close: %v", err)
	}
}

func TestSingleIDMap(t *testing.T) {
	requireAnchor(t)
	l := newLayout(t)
	a := start(t, testSpec(t, l, idmap.Single(uint32(os.Geteuid()), uint32(os.Getegid()))))
	// An unprivileged caller can write gid_map only with setgroups
	// denied; root keeps setgroups allowed.
	want := "deny"
	if os.Geteuid() == 0 {
		want = "allow"
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/setgroups", a.Pid()))
	if err != nil || strings.TrimSpace(string(b)) != want {
		t.Errorf("setgroups = %q, %v; want %s", b, err, want)
	}
	if out := run(t, a, "/bin/sh", "-c", "id -u; id -g"); out != "0\n0\n" {
		t.Errorf("ids inside %q", out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestBadSpecs(t *testing.T) {
	requireAnchor(t)
	m := hostMap(t)
	tests := []struct {
		name  string
		edit  func(t *testing.T, l *layout)
		is    error
		wants string
	}{
		{"missing lower", func(t *testing.T, l *layout) { l.lower += "-missing" }, os.ErrNotExist, "-missing"},
		{"lower is a file", func(t *testing.T, l *layout) { l.lower = filepath.Join(l.lower, "etc", "marker") }, anchor.ErrSpec, "marker"},
		{"lower behind a symlink", func(t *testing.T, l *layout) {
			link := filepath.Join(filepath.Dir(l.lower), "link")
			if err := os.Symlink(l.lower, link); err != nil {
				t.Fatal(err)
			}
			l.lower = link
		}, anchor.ErrSpec, "link"},
		{"relative upper", func(t *testing.T, l *layout) { l.upper = "state/upper" }, anchor.ErrSpec, "not absolute"},
		{"work inside upper", func(t *testing.T, l *layout) { l.work = l.upper + "/work" }, anchor.ErrSpec, "overlap"},
		{"upper open to others", func(t *testing.T, l *layout) {
			if err := os.Mkdir(l.upper, 0o755); err != nil {
				t.Fatal(err)
			}
		}, anchor.ErrSpec, "0700"},
		{"merged not empty", func(t *testing.T, l *layout) {
			if err := os.Mkdir(l.merged, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(l.merged, "x"), nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}, anchor.ErrSpec, "not empty"},
		{"upper parent missing", func(t *testing.T, l *layout) { l.upper = filepath.Join(filepath.Dir(l.upper), "nope", "upper") }, os.ErrNotExist, "nope"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newLayout(t)
			tt.edit(t, &l)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			a, err := anchor.Start(ctx, testSpec(t, l, m))
			if err == nil {
				a.Kill()
				a.Wait()
				t.Fatal("Start accepted the spec")
			}
			if !errors.Is(err, tt.is) || !strings.Contains(err.Error(), tt.wants) {
				t.Errorf("error %q: want errors.Is %v and mention of %q", err, tt.is, tt.wants)
			}
		})
	}
	t.Run("lower owned by another user", func(t *testing.T) {
		l := newLayout(t)
		other := uint32(0)
		if os.Geteuid() == 0 {
			other = 4242
			if err := os.Chown(l.lower, int(other), int(other)); err != nil {
				t.Fatal(err)
			}
		} else {
			// Unprivileged, a root-owned directory is one owned by
			// someone else.
			l.lower = "/usr/share"
		}
		_, err := anchor.Start(context.Background(), testSpec(t, l, m))
		if want := fmt.Sprintf("owned by UID %d", other); !errors.Is(err, anchor.ErrSpec) || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v: want ErrSpec mentioning %q", err, want)
		}
	})
}

// TestAnchorRechecksDirectories speaks the protocol directly and sends a
// Setup whose lower inode is not the directory's: the anchor must refuse
// at its own open, name the step and the path, and exit non-zero.
func TestAnchorRechecksDirectories(t *testing.T) {
	requireAnchor(t)
	l := newLayout(t)
	for _, d := range []string{l.upper, l.work, l.merged} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	check := func(p string) anchor.PathCheck {
		var st unix.Stat_t
		if err := unix.Stat(p, &st); err != nil {
			t.Fatal(err)
		}
		return anchor.PathCheck{Path: p, Device: st.Dev, Inode: st.Ino}
	}
	setup := anchor.Setup{Version: anchor.ProtocolVersion, Lower: check(l.lower), Upper: check(l.upper), Work: check(l.work), Merged: check(l.merged)}
	setup.Lower.Inode++

	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	conn, child := os.NewFile(uintptr(fds[0]), "hc"), os.NewFile(uintptr(fds[1]), "anchor")
	defer conn.Close()
	exe, _ := os.Executable()
	cmd := exec.Command(exe, "serve")
	cmd.Env = []string{serveEnv + "=1"}
	cmd.ExtraFiles = []*os.File{child}
	cmd.Stderr = testWriter{t}
	uid, gid := os.Geteuid(), os.Getegid()
	size := 1
	if uid == 0 {
		size = anchor.RootRangeSize
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: uid, Size: size}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: gid, Size: size}},
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	child.Close()
	b, err := anchor.Encode(&setup)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Write(b); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, anchor.MaxMessageSize)
	n, err := conn.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	m, err := anchor.Decode(buf[:n])
	if err != nil {
		t.Fatal(err)
	}
	f, ok := m.(*anchor.Failure)
	if !ok {
		t.Fatalf("got %v, want Failure", m.Kind())
	}
	if f.Step != "opening the lower directory" || f.Path != l.lower || !strings.Contains(f.Detail, "identity differs") {
		t.Errorf("failure %+v", f)
	}
	if err := cmd.Wait(); err == nil {
		t.Error("anchor exited 0 after a failed setup")
	}
	if got := hostMounts(t, l.merged); len(got) != 0 {
		t.Errorf("host mountinfo names the merged directory: %q", got)
	}
}

// BenchmarkStartToReady measures Start (namespaces, ID map, overlay,
// identity checks) up to Ready, and the Release that follows.
func BenchmarkStartToReady(b *testing.B) {
	requireAnchor(b)
	m := hostMap(b)
	b.ReportAllocs()
	var ready, release time.Duration
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		l := newLayout(b)
		spec := testSpec(b, l, m)
		spec.Stderr = nil
		b.StartTimer()
		t0 := time.Now()
		a, err := anchor.Start(context.Background(), spec)
		if err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if _, err := a.Release(context.Background()); err != nil {
			b.Fatal(err)
		}
		ready += t1.Sub(t0)
		release += time.Since(t1)
		a.Wait()
	}
	b.ReportMetric(float64(ready.Microseconds())/float64(b.N)/1000, "ms-to-ready/op")
	b.ReportMetric(float64(release.Microseconds())/float64(b.N)/1000, "ms-release/op")
}
