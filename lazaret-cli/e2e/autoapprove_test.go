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
)

// autoApproveRules has the prefix rules the documentation shows or once
// showed, for /usr/bin/git: `git fetch origin` (docs/CONFIGURATION.md and
// the `config init` template), `git push origin` (the former template's
// `git push` with its remote fixed), the former example `git fetch`, and
// `git log`, whose options run commands and write files; and prefix rules
// for tar and find, whose options do too.
const autoApproveRules = `schema = "lazaret-trusted-host-config-v1"
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
  { executable = "/usr/bin/git", args = ["fetch", "origin"], allow_extra_args = true },
  { executable = "/usr/bin/git", args = ["push", "origin"], allow_extra_args = true },
  { executable = "/usr/bin/git", args = ["fetch"], allow_extra_args = true },
  { executable = "/usr/bin/git", args = ["log"], allow_extra_args = true },
  { executable = "/usr/bin/tar", args = ["-xf", "archive.tar"], allow_extra_args = true },
  { executable = "/usr/bin/find", args = ["."], allow_extra_args = true },
]
`

// hostGit runs git on the host in dir, failing the test on error.
func hostGit(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=Lazaret Test", "-c", "user.email=test@lazaret.invalid"}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %q: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// TestAutoApprovalRulesCannotRunOrWriteOnTheHost requests, through the
// documented prefix rules, the options and forms that make git run a
// command or write a file on the host. Each must go to the prompt, which
// a session of `lazaret-cli exec` cannot show (it has no terminal), so
// the request is cancelled: the guest exits 130, the audit log ends the
// request Cancelled with no approval source, and the marker file the
// command would create outside the workspace stays absent. The benign
// form of each rule is still auto-approved and runs.
func TestAutoApprovalRulesCannotRunOrWriteOnTheHost(t *testing.T) {
	s := newSandbox(t)
	s.config = filepath.Join(s.home, "config", "lazaret", "autoapprove.toml")
	if err := os.WriteFile(s.config, []byte(autoApproveRules), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			s.dumpLogs()
		}
	})
	if err := os.WriteFile(filepath.Join(s.workspace, "hello.txt"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("tar", "-C", s.workspace, "-cf", filepath.Join(s.workspace, "archive.tar"), "hello.txt").CombinedOutput(); err != nil {
		t.Fatalf("tar -cf: %v\n%s", err, out)
	}
	hostGit(t, s.workspace, "commit", "-q", "--allow-empty", "-m", "first")
	branch := hostGit(t, s.workspace, "symbolic-ref", "--short", "HEAD")
	origin := filepath.Join(s.home, "origin.git")
	if out, err := exec.Command("git", "clone", "-q", "--bare", s.workspace, origin).CombinedOutput(); err != nil {
		t.Fatalf("git clone --bare: %v\n%s", err, out)
	}
	hostGit(t, s.workspace, "remote", "add", "origin", origin)
	markers := filepath.Join(s.home, "markers")
	if err := os.Mkdir(markers, 0o755); err != nil {
		t.Fatal(err)
	}
	marker := func(name string) string { return filepath.Join(markers, name) }
	touch := func(name string) string { return "touch " + marker(name) + " #" }

	guest := func(argv ...string) (string, string, int) {
		t.Helper()
		return s.cli(s.sessionArgs("exec", "20s", append([]string{"/run/lazaret/lazaret-guest", "run", "--"}, argv...)...)...)
	}
	attacks := []struct {
		name   string
		marker string // created on the host if the attack works; "" when none
		argv   []string
	}{
		{"fetch/upload-pack", "upload-pack", []string{"/usr/bin/git", "fetch", "--upload-pack=" + touch("upload-pack"), "."}},
		{"fetch/upload-pack-separate-value", "upload-pack-2", []string{"/usr/bin/git", "fetch", "--upload-pack", touch("upload-pack-2"), "."}},
		{"fetch-origin/upload-pack-after-operand", "upload-pack-3", []string{"/usr/bin/git", "fetch", "origin", "--upload-pack=" + touch("upload-pack-3")}},
		{"fetch-origin/u", "", []string{"/usr/bin/git", "fetch", "origin", "-u"}},
		{"fetch/c-before-subcommand", "ssh-command", []string{"/usr/bin/git", "-c", "core.sshCommand=" + touch("ssh-command"), "fetch", "ssh://example.invalid/x"}},
		{"fetch/c-allows-ext-transport", "ext", []string{"/usr/bin/git", "-c", "protocol.ext.allow=always", "fetch", "ext::sh -c touch% " + marker("ext")}},
		{"fetch/exec-path", "", []string{"/usr/bin/git", "--exec-path=" + markers, "fetch", "origin"}},
		{"fetch/config-env", "", []string{"/usr/bin/git", "--config-env=core.sshCommand=HOME", "fetch", "origin"}},
		{"fetch-origin/config-option", "config-option", []string{"/usr/bin/git", "fetch", "origin", "--config=core.sshCommand=" + touch("config-option")}},
		{"fetch-origin/end-of-options", "", []string{"/usr/bin/git", "fetch", "origin", "--", branch}},
		{"fetch-origin/forced-refspec", "", []string{"/usr/bin/git", "fetch", "origin", "+" + branch + ":refs/heads/forced"}},
		{"push-origin/receive-pack", "receive-pack", []string{"/usr/bin/git", "push", "origin", "--receive-pack=" + touch("receive-pack"), "HEAD:refs/heads/attack"}},
		{"push-origin/exec", "push-exec", []string{"/usr/bin/git", "push", "origin", "--exec=" + touch("push-exec"), "HEAD:refs/heads/attack"}},
		{"push-origin/force", "", []string{"/usr/bin/git", "push", "origin", "+HEAD:refs/heads/" + branch}},
		{"log/output", "log-output", []string{"/usr/bin/git", "log", "--output=" + marker("log-output")}},
		{"log/output-separate-value", "log-output-2", []string{"/usr/bin/git", "log", "--output", marker("log-output-2")}},
		{"tar/to-command", "to-command", []string{"/usr/bin/tar", "-xf", "archive.tar", "--to-command=" + touch("to-command")}},
		{"tar/checkpoint-action", "checkpoint", []string{"/usr/bin/tar", "-xf", "archive.tar", "--checkpoint=1", "--checkpoint-action=exec=" + touch("checkpoint")}},
		{"tar/use-compress-program", "compress", []string{"/usr/bin/tar", "-xf", "archive.tar", "-I", touch("compress")}},
		{"find/exec", "find-exec", []string{"/usr/bin/find", ".", "-maxdepth", "0", "-exec", "touch", marker("find-exec"), ";"}},
		{"find/fprint", "find-fprint", []string{"/usr/bin/find", ".", "-maxdepth", "0", "-fprint", marker("find-fprint")}},
	}
	for _, a := range attacks {
		t.Run("attack/"+a.name, func(t *testing.T) {
			out, errOut, code := guest(a.argv...)
			if code != 130 {
				t.Errorf("%q was not sent to the prompt: exit %d\nstdout: %s\nstderr: %s", a.argv, code, out, errOut)
			}
			if a.marker != "" {
				if _, err := os.Lstat(marker(a.marker)); err == nil {
					t.Errorf("%q ran on the host: %s exists", a.argv, marker(a.marker))
				}
			}
		})
	}
	benign := []struct {
		name string
		argv []string
	}{
		{"fetch-origin/branch", []string{"/usr/bin/git", "fetch", "origin", branch}},
		{"push-origin/refspec", []string{"/usr/bin/git", "push", "origin", "HEAD:refs/heads/pushed"}},
		{"fetch/remote", []string{"/usr/bin/git", "fetch", "origin"}},
		{"log/revision", []string{"/usr/bin/git", "log", "HEAD"}},
		{"tar/member", []string{"/usr/bin/tar", "-xf", "archive.tar", "hello.txt"}},
		{"find/start-points", []string{"/usr/bin/find", ".", "hello.txt"}},
	}
	for _, b := range benign {
		t.Run("benign/"+b.name, func(t *testing.T) {
			out, errOut, code := guest(b.argv...)
			if code != 0 {
				t.Errorf("%q was not auto-approved and run: exit %d\nstdout: %s\nstderr: %s", b.argv, code, out, errOut)
			}
		})
	}
	if got := hostGit(t, origin, "rev-parse", "refs/heads/pushed"); got != hostGit(t, s.workspace, "rev-parse", "HEAD") {
		t.Errorf("the auto-approved push did not reach origin: refs/heads/pushed is %s", got)
	}
	if entries, _ := os.ReadDir(markers); len(entries) > 0 {
		t.Errorf("attacks left files on the host: %v", entries)
	}
	if _, errOut, code := s.stop(); code != 0 {
		t.Errorf("stop: code %d: %s", code, errOut)
	}

	// The audit log: every attack went to the prompt and was cancelled
	// there, with the planner's reason; every benign request Completed by
	// a rule.
	out, errOut, code := s.cli("log", "--profile", "dev", "--workspace", s.workspace, "--config", s.config, "--json")
	if code != 0 {
		t.Fatalf("log --json: code %d: %s", code, errOut)
	}
	var records []struct {
		Phase   string   `json:"phase"`
		Source  string   `json:"source"`
		Argv    []string `json:"argv"`
		Outcome string   `json:"outcome"`
		Reason  string   `json:"reason"`
	}
	if err := json.Unmarshal([]byte(out), &records); err != nil {
		t.Fatalf("log --json printed %q: %v", out, err)
	}
	ends, reasons := map[string]string{}, map[string]string{}
	for _, r := range records {
		key := strings.Join(r.Argv, "\x00")
		if r.Reason != "" {
			reasons[key] += r.Phase + ": " + r.Reason + "; "
		}
		if r.Outcome != "" && r.Phase == r.Outcome {
			ends[key] = r.Outcome + " " + r.Source
		}
	}
	for _, a := range attacks {
		key := strings.Join(a.argv, "\x00")
		if ends[key] != "Cancelled none" {
			t.Errorf("audit log: %q ended %q, want Cancelled none", a.argv, ends[key])
		}
		t.Logf("prompted %s: %s", a.name, reasons[key])
	}
	for _, b := range benign {
		if key := strings.Join(b.argv, "\x00"); ends[key] != "Completed AutoRule" {
			t.Errorf("audit log: %q ended %q, want Completed AutoRule", b.argv, ends[key])
		}
	}
	want := fmt.Sprintf("rule 0 (/usr/bin/git fetch origin) does not auto-approve option %q", "--upload-pack="+touch("upload-pack-3"))
	if got := reasons[strings.Join(attacks[2].argv, "\x00")]; !strings.Contains(got, want) {
		t.Errorf("prompt reason for %q is %q, want it to contain %q", attacks[2].argv, got, want)
	}
}
