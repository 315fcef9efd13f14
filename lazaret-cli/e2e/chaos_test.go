//go:build e2e

package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"lazaret.dev/pkg/testproc"
)

// victimPID finds the process named name of the test's current
// generation: its coordinator (serve with the test's configuration) or a
// process below it; for lazaret-supervisor, the sandbox's.
func (s *sandbox) victimPID(name string) (int, bool) {
	ps := testproc.List()
	hc := 0
	for _, p := range ps {
		if len(p.Argv) > 1 && filepath.Base(p.Argv[0]) == "lazaret-coordinator" && p.Argv[1] == "serve" &&
			strings.Contains(strings.Join(p.Argv, " "), s.config) {
			hc = p.PID
		}
	}
	if hc == 0 {
		return 0, false
	}
	if name == "lazaret-coordinator" {
		return hc, true
	}
	parent := map[int]int{}
	for _, p := range ps {
		parent[p.PID] = p.PPID
	}
	for _, p := range ps {
		if filepath.Base(p.Argv[0]) != name {
			continue
		}
		if name == "lazaret-supervisor" && !strings.Contains(strings.Join(p.Argv, " "), "SandboxAttachedRunsc") {
			continue
		}
		if name == "runsc" && (len(p.Argv) < 2 || !strings.Contains(strings.Join(p.Argv, " "), " run ")) {
			continue
		}
		for q, i := p.PID, 0; i < 64 && q > 1; i++ {
			if q = parent[q]; q == hc {
				return p.PID, true
			}
		}
	}
	return 0, false
}

// TestChaosTerminalsAndFaults runs four terminals that start, join and
// leave the Domain over and over while its processes are killed one after
// the other: the coordinator, the attached runsc, the State Anchor, the
// Runtime Supervisor and the network sidecar. A command that a fault
// interrupts fails with an error; every later one starts or joins a
// working generation; the persistent directory and the workspace keep
// what was written before; the traces of every coordinator are behaviours
// of the model; and nothing of the Domain is left when it is over.
func TestChaosTerminalsAndFaults(t *testing.T) {
	s := newSandbox(t)
	if err := os.WriteFile(filepath.Join(s.workspace, "kept.txt"), []byte("tracked-kept\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := s.exec("sh", "-c", "echo kept > /root/kept"); code != 0 {
		t.Fatalf("seeding: code %d: %s", code, errOut)
	}

	const terminals = 4
	var (
		mu       sync.Mutex
		ok, bad  int
		problems []string
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range terminals {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				args := []string{"exec", "--profile", "dev", "--workspace", s.workspace, "--config", s.config, "--linger", "1s", "--",
					"sh", "-c", "cat /root/kept /workspace/kept.txt; sleep 0." + strconv.Itoa((i+n)%4)}
				cmd := exec.Command(filepath.Join(binDir(t), "lazaret-cli"), args...)
				cmd.Env = append(os.Environ(), s.env...)
				var stdout, stderr bytes.Buffer
				cmd.Stdout, cmd.Stderr = &stdout, &stderr
				err := cmd.Run()
				mu.Lock()
				switch {
				case err == nil && stdout.String() == "kept\ntracked-kept\n":
					ok++
				case err == nil:
					problems = append(problems, "exit 0 with stdout "+strconv.Quote(stdout.String()))
				case strings.TrimSpace(stderr.String()) == "":
					problems = append(problems, "failed ("+err.Error()+") without saying why")
				default:
					bad++
				}
				mu.Unlock()
			}
		}()
	}
	for _, name := range []string{"lazaret-coordinator", "runsc", "lazaret-anchor", "lazaret-supervisor", "lazaret-netsidecar"} {
		time.Sleep(4 * time.Second)
		deadline := time.Now().Add(20 * time.Second)
		for {
			if pid, found := s.victimPID(name); found {
				if err := syscall.Kill(pid, syscall.SIGKILL); err == nil {
					t.Logf("killed %s (pid %d)", name, pid)
					break
				}
			}
			if time.Now().After(deadline) {
				t.Errorf("no %s of the Domain appeared within 20 s", name)
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	time.Sleep(4 * time.Second)
	close(stop)
	wg.Wait()
	t.Logf("%d commands succeeded, %d failed with an error", ok, bad)
	for _, p := range problems {
		t.Errorf("a terminal's command: %s", p)
	}
	if ok == 0 {
		t.Errorf("no command succeeded")
	}
	// After the chaos, the Domain serves again with the data intact.
	out, errOut, code := s.exec("sh", "-c", "cat /root/kept /workspace/kept.txt")
	if code != 0 || out != "kept\ntracked-kept\n" {
		t.Fatalf("after the faults: code %d stdout %q stderr %q", code, out, errOut)
	}
	s.waitTeardown()
	for _, d := range s.status().Domains {
		if len(d.Generations) != 0 || d.Published != nil {
			t.Errorf("Domain %s still records %d generations (published %v)", d.DomainID, len(d.Generations), d.Published != nil)
		}
	}
	for _, p := range testproc.List() {
		if strings.Contains(strings.Join(p.Argv, " "), s.home) {
			t.Errorf("process %d still runs: %q", p.PID, p.Argv)
		}
	}
	if b, err := os.ReadFile("/proc/self/mountinfo"); err == nil && bytes.Contains(b, []byte(s.home)) {
		t.Errorf("the host mount table still mentions %s", s.home)
	}
	if t.Failed() {
		s.dumpLogs()
	}
}

// TestEscalationRuntimeLostDuringExecution kills the attached runsc while
// an approved host command runs for the guest: the model's
// HardLoseAttachedRunsc fails the request and the session. The host
// command is killed with its request, the terminal's CLI ends with the
// runtime-lost code and its terminal restored, and the next command gets
// a fresh generation. The trace, with the request in it, validates.
func TestEscalationRuntimeLostDuringExecution(t *testing.T) {
	s := escalationSandbox(t)
	a := s.terminal("a")
	a.ready()
	a.send(guestRun+" -- /usr/bin/sleep 31.5", "Enter")
	waitHostProcess(t, true, 60*time.Second, "/usr/bin/sleep", "31.5")
	pid, ok := s.victimPID("runsc")
	if !ok {
		t.Fatalf("no attached runsc of the Domain")
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitHostProcess(t, false, 30*time.Second, "/usr/bin/sleep", "31.5")
	a.finish("124")
	if out, errOut, code := s.exec("/bin/echo", "fresh"); code != 0 || out != "fresh\n" {
		t.Fatalf("the next command: code %d stdout %q stderr %q", code, out, errOut)
	}
}
