package spawn

import (
	"errors"
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"lazaret.dev/pkg/hostid"
)

// mustStart starts argv through start (Start or a Thread's) and closes
// the Process at the end of the test.
func mustStart(t *testing.T, start func(*exec.Cmd) (*Process, error), argv ...string) *Process {
	t.Helper()
	p, err := start(exec.Command(argv[0], argv[1:]...))
	if errors.Is(err, hostid.ErrNoPidfs) {
		t.Skipf("pidfs identity unavailable: %v", err)
	}
	if err != nil {
		t.Fatalf("starting %q: %v", argv, err)
	}
	t.Cleanup(func() {
		p.Kill()
		p.Wait()
		p.Close()
	})
	return p
}

func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

func TestStartIdentity(t *testing.T) {
	for _, tc := range []struct {
		name  string
		start func(*exec.Cmd) (*Process, error)
	}{
		{"Start", Start},
		{"Thread", NewThread().Start},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := mustStart(t, tc.start, "/bin/sleep", "60")
			fd, err := hostid.OpenPidfd(p.Pid())
			if err != nil {
				t.Fatal(err)
			}
			defer unix.Close(fd)
			got, err := hostid.IdentityOf(fd)
			if err != nil {
				t.Fatal(err)
			}
			if got != p.Identity() {
				t.Fatalf("identity through a second pidfd %v, Process says %v", got, p.Identity())
			}
			if int(p.Identity().HostPID) != p.Pid() {
				t.Fatalf("identity PID %d, child PID %d", p.Identity().HostPID, p.Pid())
			}
			if p.Exited() {
				t.Fatal("a sleeping child reports Exited")
			}
		})
	}
}

// A child that exits before its identity is read is still identified: it
// is not reaped before Wait or Done.
func TestStartExitedChild(t *testing.T) {
	p := mustStart(t, Start, "/bin/true")
	if p.Identity().HostPID == 0 {
		t.Fatal("no identity for a child that exited at once")
	}
	deadline := time.Now().Add(10 * time.Second)
	for !p.Exited() {
		if time.Now().After(deadline) {
			t.Fatal("/bin/true never exited")
		}
		time.Sleep(time.Millisecond)
	}
	if err := p.Wait(); err != nil {
		t.Fatalf("Wait of /bin/true: %v", err)
	}
	if st := p.State(); st == nil || !st.Success() {
		t.Fatalf("State of /bin/true: %v", st)
	}
}

func TestKillWaitOnce(t *testing.T) {
	p := mustStart(t, Start, "/bin/sleep", "60")
	if p.State() != nil {
		t.Fatal("State before exit is not nil")
	}
	if err := p.Signal(0); err != nil {
		t.Fatalf("Signal(0) to a running child: %v", err)
	}
	if err := p.Kill(); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	select {
	case <-p.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("child not reaped 10s after SIGKILL")
	}
	first := p.Wait()
	var ee *exec.ExitError
	if !errors.As(first, &ee) {
		t.Fatalf("Wait after SIGKILL: %v, want an *exec.ExitError", first)
	}
	if ws := ee.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("exit status %v, want killed by SIGKILL", ws)
	}
	if again := p.Wait(); again != first {
		t.Fatalf("second Wait returned %v, first %v", again, first)
	}
	// Reaped: the pidfd no longer reaches a process; killing it again is
	// no error, and the liveness probe says it is gone.
	if err := p.Kill(); err != nil {
		t.Fatalf("second Kill: %v", err)
	}
	if err := p.Signal(0); !errors.Is(err, hostid.ErrProcessExited) {
		t.Fatalf("Signal(0) after the reap: %v, want hostid.ErrProcessExited", err)
	}
	if !p.Exited() {
		t.Fatal("reaped child does not report Exited")
	}
	if err := p.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := p.Kill(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Kill after Close: %v, want ErrClosed", err)
	}
	if p.Fd() != -1 {
		t.Fatalf("Fd after Close is %d", p.Fd())
	}
}

func TestStartFailureLeavesNothing(t *testing.T) {
	for _, tc := range []struct {
		name string
		cmd  func() *exec.Cmd
		want error
	}{
		{"missing program", func() *exec.Cmd { return exec.Command("/nonexistent/lazaret-spawn-test") }, nil},
		{"directory as program", func() *exec.Cmd { return &exec.Cmd{Path: "/", Args: []string{"/"}} }, nil},
		{"pidfd requested", func() *exec.Cmd {
			fd := -1
			c := exec.Command("/bin/true")
			c.SysProcAttr = &syscall.SysProcAttr{PidFD: &fd}
			return c
		}, ErrPidfdRequested},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := openFDs(t)
			p, err := Start(tc.cmd())
			if err == nil {
				p.Kill()
				p.Wait()
				p.Close()
				t.Fatal("Start succeeded")
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("Start: %v, want %v", err, tc.want)
			}
			if after := openFDs(t); after != before {
				t.Fatalf("%d descriptors open before Start, %d after its failure", before, after)
			}
		})
	}
}

// Start copies SysProcAttr: a shared value is not given the pidfd.
func TestStartKeepsCallerAttr(t *testing.T) {
	attr := &syscall.SysProcAttr{Setsid: true}
	cmd := exec.Command("/bin/sleep", "60")
	cmd.SysProcAttr = attr
	p := mustStart(t, func(*exec.Cmd) (*Process, error) { return Start(cmd) }, "/bin/sleep")
	if attr.PidFD != nil {
		t.Fatal("Start wrote the pidfd into the caller's SysProcAttr")
	}
	sid, err := unix.Getsid(p.Pid())
	if err != nil {
		t.Fatal(err)
	}
	if sid != p.Pid() {
		t.Fatalf("child's session %d, want its own %d (Setsid kept)", sid, p.Pid())
	}
}

// A child with Pdeathsig started through a Thread survives the exit of
// the thread that asked for it; one forked on that exiting thread does
// not (golang/go#27505).
func TestThreadKeepsPdeathsig(t *testing.T) {
	th := NewThread()
	startOnDyingThread := func(start func(*exec.Cmd) (*Process, error)) *Process {
		t.Helper()
		type result struct {
			p   *Process
			err error
		}
		ch := make(chan result, 1)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
			cmd := exec.Command("/bin/sleep", "60")
			cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
			p, err := start(cmd)
			ch <- result{p, err}
		}()
		r := <-ch
		return mustStart(t, func(*exec.Cmd) (*Process, error) { return r.p, r.err }, "/bin/sleep")
	}
	viaThread := startOnDyingThread(th.Start)
	direct := startOnDyingThread(Start)
	deadline := time.Now().Add(10 * time.Second)
	for !direct.Exited() {
		if time.Now().After(deadline) {
			t.Fatal("the child forked on the exiting thread outlived it")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if viaThread.Exited() {
		t.Fatal("the child started through the Thread died with the caller's thread")
	}
}
