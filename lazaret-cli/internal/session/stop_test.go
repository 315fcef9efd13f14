package session

import (
	"context"
	"crypto/rand"
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"lazaret.dev/pkg/ids"
)

func TestDecideStop(t *testing.T) {
	cases := []struct {
		name string
		held bool
		pids []int
		want stopAction
	}{
		{"free", false, nil, stopNothing},
		{"free with a stale candidate", false, []int{7}, stopNothing},
		{"held by one coordinator", true, []int{7}, stopSignal},
		{"held by the spawning CLI only", true, nil, stopWait},
		{"held by a coordinator and its forked child", true, []int{7, 8}, stopWait},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := decideStop(tc.held, tc.pids); got != tc.want {
				t.Errorf("decideStop(%v, %v) = %v, want %v", tc.held, tc.pids, got, tc.want)
			}
		})
	}
}

func TestStopTimeoutError(t *testing.T) {
	cases := []struct {
		name string
		err  *StopTimeoutError
		want []string
	}{
		{"signalled", &StopTimeoutError{Timeout: time.Second, PID: 4242, Log: "/r/coordinator.log", Lock: "/r/lock"}, []string{"pid 4242", "/r/coordinator.log", "SIGTERM", "1s"}},
		{"no coordinator", &StopTimeoutError{Timeout: time.Second, Log: "/r/coordinator.log", Lock: "/r/lock"}, []string{"no lazaret-coordinator", "/r/lock", "/r/coordinator.log"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if !errors.Is(tc.err, ErrStopTimeout) {
				t.Errorf("%v is not ErrStopTimeout", tc.err)
			}
			for _, w := range tc.want {
				if !strings.Contains(tc.err.Error(), w) {
					t.Errorf("%q lacks %q", tc.err.Error(), w)
				}
			}
		})
	}
}

// stopTarget is a Domain under a temporary runtime root.
func stopTarget(t *testing.T) *Target {
	t.Helper()
	var domain ids.DomainID
	if _, err := rand.Read(domain[:]); err != nil {
		t.Fatal(err)
	}
	tg := &Target{RuntimeRoot: t.TempDir(), StorageRoot: t.TempDir(), DomainID: domain, Profile: "dev"}
	if err := domainDir(tg.Paths().Dir); err != nil {
		t.Fatal(err)
	}
	return tg
}

// holdLock starts argv with the Domain lock, flocked, as fd 3 and leaves
// it the only holder. The process is killed at the end of the test.
func holdLock(t *testing.T, tg *Target, argv ...string) *exec.Cmd {
	t.Helper()
	l, err := OpenLock(tg.LockPath())
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := l.TryLock(); !ok || err != nil {
		t.Fatalf("taking the lock: %v %v", ok, err)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.ExtraFiles = []*os.File{l.File()}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	l.Close()
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() { cmd.Process.Kill(); <-done })
	return cmd
}

func alive(pid int) bool { return unix.Kill(pid, 0) == nil }

