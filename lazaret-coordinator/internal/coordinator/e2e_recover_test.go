package coordinator

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// startKilled spawns a coordinator as start does and kills it with
// SIGKILL as soon as its start report shows the line at; "teardown" waits
// for ready, asks it to stop and kills it 300 ms into the teardown. It
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
		cmd.Process.Signal(syscall.SIGTERM)
		time.Sleep(300 * time.Millisecond)
	}
	cmd.Process.Kill()
	cmd.Wait()
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
	h := e.start(t, time.Minute)
	c, session := e.client(t)
	if _, errs, x := execute(t, c, session(), "sh", "-c", "echo kept > /home/agent/kept && echo tracked-kept > /workspace/kept.txt"); code(x) != 0 {
		t.Fatalf("seeding: %s %+v", errs, x)
	}
	c.Close()
	h.cmd.Process.Signal(syscall.SIGTERM)
	<-h.done

	for _, at := range []string{"step anchor", "step network", "step sandbox", "ready", "teardown"} {
		t.Run("killed at "+at, func(t *testing.T) {
			e.startKilled(t, at)
			before := strings.Count(e.log(t), `msg="recovered a generation"`)
			h := e.start(t, time.Minute)
			if got := strings.Count(e.log(t), `msg="recovered a generation"`); got != before+1 {
				t.Fatalf("the next start recovered %d generations, want 1\n%s", got-before, e.log(t))
			}
			c, session := e.client(t)
			out, errs, x := execute(t, c, session(), "cat", "/home/agent/kept", "/workspace/kept.txt")
			if code(x) != 0 || out != "kept\ntracked-kept\n" {
				t.Fatalf("after recovery: stdout %q stderr %q exit %+v", out, errs, x)
			}
			c.Close()
			h.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-h.done:
			case <-time.After(60 * time.Second):
				t.Fatalf("the recovered Domain's coordinator did not stop\n%s", e.log(t))
			}
			checkNothingLeft(t, e)
		})
	}
	if b, err := os.ReadFile(filepath.Join(e.workspace, "kept.txt")); err != nil || string(b) != "tracked-kept\n" {
		t.Fatalf("the host workspace file: %q, %v", b, err)
	}
}
