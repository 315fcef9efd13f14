package supervisor_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"lazaret.dev/pkg/hostid"
	"lazaret.dev/pkg/supervise"
)

func TestLaunchBarrier(t *testing.T) {
	requirePidfs(t)
	spec := newSpec(t, "/bin/sh", "-c", `echo ran > "$LAZARET_TEST_DIR/ran"; exec /bin/sleep 30`)
	marker := filepath.Join(spec.Dir, "ran")
	rec := &recorder{on: map[string]func(hostid.StagedProcessOwnership) error{
		"CommitChild": func(hostid.StagedProcessOwnership) error {
			// The child exists and is staged; it must not run before
			// the acknowledgment.
			time.Sleep(300 * time.Millisecond)
			if _, err := os.Stat(marker); err == nil {
				t.Error("child ran before its ownership was committed")
			}
			return nil
		},
	}}
	h := launch(t, spec, rec)

	if got, want := rec.hooks(), []string{"StageSupervisor", "CommitSupervisor", "StageChild", "CommitChild"}; !slices.Equal(got, want) {
		t.Fatalf("hooks = %v, want %v", got, want)
	}
	rsStaged, childStaged := rec.calls[0].staged, rec.calls[2].staged
	if rsStaged.Slot != hostid.SlotSandboxRuntimeSupervisor || childStaged.Slot != hostid.SlotSandboxAttachedRunsc {
		t.Errorf("staged slots = %v, %v", rsStaged.Slot, childStaged.Slot)
	}
	if rsStaged.Identity != h.Supervisor || childStaged.Identity != h.Child {
		t.Error("staged identities differ from the handle's")
	}
	if rsStaged.GenerationID != spec.Generation || childStaged.CoordinatorID != spec.Coordinator || childStaged.DomainID != spec.Domain {
		t.Error("staged ownership is not bound to the launch")
	}
	if rec.calls[1].staged != rsStaged || rec.calls[3].staged != childStaged {
		t.Error("commit hooks received a different value than the stage hooks")
	}

	// The supervisor identity is the one read through the coordinator's
	// own pidfd.
	rsID, err := hostid.IdentityOf(h.SupervisorPidfd())
	if err != nil {
		t.Fatal(err)
	}
	if rsID != h.Supervisor {
		t.Errorf("supervisor identity %v, pidfd says %v", h.Supervisor, rsID)
	}

	if !waitFile(marker, 5*time.Second) {
		t.Fatal("child did not run after commit")
	}
	// The program (sh, then sleep by exec) is the staged process: an
	// independent pidfd opened by PID matches the staged authority and
	// the identity read now equals the staged one.
	fd, err := hostid.OpenPidfd(int(h.Child.HostPID))
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if ok, err := hostid.PidfsRecoveryMatch(h.Child, fd); !ok || err != nil {
		t.Fatalf("PidfsRecoveryMatch = %v, %v", ok, err)
	}
	now, err := hostid.IdentityOf(fd)
	if err != nil {
		t.Fatal(err)
	}
	if now != h.Child {
		t.Errorf("running child identity %v, staged %v", now, h.Child)
	}
	if err := h.Stop(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	st, err := h.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if st.Signal != unix.SIGTERM {
		t.Errorf("status = %v, want killed by SIGTERM", st)
	}
	if !exited(fd, 0) {
		t.Error("child pidfd does not show an exit")
	}
}

func TestChildExitStatus(t *testing.T) {
	requirePidfs(t)
	cases := []struct {
		name string
		argv []string
		want supervise.ExitStatus
	}{
		{"true", []string{"/bin/true"}, supervise.ExitStatus{}},
		{"code", []string{"/bin/sh", "-c", "exit 7"}, supervise.ExitStatus{Code: 7}},
		{"signal", []string{"/bin/sh", "-c", "kill -KILL $$"}, supervise.ExitStatus{Signal: unix.SIGKILL}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := launch(t, newSpec(t, tc.argv...), &recorder{})
			st, err := h.Wait()
			if err != nil {
				t.Fatal(err)
			}
			if st != tc.want {
				t.Fatalf("status = %v, want %v", st, tc.want)
			}
			if !exited(h.ChildPidfd(), time.Second) {
				t.Fatal("child pidfd does not show an exit")
			}
		})
	}
}

