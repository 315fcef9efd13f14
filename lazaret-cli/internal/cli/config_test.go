package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"lazaret.dev/pkg/cmdmain"
)

// host is a private environment for one CLI test.
type host struct {
	dir, ws, file string
}

func newHost(t *testing.T) *host {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	h := &host{dir: dir, ws: filepath.Join(dir, "ws"), file: filepath.Join(dir, "cfg", "lazaret", "config.toml")}
	if out, err := exec.Command("git", "init", "-q", h.ws).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
	t.Setenv("HOME", filepath.Join(dir, "home"))
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(dir, "cfg"))
	t.Setenv("XDG_DATA_HOME", filepath.Join(dir, "data"))
	t.Setenv("XDG_RUNTIME_DIR", filepath.Join(dir, "run"))
	os.Unsetenv("LAZARET_CONFIG")
	return h
}

func runApp(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	app := App()
	if app.Command("config") == nil {
		app.Commands = append(app.Commands, configCommand())
	}
	var out, errb bytes.Buffer
	app.Writer, app.ErrWriter = &out, &errb
	app.ExitErrHandler = func(*cli.Context, error) {}
	err = app.Run(append([]string{"lazaret-cli"}, args...))
	return out.String(), errb.String(), err
}

func exitCode(err error) int {
	var ee *cmdmain.ExitError
	if errors.As(err, &ee) {
		return ee.Code
	}
	if err != nil {
		return 1
	}
	return 0
}

func TestConfigInitThenCheck(t *testing.T) {
	h := newHost(t)
	if _, stderr, err := runApp(t, "config", "init", "--profile", "agent.ci"); err != nil {
		t.Fatalf("init: %v %s", err, stderr)
	}
	fi, err := os.Stat(h.file)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("config file: %v %v", fi, err)
	}
	di, err := os.Stat(filepath.Dir(h.file))
	if err != nil || di.Mode().Perm() != 0o700 {
		t.Fatalf("config dir: %v %v", di, err)
	}
	stdout, stderr, err := runApp(t, "config", "check", "--profile", "agent.ci", "--workspace", h.ws, "--json")
	if err != nil {
		t.Fatalf("check of the starter file: %v\n%s", err, stderr)
	}
	var report map[string]any
	if err := json.Unmarshal([]byte(stdout), &report); err != nil {
		t.Fatalf("output is not one JSON object: %v\n%s", err, stdout)
	}
	for _, k := range []string{"profile", "workspace", "storage_root", "runtime_root", "domain_id", "configuration_fingerprint", "effective_allow", "effective_deny", "readiness", "pending_creates"} {
		if _, ok := report[k]; !ok {
			t.Errorf("JSON lacks %q", k)
		}
	}
	if report["workspace"] != h.ws || report["profile"] != "agent.ci" {
		t.Errorf("workspace/profile = %v/%v", report["workspace"], report["profile"])
	}
	for _, k := range []string{"domain_id", "configuration_fingerprint"} {
		s, _ := report[k].(string)
		if len(s) != 64 || strings.ToLower(s) != s {
			t.Errorf("%s = %q is not lowercase hex of 32 bytes", k, s)
		}
	}
	for _, k := range []string{"schema_version", "effective_allow_hosts", "effective_deny_hosts", "resolver"} {
		if _, ok := report[k]; ok {
			t.Errorf("v1 JSON has the v2 key %q", k)
		}
	}
	deny, _ := report["effective_deny"].([]any)
	if len(deny) != 3 || deny[0] != "10.0.0.0/8" || deny[1] != "172.16.0.0/12" || deny[2] != "192.168.0.0/16" {
		t.Errorf("effective_deny = %v", deny)
	}
	for _, p := range []string{filepath.Join(h.dir, "data"), filepath.Join(h.dir, "run", "lazaret")} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("config check created %s", p)
		}
	}

	// The text form carries the same digests.
	text, _, err := runApp(t, "config", "check", "--profile", "agent.ci", "--workspace", h.ws)
	if err != nil || !strings.Contains(text, report["configuration_fingerprint"].(string)) {
		t.Errorf("text output: %v\n%s", err, text)
	}

	// init refuses to overwrite without --force.
	if _, _, err := runApp(t, "config", "init"); err == nil {
		t.Error("init replaced an existing file without --force")
	}
	if _, _, err := runApp(t, "config", "init", "--force", "--profile", "dev"); err != nil {
		t.Errorf("init --force: %v", err)
	}
	if _, stderr, err := runApp(t, "config", "check", "--profile", "dev", "--workspace", h.ws); err != nil {
		t.Errorf("check after --force: %v %s", err, stderr)
	}
}

