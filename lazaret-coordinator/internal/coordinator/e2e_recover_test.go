package coordinator

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"lazaret.dev/pkg/testproc"
)

// startKilled spawns a coordinator as start does and kills it with
// SIGKILL as soon as its start report shows the line at; "teardown" waits
// for ready, asks it to stop and kills it as soon as its log shows the
// generation Stopping. It
// returns once the killed process is reaped.
func (e *env) startKilled(t *testing.T, at string) {
	t.Helper()
	cmd, lock, rr := e.spawn(t, time.Minute)
	defer rr.Close()
	lock.Close()
	want := at
	if at == "teardown" {
		want = "ready"
	}
	var report []string
	sc := bufio.NewScanner(rr)
	for sc.Scan() {
		report = append(report, sc.Text())
		if sc.Text() == want {
			break
		}
	}
	if len(report) == 0 || report[len(report)-1] != want {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("the coordinator never reported %q (report %q)\n%s", want, report, e.log(t))
	}
	if at == "teardown" {
		// Killed as soon as the log shows the generation Stopping: a
		// fixed delay would let a fast teardown finish first.
		before := strings.Count(e.log(t), "phase=Stopping")
		cmd.Process.Signal(syscall.SIGTERM)
		for deadline := time.Now().Add(30 * time.Second); strings.Count(e.log(t), "phase=Stopping") == before; {
			if time.Now().After(deadline) {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatalf("the coordinator never recorded Stopping after SIGTERM\n%s", e.log(t))
			}
			time.Sleep(time.Millisecond)
		}
	}
	cmd.Process.Kill()
	cmd.Wait()
	if at == "teardown" {
		t.Logf("coordinator killed in its teardown, once Stopping was recorded")
		return
	}
	t.Logf("coordinator killed after %q", report[len(report)-1])
}

// TestServeEndToEndRecoveryAfterCoordinatorKilled kills the Host
// Coordinator with SIGKILL at start steps, in steady state and during
// teardown. Each time the next start recovers the generation it left from
// the Domain Store's records and serves a fresh one, the workspace and the
// persistent directory keep what earlier generations wrote, and after a
// clean stop the host holds no process, mount, socket, lock or generation
// directory of the Domain.
func TestServeEndToEndRecoveryAfterCoordinatorKilled(t *testing.T) {
	if !enterInternet(t) {
		return
	}
	e := newEnv(t)
	e.gitWorkspace(t)
	e.seedKept(t)
	for _, at := range []string{"step prepare", "step anchor", "step trust", "step workspace", "step network", "step sandbox", "step publish", "ready", "teardown"} {
		t.Run("killed at "+at, func(t *testing.T) {
			e.startKilled(t, at)
			before := strings.Count(e.log(t), `msg="recovered a generation"`)
			e.recoverAndCheck(t)
			if got := strings.Count(e.log(t), `msg="recovered a generation"`); got != before+1 {
				t.Fatalf("the next start recovered %d generations, want 1\n%s", got-before, e.log(t))
			}
		})
	}
	if b, err := os.ReadFile(filepath.Join(e.workspace, "kept.txt")); err != nil || string(b) != "tracked-kept\n" {
		t.Fatalf("the host workspace file: %q, %v", b, err)
	}
}

// childNamed is the coordinator's child whose argv[0] ends in name.
func childNamed(t *testing.T, hcPid int, name string) testproc.Process {
	t.Helper()
	for _, p := range testproc.List() {
		if p.PPID == hcPid && len(p.Argv) > 0 && filepath.Base(p.Argv[0]) == name {
			return p
		}
	}
	t.Fatalf("no child %s of the coordinator %d", name, hcPid)
	return testproc.Process{}
}

// TestServeEndToEndRuntimeFaultsInSteadyState: a runtime process stopped
// with SIGSTOP and continued is survived (each helper, the Runtime
// Supervisor, the attached runsc and the coordinator itself); the State Anchor or the attached
// runsc killed with SIGKILL fails the generation, which its coordinator
// releases completely, and the next start serves the data of earlier
// generations.
func TestServeEndToEndRuntimeFaultsInSteadyState(t *testing.T) {
	if !enterInternet(t) {
		return
	}
	e := newEnv(t)
	e.gitWorkspace(t)
	seed := e.start(t, time.Minute)
	c, session := e.client(t)
	if _, errs, x := execute(t, c, session(), "sh", "-c", "echo kept > /home/agent/kept"); code(x) != 0 {
		t.Fatalf("seeding: %s %+v", errs, x)
	}

	t.Run("SIGSTOP and SIGCONT", func(t *testing.T) {
		for _, name := range []string{"lazaret-anchor", "lazaret-gitroute", "lazaret-netsidecar", "slirp4netns",
			"lazaret-supervisor", "runsc", "lazaret-coordinator"} {
			var p testproc.Process
			switch name {
			case "lazaret-coordinator":
				p = testproc.Process{PID: seed.cmd.Process.Pid}
			case "lazaret-supervisor":
				p, _ = runtimeSupervisor(t, seed.cmd.Process.Pid)
			case "runsc":
				rs, _ := runtimeSupervisor(t, seed.cmd.Process.Pid)
				p = childNamed(t, rs.PID, "runsc")
			default:
				p = childNamed(t, seed.cmd.Process.Pid, name)
			}
			if err := syscall.Kill(p.PID, syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			time.Sleep(2 * time.Second)
			if err := syscall.Kill(p.PID, syscall.SIGCONT); err != nil {
				t.Fatal(err)
			}
			out, errs, x := execute(t, c, session(), "cat", "/home/agent/kept")
			if code(x) != 0 || out != "kept\n" {
				t.Fatalf("after stopping and continuing %s: stdout %q stderr %q exit %+v", name, out, errs, x)
			}
		}
		select {
		case <-seed.done:
			t.Fatalf("the coordinator exited after SIGSTOP/SIGCONT of its helpers: %v\n%s", seed.err, e.log(t))
		default:
		}
	})
	c.Close()
	seed.cmd.Process.Signal(syscall.SIGTERM)
	<-seed.done

	for _, victim := range []string{"lazaret-anchor", "runsc"} {
		t.Run("SIGKILL of "+victim, func(t *testing.T) {
			h := e.start(t, time.Minute)
			var pid int
			if victim == "runsc" {
				rs, _ := runtimeSupervisor(t, h.cmd.Process.Pid)
				pid = childNamed(t, rs.PID, "runsc").PID
			} else {
				pid = childNamed(t, h.cmd.Process.Pid, victim).PID
			}
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			select {
			case <-h.done:
			case <-time.After(120 * time.Second):
				t.Fatalf("the coordinator still runs 120 s after %s was killed\n%s", victim, e.log(t))
			}
			if h.err == nil || !strings.Contains(e.log(t), `msg="generation failed"`) {
				t.Fatalf("the generation did not fail after %s was killed: exit %v\n%s", victim, h.err, e.log(t))
			}
			checkNothingLeft(t, e)
			if t.Failed() {
				t.Logf("coordinator log:\n%s", e.log(t))
			}
			h2 := e.start(t, time.Minute)
			c2, session2 := e.client(t)
			out, errs, x := execute(t, c2, session2(), "cat", "/home/agent/kept")
			if code(x) != 0 || out != "kept\n" {
				t.Fatalf("the next generation: stdout %q stderr %q exit %+v", out, errs, x)
			}
			c2.Close()
			h2.cmd.Process.Signal(syscall.SIGTERM)
			<-h2.done
			checkNothingLeft(t, e)
		})
	}
}
