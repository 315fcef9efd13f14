//go:build e2e

package e2e

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// escalationRules is escalationConfig with more auto-approval rules:
// the exact argv `/usr/bin/echo approved` and two sleeps whose durations
// make them recognisable among the host's processes.
const escalationRules = `schema = "lazaret-trusted-host-config-v1"
[profiles.dev]
image = "localhost/lazaret-busybox:1"
persistent_dirs = ["/root"]
allow_egress = ["198.51.100.0/24"]
[profiles.dev.readiness]
denied = [{ address = "198.19.0.1", port = 443 }]
permitted = [{ address = "198.51.100.1", port = 443 }]
dns = [{ resolver = "198.51.100.53", query = "example.com" }]
[profiles.dev.escalation]
enabled = true
auto_approve = [
  { executable = "/usr/bin/echo", args = ["approved"] },
  { executable = "/usr/bin/sleep", args = ["31.5"] },
  { executable = "/usr/bin/sleep", args = ["32.5"] },
]
`

// escalationSandbox is a sandbox whose profile has escalationRules; extra
// environment variables reach the CLI and so the coordinator.
func escalationSandbox(t *testing.T, env ...string) *sandbox {
	t.Helper()
	s := newSandbox(t)
	s.config = filepath.Join(s.home, "config", "lazaret", "escalation.toml")
	if err := os.WriteFile(s.config, []byte(escalationRules), 0o600); err != nil {
		t.Fatal(err)
	}
	s.env = append(s.env, env...)
	t.Cleanup(func() {
		if t.Failed() {
			s.dumpLogs()
		}
	})
	return s
}

// ready waits for the sandbox shell of a new terminal and clears it.
func (tm *terminal) ready() {
	tm.s.t.Helper()
	tm.send("echo ready-$((6*7))", "Enter")
	tm.waitScreen("\nready-42", 90*time.Second)
	tm.waitPrompt()
	tm.clear()
}

// clear empties the screen, so that later waits see only new output.
func (tm *terminal) clear() {
	tm.s.t.Helper()
	tm.send("clear", "Enter")
	tm.waitPrompt()
}

// hostProcesses lists host PIDs whose argv is exactly argv.
func hostProcesses(argv ...string) []int {
	want := strings.Join(argv, "\x00") + "\x00"
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	var pids []int
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, "cmdline"))
		if err == nil && string(b) == want {
			pid, _ := strconv.Atoi(filepath.Base(d))
			pids = append(pids, pid)
		}
	}
	return pids
}

