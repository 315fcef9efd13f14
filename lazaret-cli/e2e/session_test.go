//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"lazaret.dev/pkg/conform"
	"lazaret.dev/pkg/netlab"
	"lazaret.dev/pkg/trace"
)

// sandbox is one test's isolated user: XDG directories, a configuration
// whose profile "dev" runs the busybox test image, and a git workspace.
type sandbox struct {
	t         *testing.T
	env       []string
	home      string
	config    string
	workspace string
}

const sandboxConfig = `schema = "lazaret-trusted-host-config-v1"
[profiles.dev]
image = "localhost/lazaret-busybox:1"
persistent_dirs = [%s]
allow_egress = ["198.51.100.0/24"]
[profiles.dev.readiness]
denied = [{ address = "198.19.0.1", port = 443 }]
permitted = [{ address = "198.51.100.1", port = 443 }]
dns = [{ resolver = "198.51.100.53", query = "example.com" }]
`

func newSandbox(t *testing.T) *sandbox {
	t.Helper()
	netlab.NeedInternet(t)
	bin := binDir(t)
	runsc := filepath.Join(bin, "runsc")
	if _, err := os.Stat(runsc); err != nil {
		t.Fatalf("%s missing: run `make runsc` (make e2e does)", runsc)
	}
	home := t.TempDir()
	run := filepath.Join(home, "run")
	if err := os.Mkdir(run, 0o700); err != nil {
		t.Fatal(err)
	}
	s := &sandbox{t: t, home: home, workspace: gitWorkspace(t)}
	s.env = []string{
		"HOME=" + home,
		"XDG_CONFIG_HOME=" + filepath.Join(home, "config"),
		"XDG_DATA_HOME=" + filepath.Join(home, "data"),
		"XDG_RUNTIME_DIR=" + run,
		"LAZARET_CONFIG=",
		"LAZARET_LIBEXEC_DIR=" + bin,
		"LAZARET_RUNSC=" + runsc,
		trace.EnvDir + "=" + filepath.Join(home, "trace"),
	}
	if err := os.Mkdir(filepath.Join(home, "trace"), 0o700); err != nil {
		t.Fatal(err)
	}
	s.config = s.writeConfig("config.toml", `"/root"`)
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(repo, "scripts", "make-test-image"))
	cmd.Env = append(os.Environ(), append(s.env, "LAZARET_CLI="+filepath.Join(bin, "lazaret-cli"))...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make-test-image: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		s.waitTeardown()
		s.checkTraces()
	})
	return s
}

// checkTraces validates the protocol traces of the test's coordinators,
// all gone by now, against the model.
func (s *sandbox) checkTraces() {
	reps, err := conform.ValidateDir(filepath.Join(s.home, "trace"))
	if err != nil {
		s.t.Errorf("protocol trace: %v", err)
		return
	}
	for _, r := range reps {
		s.t.Logf("protocol trace: %d events, %d sessions, %d requests, %d model steps in %d projections: valid",
			r.Events, r.Sessions, r.Requests, r.Steps, r.Projections)
	}
}

func (s *sandbox) writeConfig(name, persistent string) string {
	s.t.Helper()
	dir := filepath.Join(s.home, "config", "lazaret")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		s.t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(fmt.Sprintf(sandboxConfig, persistent)), 0o600); err != nil {
		s.t.Fatal(err)
	}
	return p
}

// dumpLogs logs every coordinator.log of the test.
func (s *sandbox) dumpLogs() {
	logs, _ := filepath.Glob(filepath.Join(s.home, "run", "lazaret", "domains", "*", "coordinator.log"))
	for _, l := range logs {
		b, _ := os.ReadFile(l)
		s.t.Logf("%s:\n%s", l, b)
	}
}

// cli runs lazaret-cli with the sandbox's environment.
func (s *sandbox) cli(args ...string) (string, string, int) {
	s.t.Helper()
	return run(s.t, s.env, "lazaret-cli", args...)
}

func (s *sandbox) exec(argv ...string) (string, string, int) {
	s.t.Helper()
	args := append([]string{"exec", "--profile", "dev", "--workspace", s.workspace, "--config", s.config, "--linger", "2s", "--"}, argv...)
	return s.cli(args...)
}

type statusJSON struct {
	Domains []struct {
		DomainID        string `json:"domain_id"`
		Lock            string `json:"lock"`
		CoordinatorPIDs []int  `json:"coordinator_pids"`
		Store           string `json:"store"`
		Published       *struct {
			GenerationID string `json:"generation_id"`
		} `json:"published"`
		Generations []struct {
			GenerationID string `json:"generation_id"`
			Phase        string `json:"phase"`
			Sessions     []struct {
				Phase string `json:"phase"`
			} `json:"sessions"`
		} `json:"generations"`
	} `json:"domains"`
}

