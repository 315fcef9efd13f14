//go:build e2e

package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// sessionArgs is a start or exec command line of the sandbox's Domain
// with an explicit linger.
func (s *sandbox) sessionArgs(cmd, linger string, argv ...string) []string {
	args := []string{cmd, "--profile", "dev", "--workspace", s.workspace, "--config", s.config, "--linger", linger}
	if len(argv) > 0 {
		args = append(append(args, "--"), argv...)
	}
	return args
}

func (s *sandbox) stop(extra ...string) (string, string, int) {
	s.t.Helper()
	return s.cli(append([]string{"stop", "--profile", "dev", "--workspace", s.workspace, "--config", s.config}, extra...)...)
}

// domainLog is the Domain's coordinator.log (the sandbox has one Domain).
func (s *sandbox) domainLog() string {
	s.t.Helper()
	logs, _ := filepath.Glob(filepath.Join(s.home, "run", "lazaret", "domains", "*", "coordinator.log"))
	if len(logs) != 1 {
		s.t.Fatalf("found %d coordinator logs, want 1: %v", len(logs), logs)
	}
	b, err := os.ReadFile(logs[0])
	if err != nil {
		s.t.Fatal(err)
	}
	return string(b)
}

// checkNothingRuns checks that no process mentions the sandbox's runtime
// or storage roots, that the host mount table does not, and that no
// generation directory or publication is left.
func (s *sandbox) checkNothingRuns() {
	s.t.Helper()
	roots := []string{filepath.Join(s.home, "run"), filepath.Join(s.home, "data"), s.config}
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		s.t.Fatal(err)
	}
	for _, r := range roots {
		if bytes.Contains(mi, []byte(r)) {
			s.t.Errorf("the host mount table still mentions %q", r)
		}
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		for _, r := range roots {
			if bytes.Contains(b, []byte(r)) {
				s.t.Errorf("process %s still runs: %q", filepath.Dir(p), bytes.ReplaceAll(b, []byte{0}, []byte{' '}))
				break
			}
		}
	}
	dirs, _ := filepath.Glob(filepath.Join(s.home, "run", "lazaret", "domains", "*", "*"))
	for _, d := range dirs {
		switch filepath.Base(d) {
		case "lock", "coordinator.log":
		default:
			s.t.Errorf("left in the Domain's runtime directory: %s", d)
		}
	}
}