// waitHostProcess waits until a host process runs argv (present) or none
// does (!present).
func waitHostProcess(t *testing.T, present bool, timeout time.Duration, argv ...string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if got := hostProcesses(argv...); (len(got) > 0) == present {
			return
		}
		if time.Now().After(deadline) {
			if present {
				t.Fatalf("no host process runs %q after %v", argv, timeout)
			}
			t.Fatalf("host processes %v still run %q after %v", hostProcesses(argv...), argv, timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestEscalationRecordsFromACompromisedSandbox runs, inside the sandbox,
// a program with the session's own credential bundle and capability that
// writes a forged, a tampered, a wrong-session and a wrong-generation
// request, and replays a valid one after it was answered. The coordinator
// discards each with a logged reason and runs none of them.
func TestEscalationRecordsFromACompromisedSandbox(t *testing.T) {
	s := escalationSandbox(t)
	forge := filepath.Join(s.workspace, "forge")
	build := exec.Command("go", "build", "-tags", "e2e", "-trimpath", "-o", forge, "./forge")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the forging program: %v\n%s", err, out)
	}
	if err := os.Chmod(forge, 0o755); err != nil {
		t.Fatal(err)
	}
	a := s.terminal("a")
	a.ready()
	a.send("/workspace/forge; echo forge-rc=$?", "Enter")
	a.waitScreen("\nforge-rc=", 90*time.Second)
	scr := a.screen()
	if !strings.Contains(scr, "\nforge-rc=0") {
		t.Fatalf("the forging program failed; screen:\n%s", scr)
	}
	if strings.Contains(scr, "host escalation request") {
		t.Fatalf("a forged record reached the developer as a prompt; screen:\n%s", scr)
	}
	sent := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(scr))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 3 && f[0] == "sent" {
			sent[f[1]] = f[2]
		}
	}
	for _, c := range []string{"forged", "tampered", "wrong-session", "wrong-generation", "valid", "replayed"} {
		if sent[c] == "" {
			t.Fatalf("the forging program did not report %q; screen:\n%s", c, scr)
		}
	}
	// Every discard is logged when the record is read; give the watcher
	// its rescan interval.
	var log string
	deadline := time.Now().Add(20 * time.Second)
	for {
		log = s.domainLog()
		if strings.Count(log, `msg="discarding mailbox record"`) >= 5 || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	lines := strings.Split(log, "\n")
	discards := func(id string) []string {
		var out []string
		for _, l := range lines {
			if strings.Contains(l, `msg="discarding mailbox record"`) && strings.Contains(l, id) {
				out = append(out, l)
			}
		}
		return out
	}
	events := func(id string) []string {
		var out []string
		for _, l := range lines {
			if strings.Contains(l, "msg=escalation ") && strings.Contains(l, "request="+id) {
				out = append(out, l)
			}
		}
		return out
	}
	for _, c := range []string{"forged", "tampered", "wrong-session", "wrong-generation"} {
		id := sent[c]
		if d := discards(id); len(d) != 1 {
			t.Errorf("%s request %s: %d discard lines, want 1", c, id, len(d))
		} else {
			t.Logf("%s: %s", c, d[0][strings.Index(d[0], "reason="):])
		}
		if ev := events(id); len(ev) > 0 {
			t.Errorf("%s request %s entered the request machine: %q", c, id, ev)
		}
	}
	// The forging program never acknowledges the result, so the request
	// stays CompletionPending until the acknowledgment timeout.
	valid := sent["valid"]
	if ev := strings.Join(events(valid), "\n"); !strings.Contains(ev, "phase=CompletionPending") || !strings.Contains(ev, "exit_code=0") {
		t.Errorf("the valid request %s did not run: %q", valid, ev)
	}
	if d := discards(valid); len(d) != 1 {
		t.Errorf("the replayed request %s: %d discard lines, want 1", valid, len(d))
	} else {
		t.Logf("replayed: %s", d[0][strings.Index(d[0], "reason="):])
	}
	a.send("exit 0", "Enter")
	a.finish("0")
}

// TestEscalationPromptEditShellFormEscapesAndQuiet covers the prompt: an
// edited command runs as edited; shell forms are prompted even where an
// auto-approval rule names the command they resolve to; escape sequences
// in the argv and justification are shown as text; and sandbox output
// written while a prompt is shown waits until it is answered.
func TestEscalationPromptEditShellFormEscapesAndQuiet(t *testing.T) {
	s := escalationSandbox(t)
	a := s.terminal("a")
	a.ready()

	t.Run("edited", func(t *testing.T) {
		a.send(guestRun+" -- /usr/bin/echo original; echo edit-rc=$?", "Enter")
		a.waitScreen(`command:       "/usr/bin/echo" "original"`, 60*time.Second)
		a.send("e", "Enter")
		a.waitScreen("edit> ", 10*time.Second)
		a.send("C-u")
		a.send("-l", "/usr/bin/echo edited-by-developer")
		a.send("Enter")
		a.waitScreen(`edited:        "/usr/bin/echo" "edited-by-developer"`, 10*time.Second)
		a.send("y", "Enter")
		a.waitScreen("\nedited-by-developer\nedit-rc=0", 60*time.Second)
		if strings.Contains(a.screen(), "\noriginal\n") {
			t.Errorf("the requested command ran instead of the edited one; screen:\n%s", a.screen())
		}
		a.waitPrompt()
		a.clear()
	})

	t.Run("relative path refused by the guest", func(t *testing.T) {
		a.send(guestRun+" -- echo approved; echo relative-rc=$?", "Enter")
		a.waitScreen("\nrelative-rc=123", 60*time.Second)
		if scr := a.screen(); !strings.Contains(scr, "is not an absolute path") || strings.Contains(scr, "host escalation request") {
			t.Errorf("a relative argv[0] was not refused before it was sent; screen:\n%s", scr)
		}
		a.waitPrompt()
		a.clear()
	})

	for _, tc := range []struct{ name, argv, shown string }{
		{"unclean path", "/usr/bin/../bin/echo approved", `command:       "/usr/bin/../bin/echo" "approved"`},
		{"shell metacharacters", "'/usr/bin/echo;id' approved", `command:       "/usr/bin/echo;id" "approved"`},
	} {
		t.Run("shell form "+tc.name, func(t *testing.T) {
			a.send(guestRun+" -- "+tc.argv+"; echo shell-rc=$?", "Enter")
			a.waitScreen(tc.shown, 60*time.Second)
			a.send("n", "Enter")
			a.waitScreen("\nshell-rc=125", 60*time.Second)
			a.waitPrompt()
			a.clear()
		})
	}

	t.Run("escape sequences", func(t *testing.T) {
		a.send("echo before-escapes", "Enter")
		a.waitScreen("\nbefore-escapes", 10*time.Second)
		a.send(guestRun+` --justification "$(printf 'x\033]0;pwned\007\033[2J')" -- /usr/bin/echo "$(printf '\033[31mred\033[0m\r')"; echo esc-rc=$?`, "Enter")
		a.waitScreen("[y] approve  [n] deny  [e] edit the command", 60*time.Second)
		scr := a.screen()
		for _, want := range []string{`command:       "/usr/bin/echo" "\x1b[31mred\x1b[0m\r"`, `justification: "x\x1b]0;pwned\a\x1b[2J"`, "before-escapes"} {
			if !strings.Contains(scr, want) {
				t.Errorf("the screen lacks %s; screen:\n%s", want, scr)
			}
		}
		if title := a.tmux("-L", a.socket, "display-message", "-p", "-t", a.name, "#{pane_title}"); strings.Contains(title, "pwned") {
			t.Errorf("the request set the pane title to %q", title)
		}
		a.send("n", "Enter")
		a.waitScreen("\nesc-rc=125", 60*time.Second)
		a.waitPrompt()
		a.clear()
	})

	t.Run("output during a prompt", func(t *testing.T) {
		a.send("(sleep 2; i=0; while [ $i -lt 10 ]; do echo NOISE-$i; i=$((i+1)); sleep 0.1; done) & "+guestRun+" -- /usr/bin/echo quiet; echo quiet-rc=$?", "Enter")
		a.waitScreen("[y] approve  [n] deny  [e] edit the command", 60*time.Second)
		time.Sleep(4 * time.Second) // the writer runs its whole course
		if scr := a.screen(); strings.Contains(scr, "NOISE-0") {
			t.Fatalf("sandbox output reached the screen during the prompt; screen:\n%s", scr)
		}
		a.send("n", "Enter")
		a.waitScreen("quiet-rc=125", 60*time.Second)
		a.waitScreen("NOISE-9", 30*time.Second)
		a.waitPrompt()
	})

	a.send("exit 0", "Enter")
	a.finish("0")
}

// TestEscalationTimeoutCancelDisconnect: an unanswered prompt times out;
// Ctrl-C in the guest cancels a running host command; a CLI that goes
// away cancels its session's request, killing the host command, or
// withdrawing the prompt. No host process outlives its request.
func TestEscalationTimeoutCancelDisconnect(t *testing.T) {
	s := escalationSandbox(t, "LAZARET_ESCALATION_APPROVAL_TIMEOUT=4s")
	a := s.terminal("a")
	a.ready()

	t.Run("approval timeout", func(t *testing.T) {
		a.send(guestRun+" -- /usr/bin/echo never-answered; echo timeout-rc=$?", "Enter")
		a.waitScreen("[y] approve  [n] deny  [e] edit the command", 60*time.Second)
		// The wire format has no withdrawal of a shown prompt, so the
		// prompt stays until answered; the request has timed out on the
		// host by then, and a late approval must not run it.
		time.Sleep(7 * time.Second)
		a.send("y", "Enter")
		a.waitScreen("\ntimeout-rc=124", 60*time.Second)
		if strings.Contains(a.screen(), "\nnever-answered") {
			t.Errorf("a timed-out request ran; screen:\n%s", a.screen())
		}
		a.waitPrompt()
		a.send("echo keys-reach-the-shell", "Enter")
		a.waitScreen("\nkeys-reach-the-shell", 10*time.Second)
		a.waitPrompt()
		a.clear()
	})

	t.Run("cancel from the guest", func(t *testing.T) {
		a.send(guestRun+" -- /usr/bin/sleep 31.5; echo cancel-rc=$?", "Enter")
		waitHostProcess(t, true, 60*time.Second, "/usr/bin/sleep", "31.5")
		a.send("C-c")
		a.waitScreen("\ncancel-rc=130", 30*time.Second)
		waitHostProcess(t, false, 10*time.Second, "/usr/bin/sleep", "31.5")
		a.waitPrompt()
		a.clear()
	})

	t.Run("disconnect during execution", func(t *testing.T) {
		b := s.terminal("b")
		b.ready()
		b.send(guestRun+" -- /usr/bin/sleep 32.5", "Enter")
		waitHostProcess(t, true, 60*time.Second, "/usr/bin/sleep", "32.5")
		b.tmux("-L", b.socket, "kill-session", "-t", b.name)
		waitHostProcess(t, false, 20*time.Second, "/usr/bin/sleep", "32.5")
	})

	t.Run("disconnect during a prompt", func(t *testing.T) {
		c := s.terminal("c")
		c.ready()
		c.send(guestRun+" -- /usr/bin/echo abandoned", "Enter")
		c.waitScreen("[y] approve  [n] deny  [e] edit the command", 60*time.Second)
		before := strings.Count(s.domainLog(), "phase=Cancelled")
		c.tmux("-L", c.socket, "kill-session", "-t", c.name)
		deadline := time.Now().Add(20 * time.Second)
		for strings.Count(s.domainLog(), "phase=Cancelled") <= before {
			if time.Now().After(deadline) {
				t.Fatalf("no request was cancelled after the prompting CLI went away")
			}
			time.Sleep(200 * time.Millisecond)
		}
	})

	a.send("exit 0", "Enter")
	a.finish("0")
}
