//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// escalationConfig is sandboxConfig with escalation enabled and one
// auto-approval rule for the exact argv `/usr/bin/echo approved`. The rule
// names /usr/bin/echo: where /bin is a symbolic link, /bin/echo resolves
// to /usr/bin/echo and only the canonical path is ever auto-approved or
// run.
const escalationConfig = `schema = "lazaret-trusted-host-config-v1"
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
auto_approve = [{ executable = "/usr/bin/echo", args = ["approved"] }]
`

const guestRun = "/run/lazaret/lazaret-guest run"

func TestEscalationAutoApproveDenyApprove(t *testing.T) {
	s := newSandbox(t)
	s.config = filepath.Join(s.home, "config", "lazaret", "escalation.toml")
	if err := os.WriteFile(s.config, []byte(escalationConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			s.dumpLogs()
		}
	})
	a := s.terminal("a")
	a.send("echo ready-$((6*7))", "Enter")
	a.waitScreen("\nready-42", 90*time.Second)
	a.waitPrompt()

	// Auto-approved: no prompt, the host's output and exit status.
	a.send(guestRun+" -- /usr/bin/echo approved; echo auto-rc=$?", "Enter")
	a.waitScreen("\napproved\nauto-rc=0", 60*time.Second)
	if scr := a.screen(); strings.Contains(scr, "host escalation request") {
		s.dumpLogs()
		t.Fatalf("an auto-approved request was prompted; screen:\n%s", scr)
	}
	a.waitPrompt()

	// Not matching the rule: prompted, with the argv and justification
	// shown quoted; n denies (guest exit 125).
	a.send(guestRun+" --justification 'needs the host' -- /usr/bin/echo denied-one; echo deny-rc=$?", "Enter")
	a.waitScreen("[y] approve  [n] deny  [e] edit the command", 60*time.Second)
	scr := a.screen()
	for _, want := range []string{`command:       "/usr/bin/echo" "denied-one"`, `profile:       "dev"`, `justification: "needs the host"`} {
		if !strings.Contains(scr, want) {
			t.Errorf("the prompt does not show %s; screen:\n%s", want, scr)
		}
	}
	a.send("n", "Enter")
	a.waitScreen("\ndeny-rc=125", 60*time.Second)
	if strings.Contains(a.screen(), "\ndenied-one") {
		t.Errorf("a denied command ran; screen:\n%s", a.screen())
	}
	a.waitPrompt()

	// Prompted and approved with y: the host runs it.
	a.send(guestRun+" -- /usr/bin/echo prompted-yes; echo yes-rc=$?", "Enter")
	a.waitScreen(`command:       "/usr/bin/echo" "prompted-yes"`, 60*time.Second)
	a.send("y", "Enter")
	a.waitScreen("\nprompted-yes\nyes-rc=0", 60*time.Second)
	a.waitPrompt()

	a.send("exit 0", "Enter")
	a.finish("0")

	// The audit log has each request's end: the rule, the developer's
	// denial and approval, with outcomes and exit codes.
	out, errOut, code := s.cli("log", "--profile", "dev", "--workspace", s.workspace, "--config", s.config, "--json")
	if code != 0 {
		t.Fatalf("log --json: code %d: %s", code, errOut)
	}
	var records []struct {
		Phase    string   `json:"phase"`
		Source   string   `json:"source"`
		Argv     []string `json:"argv"`
		Outcome  string   `json:"outcome"`
		ExitCode *int     `json:"exit_code"`
	}
	if err := json.Unmarshal([]byte(out), &records); err != nil {
		t.Fatalf("log --json printed %q: %v", out, err)
	}
	ends := map[string]string{}
	for _, r := range records {
		if r.Outcome == "" || r.Phase != r.Outcome {
			continue
		}
		end := r.Outcome + " " + r.Source
		if r.ExitCode != nil {
			end += fmt.Sprintf(" exit %d", *r.ExitCode)
		}
		ends[strings.Join(r.Argv, " ")] = end
	}
	for argv, want := range map[string]string{
		"/usr/bin/echo approved":     "Completed AutoRule exit 0",
		"/usr/bin/echo denied-one":   "Denied Developer",
		"/usr/bin/echo prompted-yes": "Completed Developer exit 0",
	} {
		if ends[argv] != want {
			t.Errorf("audit log: %q ended %q, want %q\n%s", argv, ends[argv], want, out)
		}
	}
	text, _, _ := s.cli("log", "--profile", "dev", "--workspace", s.workspace, "--config", s.config)
	t.Logf("lazaret-cli log:\n%s", text)
}
