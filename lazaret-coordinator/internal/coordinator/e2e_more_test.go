package coordinator

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"lazaret.dev/pkg/domainstore"
	"lazaret.dev/pkg/protocol"
	"lazaret.dev/pkg/testproc"
)

// withVolumes adds a volumes list to the test profile of e's configuration
// and resolves it again.
func (e *env) withVolumes(t *testing.T, volumes string) {
	t.Helper()
	b, err := os.ReadFile(e.cfgFile)
	if err != nil {
		t.Fatal(err)
	}
	const anchor = "persistent_dirs = [\"/home/agent\"]\n"
	if !bytes.Contains(b, []byte(anchor)) {
		t.Fatalf("configuration %q has no %q line to add volumes after", e.cfgFile, strings.TrimSpace(anchor))
	}
	b = bytes.Replace(b, []byte(anchor), []byte(anchor+"volumes = "+volumes+"\n"), 1)
	if err := os.WriteFile(e.cfgFile, b, 0o600); err != nil {
		t.Fatal(err)
	}
	e.resolve(t)
}

func TestServeEndToEndVolumes(t *testing.T) {
	if !enterInternet(t) {
		return
	}
	e := newEnv(t)
	base := t.TempDir()
	roDir, rwDir := filepath.Join(base, "ro"), filepath.Join(base, "rw")
	for _, d := range []string{roDir, rwDir} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	roFile := filepath.Join(roDir, "f")
	if err := os.WriteFile(roFile, []byte("original\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e.withVolumes(t, fmt.Sprintf(`[
  { host = %q, container = "/home/agent/ro", kind = "directory", access = "read-only" },
  { host = %q, container = "/home/agent/rw", kind = "directory", access = "read-write" },
]`, roDir, rwDir))
	h := e.start(t, 2*time.Second)
	c, session := e.client(t)

	t.Run("read-only volume is readable", func(t *testing.T) {
		out, errs, x := execute(t, c, session(), "cat", "/home/agent/ro/f")
		if out != "original\n" || code(x) != 0 {
			t.Fatalf("cat: stdout %q stderr %q exit %+v", out, errs, x)
		}
	})
	refused := []struct {
		name string
		argv []string
	}{
		{"overwrite", []string{"/bin/sh", "-c", "echo changed > /home/agent/ro/f"}},
		{"append", []string{"/bin/sh", "-c", "echo more >> /home/agent/ro/f"}},
		{"create", []string{"/bin/sh", "-c", "echo new > /home/agent/ro/new"}},
		{"mkdir", []string{"mkdir", "/home/agent/ro/d"}},
		{"remove", []string{"rm", "-f", "/home/agent/ro/f"}},
		{"chmod", []string{"chmod", "0777", "/home/agent/ro/f"}},
	}
	for _, tc := range refused {
		t.Run("read-only volume refuses "+tc.name, func(t *testing.T) {
			_, errs, x := execute(t, c, session(), tc.argv...)
			if x.Outcome != protocol.ExitExited || x.ExitCode == nil || *x.ExitCode == 0 {
				t.Fatalf("%q inside the sandbox: exit %+v, want a non-zero exit (stderr %q)", tc.argv, x, errs)
			}
			t.Logf("%q: exit %d, stderr %q", tc.argv, *x.ExitCode, strings.TrimSpace(errs))
		})
	}
	t.Run("host side of the read-only volume unchanged", func(t *testing.T) {
		b, err := os.ReadFile(roFile)
		if err != nil || string(b) != "original\n" {
			t.Errorf("host %q = %q, %v; want %q", roFile, b, err, "original\n")
		}
		fi, err := os.Stat(roFile)
		if err != nil || fi.Mode().Perm() != 0o644 {
			t.Errorf("host %q mode %v, %v; want 0644", roFile, fi.Mode(), err)
		}
		list, err := os.ReadDir(roDir)
		if err != nil || len(list) != 1 {
			t.Errorf("host %q holds %v (%v); want only f", roDir, list, err)
		}
	})
	t.Run("read-write volume accepts writes", func(t *testing.T) {
		_, errs, x := execute(t, c, session(), "/bin/sh", "-c", "echo written > /home/agent/rw/w && mkdir /home/agent/rw/d && cat /home/agent/rw/w")
		if code(x) != 0 {
			t.Fatalf("write: exit %+v, stderr %q", x, errs)
		}
		b, err := os.ReadFile(filepath.Join(rwDir, "w"))
		if err != nil || string(b) != "written\n" {
			t.Fatalf("host %q = %q, %v; want %q", filepath.Join(rwDir, "w"), b, err, "written\n")
		}
		if fi, err := os.Stat(filepath.Join(rwDir, "d")); err != nil || !fi.IsDir() {
			t.Fatalf("host directory made inside the sandbox: %v", err)
		}
	})
	t.Run("host writes are visible inside", func(t *testing.T) {
		if err := os.WriteFile(filepath.Join(roDir, "later"), []byte("from host\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		out, errs, x := execute(t, c, session(), "cat", "/home/agent/ro/later")
		if out != "from host\n" || code(x) != 0 {
			t.Fatalf("cat: stdout %q stderr %q exit %+v", out, errs, x)
		}
	})
	c.Close()
	waitExit(t, e, h)
	checkNothingLeft(t, e)
}

// mentioning returns the processes one of whose arguments contains s.
func mentioning(s string) []testproc.Process {
	var out []testproc.Process
	for _, p := range testproc.List() {
		for _, a := range p.Argv {
			if strings.Contains(a, s) {
				out = append(out, p)
				break
			}
		}
	}
	return out
}

// runtimeSupervisor finds the HC's Runtime Supervisor child (the one
// running the attached runsc) and the runsc --root it names.
func runtimeSupervisor(t *testing.T, hcPID int) (testproc.Process, string) {
	t.Helper()
	for _, p := range testproc.List() {
		if p.PPID != hcPID || len(p.Argv) < 4 || filepath.Base(p.Argv[0]) != "lazaret-supervisor" || p.Argv[1] != "run" {
			continue
		}
		if !strings.Contains(strings.Join(p.Argv, " "), "SandboxAttachedRunsc") {
			continue
		}
		for _, a := range p.Argv {
			if root, ok := strings.CutPrefix(a, "--root="); ok {
				return p, root
			}
		}
		t.Fatalf("runtime supervisor %v names no runsc --root", p)
	}
	t.Fatalf("no runtime supervisor child of the coordinator (pid %d)", hcPID)
	return testproc.Process{}, ""
}

func TestServeEndToEndSupervisorKilled(t *testing.T) {
	if !enterInternet(t) {
		return
	}
	e := newEnv(t)
	h := e.start(t, time.Minute)
	c, session := e.client(t)
	if out, _, x := execute(t, c, session(), "echo", "up"); out != "up\n" || code(x) != 0 {
		t.Fatalf("echo up: %q %+v", out, x)
	}

	// A command still running when the runtime goes away.
	c2, session2 := e.client(t)
	b2 := session2()
	type result struct {
		exit protocol.SessionExit
		err  error
	}
	running := make(chan result, 1)
	go func() {
		var out, errb bytes.Buffer
		x, err := c2.Execute(context.Background(), b2.SessionID, []string{"sleep", "600"}, &out, &errb)
		running <- result{x, err}
	}()

	rs, root := runtimeSupervisor(t, h.cmd.Process.Pid)
	t.Logf("runtime supervisor %v", rs)
	deadline := time.Now().Add(10 * time.Second)
	var before []testproc.Process
	for time.Now().Before(deadline) {
		// runsc run, its gofer and the sandbox, plus the sleep's runsc exec.
		if before = mentioning("--root=" + root); len(before) >= 4 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(before) < 3 {
		t.Fatalf("processes naming runsc --root=%s before the kill: %v; want runsc, its gofer and the sandbox", root, before)
	}
	for _, p := range before {
		t.Logf("before: %v", p)
	}

	if err := syscall.Kill(rs.PID, syscall.SIGKILL); err != nil {
		t.Fatalf("kill -9 %d: %v", rs.PID, err)
	}
	t0 := time.Now()
	select {
	case <-h.done:
	case <-time.After(120 * time.Second):
		t.Fatalf("coordinator still runs 120s after its runtime supervisor was killed\n%s", e.log(t))
	}
	t.Logf("coordinator exited %v after the kill: %v", time.Since(t0), h.err)
	var ee *exec.ExitError
	if !errors.As(h.err, &ee) || ee.ExitCode() != 1 {
		t.Errorf("coordinator exit %v, want exit status 1 (generation failed)", h.err)
	}

	select {
	case r := <-running:
		if r.err != nil {
			t.Errorf("running command ended with error %v, want outcome RuntimeLost", r.err)
		} else if r.exit.Outcome != protocol.ExitRuntimeLost {
			t.Errorf("running command ended with %+v, want outcome RuntimeLost", r.exit)
		}
	case <-time.After(10 * time.Second):
		t.Errorf("running command did not end after the coordinator exited")
	}

	if left := mentioning("--root=" + root); len(left) != 0 {
		t.Errorf("processes of the killed generation left: %v", left)
	}
	for _, s := range []string{e.xdgRun, e.storage} {
		if left := mentioning(s); len(left) != 0 {
			t.Errorf("processes naming %q left: %v", s, left)
		}
	}
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{e.storage, e.xdgRun, e.workspace} {
		for _, line := range strings.Split(string(mi), "\n") {
			if strings.Contains(line, s) {
				t.Errorf("host mount left: %s", line)
			}
		}
	}

	log := e.log(t)
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, "level=ERROR") || strings.HasPrefix(line, "lazaret-coordinator:") {
			t.Logf("log: %s", line)
		}
	}
	checkNothingLeft(t, e)
	reportStore(t, e)
	if t.Failed() || os.Getenv("LZ_E2E_DUMP_LOG") != "" {
		t.Log(log)
	}
}

// reportStore logs what the Domain Store still records after the HC
// exited, and fails if a generation is recorded that did not end.
func reportStore(t *testing.T, e *env) {
	t.Helper()
	st, err := domainstore.Open(e.storage, e.domain, domainstore.Options{ReadOnly: true, LockTimeout: 5 * time.Second})
	if err != nil {
		t.Fatalf("opening the domain store after exit: %v", err)
	}
	defer st.Close()
	var c domainstore.Contents
	if err := st.View(func(tx *domainstore.Tx) error { var e error; c, e = tx.Scan(); return e }); err != nil {
		t.Fatalf("scanning the domain store: %v", err)
	}
	t.Logf("domain store after exit: %d generation(s) recorded", len(c.Generations))
	for _, g := range c.Generations {
		t.Logf("generation %v phase %v", g.Generation.GenerationID, g.Generation.DurableDecision)
		for _, p := range g.Participants {
			t.Logf("  participant %v %v", p.Role, p.State)
		}
		for _, s := range g.Sessions {
			t.Logf("  session %v %v", s.SessionID, s.SessionPhase)
		}
		for _, term := range g.Terminals {
			t.Logf("  terminal %v %v", term.SessionID, term.State)
		}
		if g.Generation.DurableDecision != domainstore.PhaseAbsent {
			t.Errorf("generation %v left in phase %v", g.Generation.GenerationID, g.Generation.DurableDecision)
		}
	}
}