func TestStopGrace(t *testing.T) {
	requirePidfs(t)
	cases := []struct {
		name    string
		trap    string
		grace   time.Duration
		want    supervise.ExitStatus
		atLeast time.Duration
	}{
		{"term honoured", `trap "exit 3" TERM`, 10 * time.Second, supervise.ExitStatus{Code: 3}, 0},
		{"term ignored", `trap "" TERM`, 300 * time.Millisecond, supervise.ExitStatus{Signal: unix.SIGKILL}, 300 * time.Millisecond},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			spec := newSpec(t, "/bin/sh", "-c", tc.trap+`; : > "$LAZARET_TEST_DIR/ready"; while :; do /bin/sleep 0.05; done`)
			h := launch(t, spec, &recorder{})
			if !waitFile(filepath.Join(spec.Dir, "ready"), 5*time.Second) {
				t.Fatal("child did not install its trap")
			}
			begin := time.Now()
			if err := h.Stop(tc.grace); err != nil {
				t.Fatal(err)
			}
			st, err := h.Wait()
			took := time.Since(begin)
			if err != nil {
				t.Fatal(err)
			}
			if st != tc.want {
				t.Fatalf("status = %v, want %v", st, tc.want)
			}
			if took < tc.atLeast || took > tc.atLeast+5*time.Second {
				t.Fatalf("stop took %v, want about %v", took, tc.atLeast)
			}
		})
	}
}

func TestKillSupervisorKillsChild(t *testing.T) {
	requirePidfs(t)
	h := launch(t, newSpec(t, "/bin/sleep", "60"), &recorder{})
	if exited(h.ChildPidfd(), 0) {
		t.Fatal("child not running")
	}
	if err := unix.PidfdSendSignal(h.SupervisorPidfd(), unix.SIGKILL, nil, 0); err != nil {
		t.Fatal(err)
	}
	if !exited(h.ChildPidfd(), 5*time.Second) {
		t.Fatal("child survived kill -9 of its supervisor")
	}
	st, err := h.Wait()
	if !errors.Is(err, supervise.ErrNoExitReport) || st.Signal != unix.SIGKILL {
		t.Fatalf("Wait = %v, %v; want the supervisor's SIGKILL and ErrNoExitReport", st, err)
	}
}

func TestCoordinatorLossKeepsChild(t *testing.T) {
	requirePidfs(t)
	h := launch(t, newSpec(t, "/bin/sleep", "60"), &recorder{})
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if exited(h.ChildPidfd(), 500*time.Millisecond) {
		t.Fatal("child ended when the coordinator channel closed")
	}
	if exited(h.SupervisorPidfd(), 0) {
		t.Fatal("supervisor ended when the coordinator channel closed")
	}
	// The child ends on its own; the supervisor reaps it and mirrors its
	// status in its exit code.
	if err := unix.PidfdSendSignal(h.ChildPidfd(), unix.SIGTERM, nil, 0); err != nil {
		t.Fatal(err)
	}
	st, err := h.Wait()
	if !errors.Is(err, supervise.ErrNoExitReport) {
		t.Fatalf("Wait error = %v, want ErrNoExitReport", err)
	}
	if st.Code != 128+int(unix.SIGTERM) {
		t.Fatalf("supervisor status = %v, want exit code %d", st, 128+int(unix.SIGTERM))
	}
	if _, err := hostid.IdentityOf(h.ChildPidfd()); !errors.Is(err, hostid.ErrProcessExited) {
		t.Fatalf("child identity after exit: %v, want ErrProcessExited (reaped)", err)
	}
}