func (s *sandbox) status() statusJSON {
	s.t.Helper()
	out, errOut, code := s.cli("status", "--json")
	if code != 0 {
		s.t.Fatalf("status: code %d: %s", code, errOut)
	}
	var st statusJSON
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		s.t.Fatalf("status --json printed %q: %v", out, err)
	}
	return st
}

// waitTeardown waits until no coordinator holds a Domain lock, so that
// the temporary directories are removed after the generation is gone.
func (s *sandbox) waitTeardown() {
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		held := false
		for _, d := range s.status().Domains {
			held = held || d.Lock == "held"
		}
		if !held {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	s.t.Errorf("a coordinator still holds its Domain lock 60 s after the test")
}

func TestExecOutputAndExitCodes(t *testing.T) {
	s := newSandbox(t)
	out, errOut, code := s.exec("/bin/echo", "hi")
	if code != 0 || out != "hi\n" {
		s.dumpLogs()
		t.Fatalf("exec echo: code %d, stdout %q, stderr %q", code, out, errOut)
	}
	out, errOut, code = s.exec("/bin/sh", "-c", "echo out; echo err >&2; exit 3")
	if code != 3 || out != "out\n" || errOut != "err\n" {
		t.Fatalf("exec sh: code %d, stdout %q, stderr %q", code, out, errOut)
	}
}

func TestExecFingerprintMismatch(t *testing.T) {
	s := newSandbox(t)
	other := s.writeConfig("other.toml", `"/root", "/home/agent"`)
	fingerprint := func(cfg string) string {
		out, errOut, code := s.cli("config", "check", "--profile", "dev", "--workspace", s.workspace, "--config", cfg, "--json")
		if code != 0 {
			t.Fatalf("config check %s: %s", cfg, errOut)
		}
		var r struct {
			F string `json:"configuration_fingerprint"`
		}
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatal(err)
		}
		return r.F
	}
	running, requested := fingerprint(s.config), fingerprint(other)
	// Keep the first Domain up while the second configuration asks for it.
	hold := exec.Command(filepath.Join(binDir(t), "lazaret-cli"), "exec", "--profile", "dev", "--workspace", s.workspace, "--config", s.config, "--linger", "2s", "--", "/bin/sleep", "5")
	hold.Env = append(os.Environ(), s.env...)
	if err := hold.Start(); err != nil {
		t.Fatal(err)
	}
	defer hold.Wait()
	deadline := time.Now().Add(60 * time.Second)
	for {
		st := s.status()
		if len(st.Domains) == 1 && st.Domains[0].Published != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the Domain was not published: %+v", st)
		}
		time.Sleep(100 * time.Millisecond)
	}
	_, errOut, code := s.cli("exec", "--profile", "dev", "--workspace", s.workspace, "--config", other, "--", "/bin/true")
	if code == 0 || !strings.Contains(errOut, running) || !strings.Contains(errOut, requested) {
		t.Fatalf("mismatch not refused with both fingerprints: code %d, stderr %q (running %s, requested %s)", code, errOut, running, requested)
	}
}

// terminal is one tmux session running lazaret-cli start through a wrapper
// that records the terminal mode before and after and the exit code.
type terminal struct {
	s      *sandbox
	name   string
	socket string
	dir    string
}

// terminal runs lazaret-cli start in a new tmux session; extra are more
// start flags, each a single shell word.
func (s *sandbox) terminal(name string, extra ...string) *terminal {
	s.t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		s.t.Fatal("tmux is required for the interactive end-to-end tests")
	}
	tm := &terminal{s: s, name: name, socket: e2eSocket(s.home), dir: filepath.Join(s.home, name)}
	if err := os.Mkdir(tm.dir, 0o700); err != nil {
		s.t.Fatal(err)
	}
	script := filepath.Join(tm.dir, "run.sh")
	body := fmt.Sprintf("#!/bin/sh\nstty -g > %[1]s/before\n%[2]s start --profile dev --workspace %[3]s --config %[4]s --linger 2s%[5]s\necho $? > %[1]s/code.tmp && mv %[1]s/code.tmp %[1]s/code\nstty -g > %[1]s/after\nexec sleep 600\n",
		tm.dir, filepath.Join(binDir(s.t), "lazaret-cli"), s.workspace, s.config, strings.Join(append([]string{""}, extra...), " "))
	if err := os.WriteFile(script, []byte(body), 0o700); err != nil {
		s.t.Fatal(err)
	}
	args := []string{"-L", tm.socket, "-f", "/dev/null", "new-session", "-d", "-x", "120", "-y", "40", "-s", name}
	for _, kv := range s.env {
		args = append(args, "-e", kv)
	}
	args = append(args, script)
	tm.tmux(args...)
	s.t.Cleanup(func() { exec.Command("tmux", "-L", tm.socket, "kill-session", "-t", name).Run() })
	return tm
}

