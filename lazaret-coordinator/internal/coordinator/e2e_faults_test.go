package coordinator

import (
	"bufio"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"lazaret.dev/pkg/testproc"
)

// victim is a runtime process of a generation other than its coordinator,
// and how to find it under the coordinator.
type victim struct {
	name string
	find func(hcPID int) (int, bool)
	// later are the start steps after its own that the process lives
	// through.
	later []string
}

// descendant finds a process below root (root excluded) whose argv[0]
// ends in name and that match accepts.
func descendant(root int, name string, match func(testproc.Process) bool) (int, bool) {
	ps := testproc.List()
	parent := map[int]int{}
	for _, p := range ps {
		parent[p.PID] = p.PPID
	}
	below := func(pid int) bool {
		for i := 0; i < 64 && pid > 1; i++ {
			pid = parent[pid]
			if pid == root {
				return true
			}
		}
		return false
	}
	for _, p := range ps {
		if len(p.Argv) > 0 && filepath.Base(p.Argv[0]) == name && below(p.PID) && (match == nil || match(p)) {
			return p.PID, true
		}
	}
	return 0, false
}

// isSandboxSupervisor tells the sandbox's Runtime Supervisor from those of
// session exec clients.
func isSandboxSupervisor(p testproc.Process) bool {
	return strings.Contains(strings.Join(p.Argv, " "), "SandboxAttachedRunsc")
}

var runtimeVictims = []victim{
	// The trust anchor's step runs beside the lease, before the anchor
	// exists, and the network's beside the view's (plan.go, stepNeeds).
	{"lazaret-anchor", func(hc int) (int, bool) { return descendant(hc, "lazaret-anchor", nil) }, []string{"workspace", "network", "sandbox", "publish"}},
	{"lazaret-gitroute", func(hc int) (int, bool) { return descendant(hc, "lazaret-gitroute", nil) }, []string{"sandbox", "publish"}},
	{"lazaret-netsidecar", func(hc int) (int, bool) { return descendant(hc, "lazaret-netsidecar", nil) }, []string{"sandbox", "publish"}},
	{"slirp4netns", func(hc int) (int, bool) { return descendant(hc, "slirp4netns", nil) }, []string{"sandbox", "publish"}},
	{"lazaret-supervisor", func(hc int) (int, bool) {
		return descendant(hc, "lazaret-supervisor", isSandboxSupervisor)
	}, []string{"publish"}},
	{"runsc", func(hc int) (int, bool) {
		sup, ok := descendant(hc, "lazaret-supervisor", isSandboxSupervisor)
		if !ok {
			return 0, false
		}
		for _, p := range testproc.List() {
			if p.PPID == sup && len(p.Argv) > 0 && filepath.Base(p.Argv[0]) == "runsc" {
				return p.PID, true
			}
		}
		return 0, false
	}, []string{"publish"}},
}

// killDuringStart spawns a coordinator and kills v with SIGKILL while the
// start is still going on: as soon as it exists when step is "", else as
// soon as the report shows "step <step>" (the step began; steps overlap,
// so more lines may follow it at once). The coordinator must then fail
// the generation and exit.
func (e *env) killDuringStart(t *testing.T, v victim, step string) {
	t.Helper()
	cmd, lock, rr := e.spawn(t, time.Minute)
	lock.Close()
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	lines := make(chan string, 64)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(rr)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	var report []string
	deadline := time.Now().Add(90 * time.Second)
	began := false // the report showed "step <step>"
	for killed := false; !killed; {
		if step != "" && !began {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("the coordinator ended its report before step %s (report %q)\n%s", step, report, e.log(t))
				}
				report = append(report, l)
				began = l == "step "+step
				if l == "ready" {
					t.Fatalf("the start finished before step %s (report %q)", step, report)
				}
				continue
			case <-time.After(time.Until(deadline)):
				cmd.Process.Kill()
				t.Fatalf("the coordinator never reported step %s (report %q)\n%s", step, report, e.log(t))
			}
		}
		if step == "" {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("the coordinator ended its report before %s existed (report %q)\n%s", v.name, report, e.log(t))
				}
				report = append(report, l)
				if l == "ready" {
					t.Fatalf("the start finished before %s could be killed (report %q)", v.name, report)
				}
				continue
			default:
			}
		}
		if pid, ok := v.find(cmd.Process.Pid); ok {
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
				t.Fatalf("killing %s (pid %d): %v", v.name, pid, err)
			}
			killed = true
			t.Logf("killed %s (pid %d) during %q", v.name, pid, report[len(report)-1])
			break
		}
		if step != "" {
			cmd.Process.Kill()
			t.Fatalf("no %s at step %s (report %q)\n%s", v.name, step, report, e.log(t))
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("%s never appeared (report %q)\n%s", v.name, report, e.log(t))
		}
		time.Sleep(2 * time.Millisecond)
	}
	for l := range lines {
		report = append(report, l)
	}
	select {
	case <-done:
	case <-time.After(120 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("the coordinator still runs 120 s after %s was killed (report %q)\n%s", v.name, report, e.log(t))
	}
	// Either the start failed, or it completed and the generation failed
	// at once: both end in the coordinator's release of what it held.
	if !strings.Contains(e.log(t), `msg="generation failed"`) {
		t.Fatalf("the generation did not fail after %s was killed (report %q)\n%s", v.name, report, e.log(t))
	}
	t.Logf("report %q", report)
}

