package spawn

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"lazaret.dev/pkg/hostid"
	"lazaret.dev/pkg/testgate"
)

// envPrintPdeathsig makes the test binary print its main thread's
// parent-death signal and exit, instead of running tests.
const envPrintPdeathsig = "LAZARET_SPAWN_TEST_PRINT_PDEATHSIG"

func init() {
	if os.Getenv(envPrintPdeathsig) != "1" {
		return
	}
	// init runs on the main thread, which carries the signal.
	var sig int32
	if _, _, e := unix.Syscall(unix.SYS_PRCTL, unix.PR_GET_PDEATHSIG, uintptr(unsafe.Pointer(&sig)), 0); e != 0 {
		os.Stdout.WriteString("error " + e.Error() + "\n")
		os.Exit(1)
	}
	os.Stdout.WriteString(strconv.Itoa(int(sig)) + "\n")
	os.Exit(0)
}

// mustStartGated starts cmd on a fresh Thread and abandons it at the end of
// the test unless it was opened.
func mustStartGated(t *testing.T, cmd *GatedCmd) *Gated {
	t.Helper()
	g, err := NewThread().StartGated(cmd)
	if errors.Is(err, hostid.ErrNoPidfs) {
		t.Skipf("pidfs identity unavailable: %v", err)
	}
	if err != nil {
		t.Fatalf("StartGated(%q): %v", cmd.Args, err)
	}
	t.Cleanup(func() {
		g.Process().Kill()
		g.Process().Wait()
		g.Process().Close()
	})
	return g
}

// pipe returns a pipe whose ends are closed at the end of the test.
func pipe(t *testing.T) (r, w *os.File) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(); w.Close() })
	return r, w
}

// output closes w (the child's copy stays) and reads r to EOF.
func output(t *testing.T, r, w *os.File) string {
	t.Helper()
	w.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestGatedRunsNothingBeforeOpen(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "ran")
	r, w := pipe(t)
	g := mustStartGated(t, &GatedCmd{
		Path: "/bin/sh", Args: []string{"sh", "-c", `echo $$ >"$1"; echo $$`, "sh", marker},
		Env: []string{"PATH=/usr/bin:/bin"}, Files: []*os.File{nil, w, w}, Setsid: true, Pdeathsig: syscall.SIGKILL,
	})
	p := g.Process()
	fd, err := hostid.OpenPidfd(p.Pid())
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if got, err := hostid.IdentityOf(fd); err != nil || got != p.Identity() {
		t.Fatalf("identity of pid %d = %v (%v), want %v", p.Pid(), got, err, p.Identity())
	}
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the program ran before the gate opened (stat %q: %v)", marker, err)
	}
	if err := g.Open(); err != nil {
		t.Fatalf("Open: %v", err)
	}
	out := strings.TrimSpace(output(t, r, w))
	if out != strconv.Itoa(p.Pid()) {
		t.Fatalf("the program printed pid %q, want the gated child's %d", out, p.Pid())
	}
	if err := p.Wait(); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if ps := p.State(); ps == nil || ps.ExitCode() != 0 {
		t.Fatalf("State = %v, want exit 0", ps)
	}
}

func TestGatedAbandon(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "ran")
	g, err := NewThread().StartGated(&GatedCmd{Path: "/bin/touch", Args: []string{"touch", marker}})
	if err != nil {
		t.Fatal(err)
	}
	p := g.Process()
	g.gate.Close() // abandoned: the child exits on its own
	g.status.Close()
	err = p.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != ExitGateClosed {
		t.Fatalf("Wait = %v, want exit %d", err, ExitGateClosed)
	}
	p.Close()
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("an abandoned child ran its program (stat %q: %v)", marker, err)
	}
	g2 := mustStartGated(t, &GatedCmd{Path: "/bin/touch", Args: []string{"touch", marker}})
	g2.Abandon()
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("an abandoned child ran its program (stat %q: %v)", marker, err)
	}
}

func TestGatedExecFails(t *testing.T) {
	g := mustStartGated(t, &GatedCmd{Path: "/nonexistent/program", Args: []string{"program"}})
	err := g.Open()
	if !errors.Is(err, ErrExec) || !errors.Is(err, unix.ENOENT) || !strings.Contains(err.Error(), "execve") {
		t.Fatalf("Open = %v, want ErrExec naming execve with ENOENT", err)
	}
	var ee *exec.ExitError
	if err := g.Process().Wait(); !errors.As(err, &ee) || ee.ExitCode() != ExitExecFailed {
		t.Fatalf("Wait = %v, want exit %d", err, ExitExecFailed)
	}
}