func TestStopper(t *testing.T) {
	cases := []struct {
		name string
		// setup returns the process Holders reports (0 for none) and
		// whether that process holds the lock.
		setup       func(t *testing.T, tg *Target) *exec.Cmd
		live        string
		wantRunning bool
		wantTimeout bool
		wantSignal  bool // the reported process got SIGTERM
	}{
		{
			name:  "no lock file",
			setup: func(t *testing.T, tg *Target) *exec.Cmd { return nil },
		},
		{
			name: "lock free",
			setup: func(t *testing.T, tg *Target) *exec.Cmd {
				l, err := OpenLock(tg.LockPath())
				if err != nil {
					t.Fatal(err)
				}
				l.Close()
				return nil
			},
		},
		{
			name:        "coordinator ends on SIGTERM",
			setup:       func(t *testing.T, tg *Target) *exec.Cmd { return holdLock(t, tg, "/bin/sleep", "60") },
			wantRunning: true, wantSignal: true,
		},
		{
			name:        "coordinator ends but leaves records",
			setup:       func(t *testing.T, tg *Target) *exec.Cmd { return holdLock(t, tg, "/bin/sleep", "60") },
			live:        "participant Sandbox of generation 00 in state Committed",
			wantRunning: true, wantSignal: true,
		},
		{
			name: "coordinator ignores SIGTERM",
			setup: func(t *testing.T, tg *Target) *exec.Cmd {
				return holdLock(t, tg, "/bin/sh", "-c", "trap '' TERM; exec /bin/sleep 60")
			},
			wantTimeout: true, wantSignal: true,
		},
		{
			name: "candidate does not hold the lock",
			setup: func(t *testing.T, tg *Target) *exec.Cmd {
				holdLock(t, tg, "/bin/sleep", "60")
				other := exec.Command("/bin/sleep", "60")
				if err := other.Start(); err != nil {
					t.Fatal(err)
				}
				done := make(chan struct{})
				go func() { other.Wait(); close(done) }()
				t.Cleanup(func() { other.Process.Kill(); <-done })
				return other
			},
			wantTimeout: true,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tg := stopTarget(t)
			cmd := tc.setup(t, tg)
			pid := 0
			if cmd != nil {
				pid = cmd.Process.Pid
				// The shell needs a moment to install its trap.
				time.Sleep(100 * time.Millisecond)
			}
			s := &Stopper{
				Holders: func(dev, ino uint64) []int {
					if pid == 0 {
						return nil
					}
					return []int{pid}
				},
				Holds: hasDescriptorOn,
				Live:  func(*Target) (string, error) { return tc.live, nil },
				Poll:  10 * time.Millisecond,
			}
			res, err := s.Stop(context.Background(), tg, 500*time.Millisecond)
			var te *StopTimeoutError
			switch {
			case tc.wantTimeout:
				if !errors.As(err, &te) {
					t.Fatalf("Stop: %v, want a StopTimeoutError", err)
				}
				if te.Log != tg.LogPath() || te.Lock != tg.LockPath() {
					t.Errorf("timeout error names %q and %q", te.Log, te.Lock)
				}
				if want := map[bool]int{true: pid, false: 0}[tc.wantSignal]; te.PID != want {
					t.Errorf("timeout error names pid %d, want %d", te.PID, want)
				}
				if !alive(pid) {
					t.Errorf("pid %d was killed", pid)
				}
				return
			case err != nil:
				t.Fatalf("Stop: %v", err)
			}
			if res.Running != tc.wantRunning {
				t.Fatalf("Running = %v, want %v", res.Running, tc.wantRunning)
			}
			if !tc.wantRunning {
				return
			}
			if res.PID != pid || res.Identity.HostPID != uint32(pid) {
				t.Errorf("PID %d (identity %v), want %d", res.PID, res.Identity, pid)
			}
			if res.Leftover != tc.live {
				t.Errorf("Leftover %q, want %q", res.Leftover, tc.live)
			}
			held, err := lockFree(tg)
			if err != nil || held {
				t.Errorf("lock still held after Stop (%v)", err)
			}
			if tc.wantSignal {
				deadline := time.Now().Add(5 * time.Second)
				for cmd.ProcessState == nil && time.Now().Before(deadline) {
					time.Sleep(10 * time.Millisecond)
				}
				if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGTERM {
					t.Errorf("holder ended with %v, want SIGTERM", cmd.ProcessState)
				}
			}
		})
	}
}

// lockFree reports whether the Domain lock is held by anyone.
func lockFree(tg *Target) (bool, error) {
	f, err := openExistingLock(tg.LockPath())
	if err != nil {
		return false, err
	}
	defer f.Close()
	return lockHeld(f)
}

func TestStopperCanceled(t *testing.T) {
	tg := stopTarget(t)
	holdLock(t, tg, "/bin/sleep", "60")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s := &Stopper{Holders: func(uint64, uint64) []int { return nil }, Holds: hasDescriptorOn}
	if _, err := s.Stop(ctx, tg, time.Minute); !errors.Is(err, context.Canceled) {
		t.Fatalf("Stop with a canceled context: %v", err)
	}
}