func TestSupervisorStopContinue(t *testing.T) {
	requirePidfs(t)
	h := launch(t, newSpec(t, "/bin/sleep", "60"), &recorder{})
	rsPid := int(h.Supervisor.HostPID)
	if err := unix.PidfdSendSignal(h.SupervisorPidfd(), unix.SIGSTOP, nil, 0); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for procState(t, rsPid) != 'T' {
		if time.Now().After(deadline) {
			t.Fatal("supervisor did not stop")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// A signal sent while the supervisor is stopped waits in the channel.
	if err := h.Signal(supervise.SignalTerminate); err != nil {
		t.Fatal(err)
	}
	if exited(h.ChildPidfd(), 300*time.Millisecond) {
		t.Fatal("child ended while its supervisor was stopped")
	}
	if err := unix.PidfdSendSignal(h.SupervisorPidfd(), unix.SIGCONT, nil, 0); err != nil {
		t.Fatal(err)
	}
	st, err := h.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if st.Signal != unix.SIGTERM {
		t.Fatalf("status = %v, want killed by SIGTERM", st)
	}
}

func TestSupervisorSigtermStopsChild(t *testing.T) {
	requirePidfs(t)
	h := launch(t, newSpec(t, "/bin/sleep", "60"), &recorder{})
	if err := unix.PidfdSendSignal(h.SupervisorPidfd(), unix.SIGTERM, nil, 0); err != nil {
		t.Fatal(err)
	}
	st, err := h.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if st.Signal != unix.SIGTERM {
		t.Fatalf("status = %v, want killed by SIGTERM", st)
	}
}

func TestStdioAndSession(t *testing.T) {
	requirePidfs(t)
	spec := newSpec(t, "/bin/sh", "-c", "echo hello; exec /bin/cat /proc/self/stat")
	h := launch(t, spec, &recorder{})
	if _, err := h.Wait(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(spec.Dir, "child.out"))
	if err != nil {
		t.Fatal(err)
	}
	first, stat, _ := strings.Cut(string(b), "\n")
	if first != "hello" {
		t.Fatalf("child stdout first line = %q", first)
	}
	// Fields after the command name: state ppid pgrp session tty_nr.
	f := strings.Fields(stat[strings.LastIndexByte(stat, ')')+1:])
	if f[3] != strconv.Itoa(int(h.Child.HostPID)) {
		t.Errorf("child session %s, want its own session %d", f[3], h.Child.HostPID)
	}
	if f[4] != "0" {
		t.Errorf("child tty_nr %s, want no controlling terminal", f[4])
	}
}

func TestExecFailure(t *testing.T) {
	requirePidfs(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := supervise.Launch(ctx, newSpec(t, "/nonexistent/program"), &recorder{})
	var re *supervise.RemoteError
	if !errors.As(err, &re) || re.Kind != supervise.ErrorExec {
		t.Fatalf("Launch error = %v, want an exec error report", err)
	}
	var se *supervise.StepError
	if !errors.As(err, &se) || se.Slot != hostid.SlotSandboxAttachedRunsc {
		t.Fatalf("Launch error = %v, want a StepError naming the slot", err)
	}
}

func TestHookFailureKillsChild(t *testing.T) {
	requirePidfs(t)
	spec := newSpec(t, "/bin/sh", "-c", `echo ran > "$LAZARET_TEST_DIR/ran"; exec /bin/sleep 30`)
	hookErr := errors.New("domain store write refused")
	childFd := -1
	rec := &recorder{on: map[string]func(hostid.StagedProcessOwnership) error{
		"StageChild": func(s hostid.StagedProcessOwnership) error {
			fd, err := hostid.OpenPidfd(int(s.Identity.HostPID))
			if err != nil {
				return err
			}
			childFd = fd
			return nil
		},
		"CommitChild": func(hostid.StagedProcessOwnership) error { return hookErr },
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := supervise.Launch(ctx, spec, rec)
	var se *supervise.StepError
	if !errors.Is(err, hookErr) || !errors.As(err, &se) || se.Step != "committing the child" {
		t.Fatalf("Launch error = %v, want the hook error at the commit step", err)
	}
	if childFd < 0 {
		t.Fatal("StageChild was not called")
	}
	defer unix.Close(childFd)
	if !exited(childFd, 5*time.Second) {
		t.Fatal("child survived the failed launch")
	}
	if _, err := os.Stat(filepath.Join(spec.Dir, "ran")); err == nil {
		t.Fatal("child ran although its ownership was never committed")
	}
}

func TestBadAcknowledgment(t *testing.T) {
	requirePidfs(t)
	cases := []struct {
		name   string
		mutate func(*hostid.ProcessOwnershipCommitAck)
		kind   supervise.ErrorKind
	}{
		{"slot", func(a *hostid.ProcessOwnershipCommitAck) { a.Committed.Slot = hostid.SlotNetworkRuntimeSupervisor }, supervise.ErrorAck},
		{"identity", func(a *hostid.ProcessOwnershipCommitAck) { a.Committed.Identity.StartTimeTicks++ }, supervise.ErrorAck},
		{"generation", func(a *hostid.ProcessOwnershipCommitAck) { a.Committed.GenerationID[0] ^= 1 }, supervise.ErrorAck},
		{"coordinator", func(a *hostid.ProcessOwnershipCommitAck) { a.Committed.CoordinatorID[0] ^= 1 }, supervise.ErrorAck},
		{"unknown version", func(a *hostid.ProcessOwnershipCommitAck) { a.Version = 2 }, supervise.ErrorProtocol},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := startRaw(t, "/bin/sh", "-c", `echo ran > "$LAZARET_TEST_DIR/ran"; exec /bin/sleep 30`)
			staged := r.handshake(t)
			childFd, err := hostid.OpenPidfd(int(staged.Identity.HostPID))
			if err != nil {
				t.Fatal(err)
			}
			defer unix.Close(childFd)
			ack := hostid.ProcessOwnershipCommitAck{Version: hostid.V1, Committed: staged}
			tc.mutate(&ack)
			r.send(t, &supervise.CommitAck{Ack: ack})
			e, ok := r.recv(t).(*supervise.Error)
			if !ok || e.Kind != tc.kind {
				t.Fatalf("report = %#v, want an Error of kind %v", e, tc.kind)
			}
			x, ok := r.recv(t).(*supervise.Exited)
			if !ok || x.Status.Signal != unix.SIGKILL {
				t.Fatalf("report = %#v, want Exited by SIGKILL", x)
			}
			if !exited(childFd, 5*time.Second) {
				t.Fatal("child survived a rejected acknowledgment")
			}
			if code := r.exitCode(t); code == 0 {
				t.Fatal("supervisor exited 0 after a rejected acknowledgment")
			}
			if _, err := os.Stat(filepath.Join(filepath.Dir(r.log), "ran")); err == nil {
				t.Fatal("child ran without a valid acknowledgment")
			}
		})
	}
}

func TestChannelClosedBeforeCommit(t *testing.T) {
	requirePidfs(t)
	r := startRaw(t, "/bin/sh", "-c", `echo ran > "$LAZARET_TEST_DIR/ran"; exec /bin/sleep 30`)
	staged := r.handshake(t)
	childFd, err := hostid.OpenPidfd(int(staged.Identity.HostPID))
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(childFd)
	r.conn.Close()
	if !exited(childFd, 5*time.Second) {
		t.Fatal("child survived the loss of the channel before its commit")
	}
	if code := r.exitCode(t); code == 0 {
		t.Fatal("supervisor exited 0")
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(r.log), "ran")); err == nil {
		t.Fatal("child ran without a commit")
	}
}

func TestBadSupervisorAcknowledgment(t *testing.T) {
	requirePidfs(t)
	r := startRaw(t, "/bin/sleep", "30")
	r.send(t, &r.hello)
	armed, ok := r.recv(t).(*supervise.Armed)
	if !ok {
		t.Fatal("first report is not Armed")
	}
	rs := r.hello.StagedFor(r.hello.SupervisorSlot, armed.Supervisor)
	rs.Identity.HostPID++
	r.send(t, &supervise.Start{Supervisor: hostid.ProcessOwnershipCommitAck{Version: hostid.V1, Committed: rs}})
	if e, ok := r.recv(t).(*supervise.Error); !ok || e.Kind != supervise.ErrorAck {
		t.Fatalf("report = %#v, want an ack Error", e)
	}
	if code := r.exitCode(t); code == 0 {
		t.Fatal("supervisor exited 0")
	}
}

func TestDuplicateAcknowledgmentAfterCommit(t *testing.T) {
	requirePidfs(t)
	r := startRaw(t, "/bin/sleep", "30")
	staged := r.handshake(t)
	ack := &supervise.CommitAck{Ack: hostid.ProcessOwnershipCommitAck{Version: hostid.V1, Committed: staged}}
	r.send(t, ack)
	if _, ok := r.recv(t).(*supervise.Running); !ok {
		t.Fatal("report after the commit is not Running")
	}
	r.send(t, ack)
	if e, ok := r.recv(t).(*supervise.Error); !ok || e.Kind != supervise.ErrorAck || !strings.Contains(e.Message, "already released") {
		t.Fatalf("report = %#v, want a duplicate-ack Error", e)
	}
	// The committed child keeps running.
	childFd, err := hostid.OpenPidfd(int(staged.Identity.HostPID))
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(childFd)
	if exited(childFd, 200*time.Millisecond) {
		t.Fatal("a duplicate acknowledgment ended the committed child")
	}
	r.send(t, &supervise.Stop{Grace: 0})
	if x, ok := r.recv(t).(*supervise.Exited); !ok || !x.Status.Signaled() {
		t.Fatalf("report = %#v, want Exited by a signal", x)
	}
}

func TestCommandLine(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"no channel", []string{"run", "--slot", "SandboxAttachedRunsc", "--", "/bin/true"}, "no generation channel on fd 3"},
		{"bad slot", []string{"run", "--slot", "Sandbox", "--", "/bin/true"}, `slot "Sandbox"`},
		{"relative program", []string{"run", "--slot", "SandboxAttachedRunsc", "--", "true"}, "absolute"},
		{"no program", []string{"run", "--slot", "SandboxAttachedRunsc"}, "absolute"},
		{"gate by hand", []string{"gate", "--", "/bin/true"}, "gate descriptors"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(supervisorPath, tc.args...)
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() == 0 {
				t.Fatalf("exit = %v, want a failure", err)
			}
			if !strings.Contains(string(out), tc.want) {
				t.Fatalf("output %q does not mention %q", out, tc.want)
			}
		})
	}
}

func TestKillSupervisorAtGate(t *testing.T) {
	requirePidfs(t)
	r := startRaw(t, "/bin/sh", "-c", `echo ran > "$LAZARET_TEST_DIR/ran"; exec /bin/sleep 30`)
	staged := r.handshake(t)
	childFd, err := hostid.OpenPidfd(int(staged.Identity.HostPID))
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(childFd)
	if err := r.cmd.Process.Signal(unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if !exited(childFd, 5*time.Second) {
		t.Fatal("gated child survived kill -9 of its supervisor")
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(r.log), "ran")); err == nil {
		t.Fatal("child ran without a commit")
	}
}