func TestGatedChdirFails(t *testing.T) {
	g := mustStartGated(t, &GatedCmd{Path: "/bin/true", Args: []string{"true"}, Dir: "/nonexistent"})
	if err := g.Open(); !errors.Is(err, ErrExec) || !errors.Is(err, unix.ENOENT) || !strings.Contains(err.Error(), "changing directory") {
		t.Fatalf("Open = %v, want ErrExec naming the directory change with ENOENT", err)
	}
}

// TestGatedDescriptors checks that the program gets exactly its files:
// 0-2 (nil is /dev/null), a file at 3, nothing at 4, 5 as given, and no
// other descriptor of this process.
func TestGatedDescriptors(t *testing.T) {
	leak, err := os.Open("/dev/null") // a descriptor of this process only
	if err != nil {
		t.Fatal(err)
	}
	defer leak.Close()
	if _, err := unix.FcntlInt(leak.Fd(), unix.F_SETFD, 0); err != nil { // not even close-on-exec
		t.Fatal(err)
	}
	extraR, extraW := pipe(t)
	if _, err := extraW.WriteString("three"); err != nil {
		t.Fatal(err)
	}
	extraW.Close()
	r, w := pipe(t)
	g := mustStartGated(t, &GatedCmd{
		Path: "/bin/sh", Args: []string{"sh", "-c", `ls -1 /proc/self/fd; cat <&3; echo; readlink /proc/self/fd/0`},
		Env: []string{"PATH=/usr/bin:/bin"}, Dir: "/", Files: []*os.File{nil, w, w, extraR, nil, extraR},
	})
	if err := g.Open(); err != nil {
		t.Fatal(err)
	}
	out := output(t, r, w)
	g.Process().Wait()
	// ls opens its directory at the lowest free number, 4: so 4 was
	// closed, and nothing is open above 5.
	if want := "0\n1\n2\n3\n4\n5\nthree\n/dev/null\n"; out != want {
		t.Fatalf("program saw %q, want %q: descriptors 0 1 2 3 5 (ls's own at 4), three on 3, /dev/null on 0", out, want)
	}
}

// TestGatedEntersNamespaces enters the user and mount namespaces of a
// holder process, as the coordinator enters the State Anchor's.
func TestGatedEntersNamespaces(t *testing.T) {
	testgate.UserNamespaces(t)
	holder := exec.Command("/bin/sleep", "60")
	holder.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}},
	}
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { holder.Process.Kill(); holder.Wait() }()
	var ns []*os.File
	var want []string
	for _, kind := range []string{"user", "mnt"} {
		path := "/proc/" + strconv.Itoa(holder.Process.Pid) + "/ns/" + kind
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		ns = append(ns, f)
		link, err := os.Readlink(path)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, link)
	}
	r, w := pipe(t)
	g := mustStartGated(t, &GatedCmd{
		Path: "/bin/sh", Args: []string{"sh", "-c", `readlink /proc/self/ns/user /proc/self/ns/mnt; pwd; id -u`},
		Env: []string{"PATH=/usr/bin:/bin"}, Files: []*os.File{nil, w, w}, Namespaces: ns, Pdeathsig: syscall.SIGKILL,
	})
	if err := g.Open(); err != nil {
		t.Fatal(err)
	}
	out := strings.Split(strings.TrimSpace(output(t, r, w)), "\n")
	if err := g.Process().Wait(); err != nil {
		t.Fatalf("Wait: %v (output %q)", err, out)
	}
	if len(out) != 4 || out[0] != want[0] || out[1] != want[1] || out[2] != "/" || out[3] != "0" {
		t.Fatalf("program saw %q, want namespaces %q, working directory / and uid 0", out, want)
	}

	// The parent-death signal set after the fork survives entering a user
	// namespace owned by this user, and the execve.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	r, w = pipe(t)
	g = mustStartGated(t, &GatedCmd{
		Path: self, Args: []string{self}, Env: []string{envPrintPdeathsig + "=1"},
		Files: []*os.File{nil, w, w}, Namespaces: ns, Pdeathsig: syscall.SIGKILL,
	})
	if err := g.Open(); err != nil {
		t.Fatal(err)
	}
	got := strings.TrimSpace(output(t, r, w))
	if err := g.Process().Wait(); err != nil || got != strconv.Itoa(int(syscall.SIGKILL)) {
		t.Fatalf("parent-death signal after setns and execve = %q (%v), want %d", got, err, syscall.SIGKILL)
	}
}

func TestGatedRefusesBadCommands(t *testing.T) {
	th := NewThread()
	for _, cmd := range []*GatedCmd{
		{Path: "relative", Args: []string{"relative"}},
		{Path: "/bin/true"},
		{Path: "/bin/true", Args: []string{"true"}, Setctty: true},
	} {
		if _, err := th.StartGated(cmd); err == nil {
			t.Errorf("StartGated(%+v) succeeded", cmd)
		}
	}
}