func (tm *terminal) tmux(args ...string) string {
	tm.s.t.Helper()
	cmd := exec.Command("tmux", args...)
	cmd.Env = os.Environ()
	out, err := cmd.CombinedOutput()
	if err != nil {
		tm.s.t.Fatalf("tmux %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func (tm *terminal) send(keys ...string) {
	tm.tmux(append([]string{"-L", tm.socket, "send-keys", "-t", tm.name}, keys...)...)
}

func (tm *terminal) screen() string {
	return tm.tmux("-L", tm.socket, "capture-pane", "-p", "-t", tm.name)
}

// waitScreen waits until the screen shows want.
func (tm *terminal) waitScreen(want string, timeout time.Duration) {
	tm.s.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		scr := tm.screen()
		if strings.Contains(scr, want) {
			return
		}
		if time.Now().After(deadline) {
			tm.s.t.Fatalf("terminal %s never showed %q; screen:\n%s", tm.name, want, scr)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// finish waits for the wrapper's exit code and checks the terminal mode.
func (tm *terminal) finish(wantCode string) {
	tm.s.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, err := os.ReadFile(filepath.Join(tm.dir, "code"))
		if err == nil {
			if got := strings.TrimSpace(string(code)); got != wantCode {
				tm.s.t.Errorf("lazaret-cli start exited %s, want %s; screen:\n%s", got, wantCode, tm.screen())
			}
			break
		}
		if time.Now().After(deadline) {
			tm.s.t.Fatalf("lazaret-cli start did not exit; screen:\n%s", tm.screen())
		}
		time.Sleep(100 * time.Millisecond)
	}
	for time.Now().Before(deadline) {
		// The wrapper creates the file before stty writes it.
		if fi, err := os.Stat(filepath.Join(tm.dir, "after")); err == nil && fi.Size() > 0 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	before, _ := os.ReadFile(filepath.Join(tm.dir, "before"))
	after, _ := os.ReadFile(filepath.Join(tm.dir, "after"))
	if len(before) == 0 || string(before) != string(after) {
		tm.s.t.Errorf("terminal mode not restored: before %q, after %q", before, after)
	}
}

func TestStartInteractiveThroughTmux(t *testing.T) {
	s := newSandbox(t)
	a := s.terminal("a")
	a.send("echo $((6*7))", "Enter")
	a.waitScreen("\n42", 90*time.Second)
	a.send("exit 5", "Enter")
	a.finish("5")
}

func TestSecondTerminalJoins(t *testing.T) {
	s := newSandbox(t)
	a := s.terminal("a")
	a.send("echo from-a > /root/shared; echo written", "Enter")
	a.waitScreen("\nwritten", 90*time.Second)
	b := s.terminal("b")
	b.send("cat /root/shared", "Enter")
	b.waitScreen("\nfrom-a", 30*time.Second)

	st := s.status()
	if len(st.Domains) != 1 {
		t.Fatalf("status shows %d Domains, want 1: %+v", len(st.Domains), st)
	}
	d := st.Domains[0]
	if d.Lock != "held" || d.Published == nil || len(d.CoordinatorPIDs) != 1 {
		t.Errorf("status of the running Domain: %+v", d)
	}
	switch d.Store {
	case "read":
		if len(d.Generations) != 1 {
			t.Errorf("status shows %d generations, want 1", len(d.Generations))
		} else if n := len(d.Generations[0].Sessions); n != 2 {
			t.Errorf("status shows %d sessions, want 2", n)
		}
	case "in-use":
		t.Logf("the coordinator holds the Domain Store open; status shows generation %s from the identity file", d.Published.GenerationID)
	default:
		t.Errorf("Domain Store state %q", d.Store)
	}
	a.send("exit 0", "Enter")
	a.finish("0")
	b.send("exit 0", "Enter")
	b.finish("0")
}

// e2eSocket names the tmux server of one test. t.TempDir gives every test
// a directory with a random name (…/TestName123456/001), so its parent's
// name keeps concurrent runs and sequential tests on separate servers.
func e2eSocket(home string) string {
	return "lazaret-e2e-" + filepath.Base(filepath.Dir(home)) + "-" + filepath.Base(home)
}