// seedKept writes a file to the persistent directory and one to the
// workspace in a generation of their own, which recoverAndCheck reads.
func (e *env) seedKept(t *testing.T) {
	t.Helper()
	h := e.start(t, time.Minute)
	c, session := e.client(t)
	if _, errs, x := execute(t, c, session(), "sh", "-c", "echo kept > /home/agent/kept && echo tracked-kept > /workspace/kept.txt"); code(x) != 0 {
		t.Fatalf("seeding: %s %+v", errs, x)
	}
	c.Close()
	h.cmd.Process.Signal(syscall.SIGTERM)
	<-h.done
}

// recoverAndCheck starts a fresh generation, which recovers whatever the
// failed one left, checks it serves what earlier generations wrote, stops
// it and scans the host for anything left.
func (e *env) recoverAndCheck(t *testing.T) {
	t.Helper()
	h := e.start(t, time.Minute)
	c, session := e.client(t)
	out, errs, x := execute(t, c, session(), "cat", "/home/agent/kept", "/workspace/kept.txt")
	if code(x) != 0 || out != "kept\ntracked-kept\n" {
		t.Fatalf("the next generation: stdout %q stderr %q exit %+v\n%s", out, errs, x, e.log(t))
	}
	c.Close()
	h.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-h.done:
	case <-time.After(60 * time.Second):
		t.Fatalf("the fresh generation's coordinator did not stop\n%s", e.log(t))
	}
	checkNothingLeft(t, e)
}

// TestServeEndToEndFaultInjection kills each runtime process other than
// the coordinator (whose kills TestServeEndToEndRecoveryAfterCoordinatorKilled
// covers) with SIGKILL as soon as it exists during the start, which is in
// the step that starts it (anchor, workspace, network, sandbox), then as
// soon as the coordinator reports each later start step, and again during
// teardown; steady-state kills are in
// TestServeEndToEndRuntimeFaultsInSteadyState and the tests of the view,
// the sidecar and the helper. Each time the coordinator fails the generation
// and releases it, the next start serves a fresh generation with the
// workspace and the persistent directory intact, and after it stops the
// host holds no process, mount, namespace, socket, nftables table, lock
// or generation directory of the Domain. Every coordinator's protocol
// trace is checked against the model when the test ends.
func TestServeEndToEndFaultInjection(t *testing.T) {
	if !enterInternet(t) {
		return
	}
	e := newEnv(t)
	e.gitWorkspace(t)
	e.seedKept(t)

	for _, v := range runtimeVictims {
		t.Run(v.name+" killed during start", func(t *testing.T) {
			e.killDuringStart(t, v, "")
			e.recoverAndCheck(t)
		})
		for _, step := range v.later {
			t.Run(v.name+" killed at step "+step, func(t *testing.T) {
				e.killDuringStart(t, v, step)
				e.recoverAndCheck(t)
			})
		}
		t.Run(v.name+" killed during teardown", func(t *testing.T) {
			h := e.start(t, time.Minute)
			pid, ok := v.find(h.cmd.Process.Pid)
			if !ok {
				t.Fatalf("no %s under the coordinator %d", v.name, h.cmd.Process.Pid)
			}
			h.cmd.Process.Signal(syscall.SIGTERM)
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
				t.Fatalf("killing %s (pid %d): %v", v.name, pid, err)
			}
			select {
			case <-h.done:
			case <-time.After(120 * time.Second):
				t.Fatalf("the coordinator still runs 120 s after %s was killed in its teardown\n%s", v.name, e.log(t))
			}
			t.Logf("coordinator ended: %v", h.err)
			e.recoverAndCheck(t)
		})
	}
}