func TestConfigCheckReportsEveryProblem(t *testing.T) {
	h := newHost(t)
	if err := os.MkdirAll(filepath.Dir(h.file), 0o700); err != nil {
		t.Fatal(err)
	}
	doc := `schema = "lazaret-trusted-host-config-v1"
[profiles.dev]
image = "docker.io/library/debian:bookworm"
persistent_dirs = ["/home/agent"]
env = { TOKEN = "literal-secret" }

[[profiles.dev.volumes]]
host = "/srv/a"
container = "/home/agent/a"
kind = "file"

[[profiles.dev.volumes]]
  host = "etc/passwd"
  container = "/home/agent/b"
  kind = "file"
`
	if err := os.WriteFile(h.file, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, err := runApp(t, "config", "check", "--profile", "dev", "--workspace", h.ws, "--json")
	if exitCode(err) != 1 {
		t.Fatalf("exit code %d (%v)", exitCode(err), err)
	}
	if stdout != "" {
		t.Errorf("stdout on failure: %q", stdout)
	}
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	want := []string{
		h.file + ":5:9: profiles.dev.env.TOKEN: value must be a reference env:NAME",
		h.file + ":8:1: profiles.dev.volumes[0].host: source \"/srv/a\"",
		h.file + ":13:3: profiles.dev.volumes[1].host: must be absolute or begin with ~/ or {profile_dir}/",
		h.file + ":2:11: profiles.dev.readiness: the selected profile needs",
	}
	if len(lines) != len(want) {
		t.Fatalf("stderr has %d lines, want %d:\n%s", len(lines), len(want), stderr)
	}
	for _, w := range want {
		found := false
		for _, l := range lines {
			found = found || strings.HasPrefix(l, w)
		}
		if !found {
			t.Errorf("no line beginning %q in:\n%s", w, stderr)
		}
	}
	if strings.Contains(stderr, "literal-secret") {
		t.Error("stderr echoes an environment value")
	}
}

func TestConfigCheckOutsideWorkspace(t *testing.T) {
	h := newHost(t)
	if _, _, err := runApp(t, "config", "init"); err != nil {
		t.Fatal(err)
	}
	_, stderr, err := runApp(t, "config", "check", "--profile", "dev", "--workspace", h.dir)
	if exitCode(err) != 1 || !strings.Contains(stderr, "not a git workspace") {
		t.Fatalf("exit %d, stderr %q", exitCode(err), stderr)
	}
}

func TestConfigCheckMissingFile(t *testing.T) {
	h := newHost(t)
	_, stderr, err := runApp(t, "config", "check", "--profile", "dev", "--workspace", h.ws)
	if exitCode(err) != 1 || !strings.HasPrefix(stderr, h.file+": ") {
		t.Fatalf("exit %d, stderr %q", exitCode(err), stderr)
	}
}

func TestConfigCheckUnknownProfile(t *testing.T) {
	h := newHost(t)
	if _, _, err := runApp(t, "config", "init", "--config", filepath.Join(h.dir, "c.toml")); err != nil {
		t.Fatal(err)
	}
	_, stderr, err := runApp(t, "config", "check", "--profile", "Dev", "--workspace", h.ws, "--config", filepath.Join(h.dir, "c.toml"))
	if exitCode(err) != 1 || !strings.Contains(stderr, `profile "Dev" is not declared; declared profiles: "dev"`) {
		t.Fatalf("exit %d, stderr %q", exitCode(err), stderr)
	}
}

func TestConfigInitRejectsBadProfileName(t *testing.T) {
	h := newHost(t)
	if _, _, err := runApp(t, "config", "init", "--profile", ".."); err == nil {
		t.Fatal("init accepted profile name ..")
	}
	if _, err := os.Stat(h.file); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("init wrote a file for an invalid profile name")
	}
}

func TestConfigInitImage(t *testing.T) {
	h := newHost(t)
	if _, stderr, err := runApp(t, "config", "init", "--image", "localhost/lazaret-busybox:1"); err != nil {
		t.Fatalf("init: %v %s", err, stderr)
	}
	stdout, stderr, err := runApp(t, "config", "check", "--profile", "dev", "--workspace", h.ws, "--json")
	if err != nil {
		t.Fatalf("check: %v\n%s", err, stderr)
	}
	var report map[string]any
	if err := json.Unmarshal([]byte(stdout), &report); err != nil || report["image"] != "localhost/lazaret-busybox:1" {
		t.Fatalf("image = %v (%v)", report["image"], err)
	}
	for _, bad := range []string{"", "a\"b", "x\ny"} {
		if _, _, err := runApp(t, "config", "init", "--force", "--image", bad); err == nil {
			t.Errorf("init accepted --image %q", bad)
		}
	}
}

