package supervisor_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"lazaret.dev/pkg/hostid"
	"lazaret.dev/pkg/ids"
	"lazaret.dev/pkg/supervise"
	"lazaret.dev/pkg/testbin"
	"lazaret.dev/pkg/testgate"
)

// supervisorPath is the lazaret-supervisor binary TestMain builds.
var supervisorPath string

func TestMain(m *testing.M) {
	os.Exit(testbin.Main(m, &supervisorPath, "lazaret.dev/lazaret-supervisor", "-trimpath", "-ldflags=-s -w"))
}

// requirePidfs skips (or, with LAZARET_TEST_ROOT=1, fails) where pidfds
// are not pidfs inodes.
func requirePidfs(t testing.TB) {
	t.Helper()
	testgate.Require(t, "pidfs process identity (Linux 6.9+)", func() error {
		fd, err := hostid.OpenPidfd(os.Getpid())
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		_, err = hostid.AuthorityOf(fd)
		return err
	})
}

// call is one hook invocation.
type call struct {
	hook   string
	staged hostid.StagedProcessOwnership
}

// recorder is a Hooks that records every call; each step may be replaced.
type recorder struct {
	mu    sync.Mutex
	calls []call
	on    map[string]func(hostid.StagedProcessOwnership) error
}

func (r *recorder) record(hook string, s hostid.StagedProcessOwnership) error {
	r.mu.Lock()
	r.calls = append(r.calls, call{hook, s})
	f := r.on[hook]
	r.mu.Unlock()
	if f != nil {
		return f(s)
	}
	return nil
}

func (r *recorder) StageSupervisor(_ context.Context, s hostid.StagedProcessOwnership) error {
	return r.record("StageSupervisor", s)
}

func (r *recorder) CommitSupervisor(_ context.Context, s hostid.StagedProcessOwnership) error {
	return r.record("CommitSupervisor", s)
}

func (r *recorder) StageChild(_ context.Context, s hostid.StagedProcessOwnership) error {
	return r.record("StageChild", s)
}

func (r *recorder) CommitChild(_ context.Context, s hostid.StagedProcessOwnership) error {
	return r.record("CommitChild", s)
}

func (r *recorder) hooks() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var h []string
	for _, c := range r.calls {
		h = append(h, c.hook)
	}
	return h
}

// newSpec returns a spec for argv with fresh IDs, the child's output and
// the supervisor's log in files of a test directory; the log is printed
// when the test fails.
func newSpec(t testing.TB, argv ...string) supervise.LaunchSpec {
	t.Helper()
	dir := t.TempDir()
	out := createFile(t, filepath.Join(dir, "child.out"))
	logPath := filepath.Join(dir, "supervisor.log")
	log := createFile(t, logPath)
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("supervisor log:\n%s", b)
		}
	})
	var dom ids.DomainID
	copy(dom[:], bytes.Repeat([]byte{0xd0}, len(dom)))
	return supervise.LaunchSpec{
		SupervisorPath: supervisorPath,
		SupervisorSlot: hostid.SlotSandboxRuntimeSupervisor,
		Slot:           hostid.SlotSandboxAttachedRunsc,
		Argv:           argv,
		Env:            []string{"PATH=/usr/bin:/bin", "LAZARET_TEST_DIR=" + dir},
		Dir:            dir,
		Stdout:         out,
		Stderr:         out,
		Log:            log,
		Domain:         dom,
		Generation:     ids.GenerationID(ids.New()),
		Coordinator:    ids.CoordinatorID(ids.New()),
	}
}