func TestStopEndsRunningGeneration(t *testing.T) {
	s := newSandbox(t)
	// Nothing started yet: stop has nothing to do and says so.
	out, errOut, code := s.stop()
	if code != 0 || !strings.HasPrefix(out, "no running generation") {
		t.Fatalf("stop of a cold Domain: code %d, stdout %q, stderr %q", code, out, errOut)
	}
	out, errOut, code = s.cli(s.sessionArgs("exec", "10m", "/bin/echo", "up")...)
	if code != 0 || out != "up\n" {
		s.dumpLogs()
		t.Fatalf("exec echo: code %d, stdout %q, stderr %q", code, out, errOut)
	}
	st := s.status()
	if len(st.Domains) != 1 || st.Domains[0].Published == nil || len(st.Domains[0].CoordinatorPIDs) != 1 {
		t.Fatalf("status of the running Domain: %+v", st)
	}
	first := st.Domains[0].Published.GenerationID
	hc := st.Domains[0].CoordinatorPIDs[0]

	// A session that is running when the stop comes ends as Terminated.
	busy := exec.Command(filepath.Join(binDir(t), "lazaret-cli"), s.sessionArgs("exec", "10m", "/bin/sleep", "100")...)
	busy.Env = append(os.Environ(), s.env...)
	var busyErr bytes.Buffer
	busy.Stderr = &busyErr
	if err := busy.Start(); err != nil {
		t.Fatal(err)
	}
	busyDone := make(chan int, 1)
	go func() {
		busy.Wait()
		busyDone <- busy.ProcessState.ExitCode()
	}()
	waitFor(t, 30*time.Second, "the sleep session to run", func() bool { return guestSleeps(s) })

	t0 := time.Now()
	out, errOut, code = s.stop()
	t.Logf("stop took %v: %s", time.Since(t0), strings.TrimSpace(out))
	if code != 0 || !strings.HasPrefix(out, "stopped generation "+first) || !strings.Contains(out, fmt.Sprintf("pid %d", hc)) {
		s.dumpLogs()
		t.Fatalf("stop: code %d, stdout %q, stderr %q", code, out, errOut)
	}
	select {
	case c := <-busyDone:
		if c != 137 {
			t.Errorf("the running session ended with %d, want 137 (Terminated); stderr %q", c, busyErr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the running session did not end after the stop")
	}
	if processLive(hc) {
		t.Errorf("coordinator pid %d still runs after stop", hc)
	}
	st = s.status()
	if d := st.Domains[0]; d.Lock != "free" || d.Published != nil || len(d.CoordinatorPIDs) != 0 {
		t.Errorf("status after stop: %+v", d)
	}
	log := s.domainLog()
	for _, want := range []string{`reason="stop requested"`, "generation ended"} {
		if !strings.Contains(log, want) {
			t.Errorf("coordinator.log lacks %q:\n%s", want, log)
		}
	}
	s.checkNothingRuns()

	// The next command starts a fresh generation.
	out, errOut, code = s.exec("/bin/echo", "again")
	if code != 0 || out != "again\n" {
		s.dumpLogs()
		t.Fatalf("exec after stop: code %d, stdout %q, stderr %q", code, out, errOut)
	}
	st = s.status()
	if p := st.Domains[0].Published; p == nil || p.GenerationID == first {
		t.Errorf("exec after stop did not run in a fresh generation: published %+v, first %s", p, first)
	}
	if out, errOut, code = s.stop(); code != 0 || !strings.HasPrefix(out, "stopped generation ") {
		t.Fatalf("second stop: code %d, stdout %q, stderr %q", code, out, errOut)
	}
	s.checkNothingRuns()
}

func TestStopRejectsBadTimeout(t *testing.T) {
	s := newSandbox(t)
	_, errOut, code := s.stop("--timeout", "0s")
	if code == 0 || !strings.Contains(errOut, "--timeout") {
		t.Fatalf("stop --timeout 0s: code %d, stderr %q", code, errOut)
	}
}

// processLive reports whether pid exists and is not a zombie waiting for
// its reaper.
func processLive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i < 0 || i+2 >= len(b) || (b[i+2] != 'Z' && b[i+2] != 'X')
}

func waitFor(t *testing.T, timeout time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// paneSize is the tmux pane's "ROWS COLUMNS", as stty size prints it.
func (tm *terminal) paneSize() string {
	return strings.TrimSpace(tm.tmux("-L", tm.socket, "display-message", "-p", "-t", tm.name, "#{pane_height} #{pane_width}"))
}

// waitPrompt waits until the last line on the screen is the shell's empty
// prompt, and a little longer: busybox's line editor asks the terminal
// for the cursor position when it starts a line, and keys typed before
// the answer arrives are read as part of it.
func (tm *terminal) waitPrompt() {
	tm.s.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		lines := strings.Split(strings.TrimRight(tm.screen(), "\n "), "\n")
		if strings.TrimSpace(lines[len(lines)-1]) == "/workspace #" {
			time.Sleep(300 * time.Millisecond)
			return
		}
		if time.Now().After(deadline) {
			tm.s.t.Fatalf("terminal %s shows no prompt; screen:\n%s", tm.name, tm.screen())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestStartResizeAndInterrupt(t *testing.T) {
	s := newSandbox(t)
	a := s.terminal("a")
	a.send("echo ready-$((6*7))", "Enter")
	a.waitScreen("\nready-42", 90*time.Second)
	a.waitPrompt()

	initial := a.paneSize()
	a.send("echo S-$(stty size)-E", "Enter")
	a.waitScreen("S-"+initial+"-E", 30*time.Second)
	a.waitPrompt()

	a.tmux("-L", a.socket, "resize-window", "-t", a.name, "-x", "100", "-y", "30")
	resized := a.paneSize()
	if resized == initial {
		t.Fatalf("tmux resize-window left the pane at %s", resized)
	}
	a.send("echo R-$(stty size)-E", "Enter")
	a.waitScreen("R-"+resized+"-E", 30*time.Second)
	a.waitPrompt()

	// Ctrl-C reaches the foreground process in the sandbox: sleep dies by
	// SIGINT, the shell stays and reports 128+2.
	a.send("sleep 100", "Enter")
	waitFor(t, 30*time.Second, "sleep 100 in the sandbox", func() bool { return guestSleeps(s) })
	t0 := time.Now()
	a.send("C-c")
	a.waitPrompt()
	a.send("echo rc=$?", "Enter")
	a.waitScreen("\nrc=130", 30*time.Second)
	if d := time.Since(t0); d > 20*time.Second {
		t.Errorf("the prompt came back %v after Ctrl-C", d)
	}
	a.waitPrompt()
	a.send("exit 0", "Enter")
	a.finish("0")
}

// guestSleeps reports whether the sandbox runs sleep 100: processes in the
// sandbox are not host processes, so the test asks through a second
// session.
func guestSleeps(s *sandbox) bool {
	out, _, code := s.exec("/bin/sh", "-c", "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline; echo; done")
	return code == 0 && strings.Contains(out, "sleep 100")
}

func TestConcurrentColdExecStartsOneGeneration(t *testing.T) {
	s := newSandbox(t)
	const n = 20
	type result struct {
		stdout, stderr string
		code           int
		err            error
	}
	results := make([]result, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.Command(filepath.Join(binDir(t), "lazaret-cli"), s.sessionArgs("exec", "60s", "/bin/echo", strconv.Itoa(i))...)
			cmd.Env = append(os.Environ(), s.env...)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			<-start
			err := cmd.Run()
			r := result{stdout: stdout.String(), stderr: stderr.String()}
			if ee, ok := err.(*exec.ExitError); ok {
				r.code = ee.ExitCode()
			} else {
				r.err = err
			}
			results[i] = r
		}()
	}
	t0 := time.Now()
	close(start)
	wg.Wait()
	t.Logf("%d concurrent exec commands finished in %v", n, time.Since(t0))
	failed := false
	for i, r := range results {
		if r.err != nil || r.code != 0 || r.stdout != fmt.Sprintf("%d\n", i) {
			failed = true
			t.Errorf("exec %d: err %v, code %d, stdout %q, stderr %q", i, r.err, r.code, r.stdout, r.stderr)
		}
	}
	log := s.domainLog()
	if got := strings.Count(log, "generation starting"); got != 1 {
		failed = true
		t.Errorf("coordinator.log shows %d generations starting, want 1", got)
	}
	if got := strings.Count(log, "generation ready"); got != 1 {
		failed = true
		t.Errorf("coordinator.log shows %d generations ready, want 1", got)
	}
	if failed {
		s.dumpLogs()
	}
	if out, errOut, code := s.stop(); code != 0 || !strings.HasPrefix(out, "stopped generation ") {
		t.Fatalf("stop: code %d, stdout %q, stderr %q", code, out, errOut)
	}
	s.checkNothingRuns()
}

func TestStopDuringStart(t *testing.T) {
	s := newSandbox(t)
	// The command outlasts the stop: with a bare echo, a quick host ran
	// the whole generation, start to end, between the status that saw
	// its coordinator and the stop, which then found nothing to stop.
	cmd := exec.Command(filepath.Join(binDir(t), "lazaret-cli"), s.sessionArgs("exec", "0s", "/bin/sh", "-c", "echo late; sleep 5")...)
	cmd.Env = append(os.Environ(), s.env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "a coordinator to hold the Domain lock", func() bool {
		st := s.status()
		return len(st.Domains) == 1 && len(st.Domains[0].CoordinatorPIDs) == 1
	})
	out, errOut, code := s.stop()
	t.Logf("stop during start: code %d, stdout %q, stderr %q", code, out, errOut)
	if code != 0 || !strings.HasPrefix(out, "stopped ") {
		s.dumpLogs()
		t.Fatalf("stop during start: code %d, stdout %q, stderr %q", code, out, errOut)
	}
	cmd.Wait()
	// The starting command either reports the failed start, or, when the
	// generation got to Ready before the signal, finds the lock free after
	// the teardown and starts a fresh generation, or, when its session had
	// already started in the stopped generation, reports that the stop
	// killed it (the stop ends every session of the generation).
	switch c := cmd.ProcessState.ExitCode(); {
	case c == 125 && strings.Contains(stderr.String(), "coordinator"):
		t.Logf("the starting command failed: %s", strings.TrimSpace(stderr.String()))
	case c == 0 && stdout.String() == "late\n":
		t.Logf("the starting command ran in a fresh generation")
	case c == 137 && strings.Contains(stderr.String(), "killed by a signal") &&
		(stdout.String() == "" || stdout.String() == "late\n"):
		t.Logf("the stop ended the starting command's session: %s", strings.TrimSpace(stderr.String()))
	default:
		s.dumpLogs()
		t.Fatalf("the starting command: code %d, stdout %q, stderr %q", c, stdout.String(), stderr.String())
	}
	if out, errOut, code := s.stop(); code != 0 {
		t.Fatalf("final stop: code %d, stdout %q, stderr %q", code, out, errOut)
	}
	s.checkNothingRuns()
}
