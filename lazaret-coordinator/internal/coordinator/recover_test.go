package coordinator

import (
	"io"
	"log/slog"
	"os/exec"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"lazaret.dev/pkg/hostid"
)

func TestKillRecordedMatchesExactIdentity(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	start := func() (*exec.Cmd, hostid.PidfsProcessIdentityV1) {
		cmd := exec.Command("sleep", "60")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		fd, err := hostid.OpenPidfd(cmd.Process.Pid)
		if err != nil {
			t.Skipf("pidfd: %v", err)
		}
		defer unix.Close(fd)
		id, err := hostid.IdentityOf(fd)
		if err != nil {
			t.Skipf("pidfs identity: %v", err)
		}
		return cmd, id
	}
	alive := func(cmd *exec.Cmd) bool { return unix.Kill(cmd.Process.Pid, 0) == nil && cmd.ProcessState == nil }

	t.Run("the recorded process is killed", func(t *testing.T) {
		cmd, id := start()
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		how, err := killRecorded(log, "test process", hostid.CommittedOwnership(id))
		if err != nil || !strings.Contains(how, "killed through a pidfd") {
			t.Fatalf("killRecorded = %q, %v", how, err)
		}
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("the recorded process still runs")
		}
	})
	t.Run("another process on the same pid is left alone", func(t *testing.T) {
		cmd, id := start()
		forged := id
		forged.Authority.PidfsInode++ // a pidfs identity the live process does not have
		how, err := killRecorded(log, "test process", hostid.CommittedOwnership(forged))
		if err != nil || !strings.Contains(how, "left alone") {
			t.Fatalf("killRecorded = %q, %v", how, err)
		}
		if !alive(cmd) {
			t.Fatal("a process whose identity differs from the record was killed")
		}
	})
	t.Run("an exited process", func(t *testing.T) {
		cmd, id := start()
		cmd.Process.Kill()
		cmd.Wait()
		how, err := killRecorded(log, "test process", hostid.CommittedOwnership(id))
		if err != nil || !strings.Contains(how, "exited") {
			t.Fatalf("killRecorded = %q, %v", how, err)
		}
	})
	t.Run("never started", func(t *testing.T) {
		how, err := killRecorded(log, "test process", hostid.PersistedHostProcessOwnership{})
		if err != nil || how != "never started" {
			t.Fatalf("killRecorded = %q, %v", how, err)
		}
	})
}