// TestConfigInitRuleExample enables the commented escalation example of
// the starter file: the configuration stays valid, and `config check`
// warns on stderr, naming the profile, rule index and executable, that
// extra options of git go to the prompt; the JSON output is unchanged.
func TestConfigInitRuleExample(t *testing.T) {
	h := newHost(t)
	if _, stderr, err := runApp(t, "config", "init", "--profile", "dev"); err != nil {
		t.Fatalf("init: %v %s", err, stderr)
	}
	if _, stderr, err := runApp(t, "config", "check", "--profile", "dev", "--workspace", h.ws); err != nil || strings.Contains(stderr, "warning") {
		t.Fatalf("check of the starter file: %v\n%s", err, stderr)
	}
	b, err := os.ReadFile(h.file)
	if err != nil {
		t.Fatal(err)
	}
	doc := strings.Replace(string(b), "enabled = false\n", "enabled = true\n", 1)
	for _, l := range []string{"[[profiles.dev.escalation.auto_approve]]", `executable = "/usr/bin/git"`, `args = ["fetch", "origin"]`, "allow_extra_args = true"} {
		if !strings.Contains(doc, "# "+l+"\n") {
			t.Fatalf("the starter file has no commented %q:\n%s", l, doc)
		}
		doc = strings.Replace(doc, "# "+l+"\n", l+"\n", 1)
	}
	if err := os.WriteFile(h.file, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, err := runApp(t, "config", "check", "--profile", "dev", "--workspace", h.ws, "--json")
	if err != nil {
		t.Fatalf("check with the example rule: %v\n%s", err, stderr)
	}
	want := h.file + `:`
	if !strings.HasPrefix(stderr, "warning: "+want) || !strings.Contains(stderr, `profiles.dev.escalation.auto_approve[0].allow_extra_args: allow_extra_args with /usr/bin/git: options of git can run commands or write files, so extra arguments beginning with "-" or "+" go to the prompt`) || strings.Count(stderr, "\n") != 1 {
		t.Errorf("stderr is not one warning naming the rule:\n%s", stderr)
	}
	var report struct {
		Rules []struct {
			Executable     string   `json:"executable"`
			Args           []string `json:"args"`
			AllowExtraArgs bool     `json:"allow_extra_args"`
		} `json:"auto_approval_rules"`
	}
	if err := json.Unmarshal([]byte(stdout), &report); err != nil || len(report.Rules) != 1 || !report.Rules[0].AllowExtraArgs {
		t.Errorf("JSON output %v: %s", err, stdout)
	}
	t.Logf("config check stderr: %s", stderr)
}

// setPresetKeys sets every preset's API key variable to a dummy value
// that the credential rules accept.
func setPresetKeys(t *testing.T) {
	t.Helper()
	for _, a := range agentPresets {
		t.Setenv(a.key.env, "test-"+strings.ToLower(a.key.env[:3])+"-0123456789abcdefDUMMY")
	}
}

func TestConfigInitAgentPresets(t *testing.T) {
	for _, agent := range agentNames() {
		t.Run(agent, func(t *testing.T) {
			// Without the API key set: the key and its credential are
			// written commented out, so the starter checks as written.
			h := newHost(t)
			if _, stderr, err := runApp(t, "config", "init", "--agent", agent); err != nil {
				t.Fatalf("init: %v %s", err, stderr)
			}
			stdout, stderr, err := runApp(t, "config", "check", "--profile", agent, "--workspace", h.ws, "--json")
			if err != nil {
				t.Fatalf("check of the %s preset: %v\n%s", agent, err, stderr)
			}
			if stderr != "" {
				t.Errorf("check warns: %s", stderr)
			}
			var report struct {
				Profile             string             `json:"profile"`
				SchemaVersion       int                `json:"schema_version"`
				EffectiveAllow      []string           `json:"effective_allow"`
				EffectiveAllowHosts []string           `json:"effective_allow_hosts"`
				EffectiveDenyHosts  []string           `json:"effective_deny_hosts"`
				Resolver            *string            `json:"resolver"`
				Credentials         []credentialReport `json:"credentials"`
				Readiness           struct {
					Denied []targetReport `json:"denied"`
					Hosts  []hostReport   `json:"hosts"`
				} `json:"readiness"`
			}
			if err := json.Unmarshal([]byte(stdout), &report); err != nil {
				t.Fatalf("output is not one JSON object: %v\n%s", err, stdout)
			}
			p := agentPresets[agent]
			if report.Profile != agent || report.SchemaVersion != 2 {
				t.Errorf("profile %q schema version %d", report.Profile, report.SchemaVersion)
			}
			if len(report.EffectiveAllow) != 0 {
				t.Errorf("the preset opens IPv4 prefixes: %v", report.EffectiveAllow)
			}
			for _, want := range []string{p.readiness, "registry.npmjs.org"} {
				if !slices.Contains(report.EffectiveAllowHosts, want) {
					t.Errorf("allow hosts %v lack %s", report.EffectiveAllowHosts, want)
				}
			}
			if len(report.EffectiveAllowHosts) != len(p.hosts) || report.EffectiveDenyHosts == nil {
				t.Errorf("allow hosts %v, deny hosts %v", report.EffectiveAllowHosts, report.EffectiveDenyHosts)
			}
			if report.Resolver == nil || *report.Resolver != "1.1.1.1" {
				t.Errorf("resolver %v", report.Resolver)
			}
			if len(report.Readiness.Hosts) != 1 || report.Readiness.Hosts[0] != (hostReport{p.readiness, 443}) {
				t.Errorf("readiness hosts %v", report.Readiness.Hosts)
			}
			if len(report.Readiness.Denied) != 1 || report.Readiness.Denied[0].Address != presetDeniedAddress {
				t.Errorf("readiness denied %v", report.Readiness.Denied)
			}
			k := p.key
			if len(report.Credentials) != 0 {
				t.Errorf("credentials %+v before the key is uncommented", report.Credentials)
			}
			data, err := os.ReadFile(h.file)
			if err != nil {
				t.Fatal(err)
			}
			// Uncommenting the key and its credential, as the comment
			// says, brokers the key.
			var keyed []string
			inCred := false
			for _, line := range strings.Split(string(data), "\n") {
				switch {
				case strings.HasPrefix(line, "# "+k.env+" = "):
					line = line[2:]
				case strings.HasPrefix(line, "# [[") && strings.HasSuffix(line, ".credentials]]"):
					line, inCred = line[2:], true
				case inCred && strings.HasPrefix(line, "# "):
					line = line[2:]
				default:
					inCred = false
				}
				keyed = append(keyed, line)
			}
			if err := os.WriteFile(h.file, []byte(strings.Join(keyed, "\n")), 0o600); err != nil {
				t.Fatal(err)
			}
			setPresetKeys(t)
			stdout, stderr, err = runApp(t, "config", "check", "--profile", agent, "--workspace", h.ws, "--json")
			if err != nil {
				t.Fatalf("check with the key uncommented: %v\n%s", err, stderr)
			}
			report.Credentials = nil
			if err := json.Unmarshal([]byte(stdout), &report); err != nil {
				t.Fatal(err)
			}
			wantCred := credentialReport{Env: k.env, Scheme: k.scheme, Header: k.header, Destinations: []string{k.host + ":443"}}
			if len(report.Credentials) != 1 || !reflect.DeepEqual(report.Credentials[0], wantCred) {
				t.Errorf("credentials %+v, want %+v", report.Credentials, wantCred)
			}
			if strings.Contains(stdout, os.Getenv(k.env)) {
				t.Error("the check report prints the API key")
			}
			for _, host := range p.hosts {
				if !strings.Contains(string(data), `"`+host.name+`", `) || !strings.Contains(string(data), "# "+host.why+"\n") {
					t.Errorf("%s is not written with its purpose", host.name)
				}
			}
			if !strings.Contains(string(data), "change it to a resolver you trust") {
				t.Error("the resolver comment is missing")
			}
			if !strings.Contains(string(data), "the sandbox sees") || !strings.Contains(string(data), "# hosts = [\""+k.host+"\"]") {
				t.Error("the brokered API key is not written with its comment")
			}
			text, _, err := runApp(t, "config", "check", "--profile", agent, "--workspace", h.ws)
			if err != nil || !strings.Contains(text, "name resolver:             1.1.1.1") || !strings.Contains(text, "readiness hosts:           "+p.readiness+":443") {
				t.Errorf("text output: %v\n%s", err, text)
			}
		})
	}
}

func TestConfigInitAgentProfileAndErrors(t *testing.T) {
	h := newHost(t)
	setPresetKeys(t)
	_, _, err := runApp(t, "config", "init", "--agent", "copilot")
	if err == nil || !strings.Contains(err.Error(), "claude, codex, gemini") {
		t.Errorf("unknown agent: %v", err)
	}
	if _, err := os.Stat(h.file); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("an unknown agent wrote a file: %v", err)
	}
	if _, stderr, err := runApp(t, "config", "init", "--agent", "codex", "--profile", "agent.ci"); err != nil {
		t.Fatalf("init: %v %s", err, stderr)
	}
	if _, stderr, err := runApp(t, "config", "check", "--profile", "agent.ci", "--workspace", h.ws); err != nil {
		t.Errorf("check of a renamed preset profile: %v %s", err, stderr)
	}
}
