package coordinator

import (
	"os/exec"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// alive reports whether the process behind pidfd exists; a zombie does.
func alive(pidfd int) bool { return unix.PidfdSendSignal(pidfd, 0, nil, 0) == nil }

// TestExitedWithinZombie: a process that exited but was not reaped (the
// attached runsc after its supervisor was killed, until init reaps it)
// still accepts signal 0, so only its readable pidfd proves the exit.
func TestExitedWithinZombie(t *testing.T) {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep on PATH")
	}
	pidfd := -1
	cmd := exec.Command(sleep, "60")
	cmd.SysProcAttr = &syscall.SysProcAttr{PidFD: &pidfd}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer unix.Close(pidfd)
	if exitedWithin(pidfd, 50*time.Millisecond) {
		t.Fatal("exitedWithin reports a running process as exited")
	}
	if !alive(pidfd) {
		t.Fatal("alive reports a running process as gone")
	}
	if err := unix.PidfdSendSignal(pidfd, unix.SIGKILL, nil, 0); err != nil {
		t.Fatal(err)
	}
	if !exitedWithin(pidfd, 5*time.Second) {
		t.Fatal("exitedWithin does not report the killed, unreaped process as exited")
	}
	if !alive(pidfd) {
		t.Fatal("a zombie no longer accepts signal 0; exitedWithin's comment is out of date")
	}
	cmd.Wait()
	if alive(pidfd) {
		t.Fatal("alive reports a reaped process as existing")
	}
	if !exitedWithin(pidfd, 0) {
		t.Fatal("exitedWithin does not report a reaped process as exited")
	}
}

func TestDentriesFor(t *testing.T) {
	for _, tt := range []struct {
		hard uint64
		want int
	}{
		{0, 1000}, {1024, 1000}, {7096, 1000}, {7099, 1001}, {20000, 5301},
		{200701, 65535}, {524288, 65536}, {1 << 20, 65536}, {^uint64(0), 65536},
	} {
		if got := dentriesFor(tt.hard); got != tt.want {
			t.Errorf("dentriesFor(%d) = %d, want %d", tt.hard, got, tt.want)
		}
	}
}
