//go:build e2e

package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// gitWorkspace makes a fresh git repository and returns its canonical path.
func gitWorkspace(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("git", "init", "-q", dir).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v: %s", err, out)
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	return real
}

// userEnv isolates the XDG directories of one test.
func userEnv(t *testing.T) []string {
	home := t.TempDir()
	return []string{
		"HOME=" + home,
		"XDG_CONFIG_HOME=" + filepath.Join(home, "config"),
		"XDG_DATA_HOME=" + filepath.Join(home, "data"),
		"XDG_RUNTIME_DIR=",
		"LAZARET_CONFIG=",
	}
}

func TestConfigInitThenCheckJSON(t *testing.T) {
	ws := gitWorkspace(t)
	env := userEnv(t)
	if out, errOut, code := run(t, env, "lazaret-cli", "config", "init", "--profile", "claude"); code != 0 {
		t.Fatalf("config init: code %d\n%s\n%s", code, out, errOut)
	}
	// A second init must not overwrite the developer's file.
	if _, errOut, code := run(t, env, "lazaret-cli", "config", "init", "--profile", "claude"); code == 0 {
		t.Fatalf("second config init overwrote the file: %s", errOut)
	}
	out, errOut, code := run(t, env, "lazaret-cli", "config", "check", "--profile", "claude", "--workspace", ws, "--json")
	if code != 0 {
		t.Fatalf("config check: code %d\n%s", code, errOut)
	}
	var got struct {
		Profile     string   `json:"profile"`
		Workspace   string   `json:"workspace"`
		StorageRoot string   `json:"storage_root"`
		RuntimeRoot string   `json:"runtime_root"`
		DomainID    string   `json:"domain_id"`
		Fingerprint string   `json:"configuration_fingerprint"`
		Allow       []string `json:"effective_allow"`
		Deny        []string `json:"effective_deny"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("config check --json printed %q: %v", out, err)
	}
	hex64 := regexp.MustCompile(`^[0-9a-f]{64}$`)
	if got.Profile != "claude" || got.Workspace != ws || !hex64.MatchString(got.DomainID) || !hex64.MatchString(got.Fingerprint) {
		t.Errorf("unexpected result: %+v", got)
	}
	if got.StorageRoot == "" || got.RuntimeRoot == "" {
		t.Errorf("roots missing: %+v", got)
	}
	for _, p := range []string{"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"} {
		if !contains(got.Deny, p) {
			t.Errorf("effective deny %v lacks %s", got.Deny, p)
		}
	}
	// check has no side effects: neither root was created.
	for _, p := range []string{got.StorageRoot, got.RuntimeRoot} {
		if _, err := os.Stat(p); err == nil && strings.HasPrefix(p, envValue(env, "HOME")) {
			t.Errorf("config check created %s", p)
		}
	}
}

func TestConfigCheckReportsEveryProblem(t *testing.T) {
	ws := gitWorkspace(t)
	env := userEnv(t)
	cfg := filepath.Join(t.TempDir(), "config.toml")
	doc := `schema = "lazaret-trusted-host-config-v1"
[profiles.dev]
image = "localhost/agent:1"
persistent_dirs = ["/home/agent", "relative"]
allow_egress = ["10.0.0.0/8"]
[profiles.dev.readiness]
denied = [{ address = "198.51.100.1", port = 443 }]
permitted = [{ address = "192.0.2.1", port = 0 }]
dns = [{ resolver = "192.0.2.53", query = "example.com" }]
`
	if err := os.WriteFile(cfg, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := run(t, env, "lazaret-cli", "config", "check", "--profile", "dev", "--workspace", ws, "--config", cfg)
	if code != 1 || out != "" {
		t.Fatalf("want exit 1 and no stdout; got %d, stdout %q", code, out)
	}
	for _, want := range []string{
		cfg + ":4:", "profiles.dev.persistent_dirs[1]",
		cfg + ":5:", "profiles.dev.allow_egress[0]",
		"profiles.dev.readiness.permitted[0].port",
	} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
	if lines := strings.Count(strings.TrimSpace(errOut), "\n") + 1; lines < 3 {
		t.Errorf("want one line per problem (>= 3), got %d:\n%s", lines, errOut)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func envValue(env []string, key string) string {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, key+"="); ok {
			return v
		}
	}
	return ""
}