func createFile(t testing.TB, path string) *os.File {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC|unix.O_CLOEXEC, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// launch launches spec and makes sure the supervisor is gone at cleanup.
func launch(t testing.TB, spec supervise.LaunchSpec, hooks supervise.Hooks) *supervise.Handle {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	h, err := supervise.Launch(ctx, spec, hooks)
	if err != nil {
		t.Fatalf("Launch: %v", err)
	}
	t.Cleanup(func() {
		h.Kill()
		h.Release()
	})
	return h
}

// exited reports whether the process behind pidfd has exited, waiting at
// most d.
func exited(pidfd int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		left := time.Until(deadline)
		if left < 0 {
			left = 0
		}
		pfd := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
		n, err := unix.Poll(pfd, int(left/time.Millisecond))
		if err == unix.EINTR {
			continue
		}
		return err == nil && n > 0
	}
}

// waitFile waits at most d for path to exist.
func waitFile(path string, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(path); err == nil {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return false
}

// procState returns field 3 of /proc/<pid>/stat.
func procState(t testing.TB, pid int) byte {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.LastIndexByte(b, ')')
	return b[i+2]
}

// rawSupervisor starts the supervisor with a channel the test drives by
// hand, for what the client never sends.
type rawSupervisor struct {
	conn  *supervise.Conn
	cmd   *exec.Cmd
	hello supervise.Hello
	log   string
}

func startRaw(t testing.TB, argv ...string) *rawSupervisor {
	t.Helper()
	spec := newSpec(t, argv...)
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	rsEnd := os.NewFile(uintptr(fds[1]), "rs")
	conn, err := supervise.NewConn(os.NewFile(uintptr(fds[0]), "hc"))
	if err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(spec.Dir, "raw.log")
	log := createFile(t, logPath)
	cmd := exec.Command(supervisorPath, append([]string{"run", "--slot", spec.Slot.String(), "--log-fd", "4", "--"}, argv...)...)
	cmd.Env = spec.Env
	cmd.Dir = spec.Dir
	cmd.Stdout, cmd.Stderr = spec.Stdout, spec.Stderr
	cmd.ExtraFiles = []*os.File{rsEnd, log}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	rsEnd.Close()
	r := &rawSupervisor{conn: conn, cmd: cmd, log: logPath, hello: supervise.Hello{
		Version:        supervise.V1,
		DomainID:       spec.Domain,
		GenerationID:   spec.Generation,
		CoordinatorID:  spec.Coordinator,
		SupervisorSlot: spec.SupervisorSlot,
		ChildSlot:      spec.Slot,
	}}
	t.Cleanup(func() {
		conn.Close()
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("supervisor log:\n%s", b)
		}
	})
	return r
}

func (r *rawSupervisor) send(t testing.TB, c supervise.Command) {
	t.Helper()
	if err := r.conn.SendCommand(c); err != nil {
		t.Fatalf("sending %T: %v", c, err)
	}
}

func (r *rawSupervisor) recv(t testing.TB) supervise.Report {
	t.Helper()
	r.conn.SetDeadline(time.Now().Add(10 * time.Second))
	m, err := r.conn.RecvReport()
	if err != nil {
		t.Fatalf("receiving a report: %v", err)
	}
	return m
}

// handshake sends Hello and a correct Start and returns the Staged report.
func (r *rawSupervisor) handshake(t testing.TB) hostid.StagedProcessOwnership {
	t.Helper()
	r.send(t, &r.hello)
	armed, ok := r.recv(t).(*supervise.Armed)
	if !ok {
		t.Fatal("first report is not Armed")
	}
	rs := r.hello.StagedFor(r.hello.SupervisorSlot, armed.Supervisor)
	r.send(t, &supervise.Start{Supervisor: hostid.ProcessOwnershipCommitAck{Version: hostid.V1, Committed: rs}})
	staged, ok := r.recv(t).(*supervise.Staged)
	if !ok {
		t.Fatal("report after Start is not Staged")
	}
	return staged.Staged
}

// exitCode waits for the supervisor and returns its exit code.
func (r *rawSupervisor) exitCode(t testing.TB) int {
	t.Helper()
	done := make(chan struct{})
	go func() { r.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("supervisor did not exit")
	}
	return r.cmd.ProcessState.ExitCode()
}
