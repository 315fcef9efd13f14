//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"lazaret.dev/pkg/netlab"
)

// agentBrokerConfig is a v2 profile on the agent image whose two API keys
// are brokered credentials of one host variable: ANTHROPIC_API_KEY in
// x-api-key and OPENAI_API_KEY as a bearer token, both only to the test
// internet's API double, whose certificate caFile vouches for.
func agentBrokerConfig(caFile string) string {
	api := netlab.DynamicName(netlab.APIHost, 60)
	return fmt.Sprintf(`schema = "lazaret-trusted-host-config-v2"
[profiles.agents]
image = "localhost/lazaret-agents:1"
persistent_dirs = ["/home/agent"]
allow_hosts = ["*.%[1]s"]
resolver = %[2]q
[profiles.agents.env]
ANTHROPIC_API_KEY = "env:LZ_E2E_AGENT_KEY"
OPENAI_API_KEY = "env:LZ_E2E_AGENT_KEY"
[[profiles.agents.credentials]]
env = "ANTHROPIC_API_KEY"
hosts = [%[3]q]
port = %[4]d
scheme = "header"
header = "x-api-key"
upstream_ca = %[5]q
[[profiles.agents.credentials]]
env = "OPENAI_API_KEY"
hosts = [%[3]q]
port = %[4]d
scheme = "bearer"
upstream_ca = %[5]q
[profiles.agents.readiness]
denied = [{ address = "198.19.0.1", port = 443 }]
hosts = [{ name = %[3]q, port = %[4]d }]
`, netlab.DynamicSuffix, netlab.InternetResolver.String(), api, netlab.TLSPort, caFile)
}

// codexScript configures Codex for the Responses API double at api and
// asks it one question; @API@ stands for the double's URL.
const codexScript = `mkdir -p "$HOME/.codex" && cat > "$HOME/.codex/config.toml" <<EOF
model = "double-model"
model_provider = "double"
[model_providers.double]
name = "double"
base_url = "@API@/v1"
env_key = "OPENAI_API_KEY"
wire_api = "responses"
EOF
cd /workspace && codex exec --skip-git-repo-check "say pong" </dev/null; echo "codex exit $?"`

// TestAgentsThroughCredentialBroker runs Claude Code and Codex in the
// agent image with placeholder API keys against the test internet's API
// doubles, through the credential broker: the doubles answer only the
// real key, which the sandbox never holds. Claude Code completes a Bash
// tool call; Codex prints the double's answer.
func TestAgentsThroughCredentialBroker(t *testing.T) {
	if os.Getenv(agentsOptIn) != "1" {
		t.Skipf("skipping: set %s=1 to build the agent image from the npm registry and run Claude Code and Codex through the credential broker", agentsOptIn)
	}
	netlab.NeedInternet(t)
	bin := binDir(t)
	runsc := agentRunsc(t, bin)
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	imageDir := os.Getenv(agentsDir)
	if imageDir == "" {
		imageDir = t.TempDir()
	}
	agentBuildImage(t, filepath.Join(repo, "scripts", "make-agent-image"), bin, imageDir)
	if missing := agentProductMissing(t, bin); missing != "" {
		t.Skipf("skipping: %s", missing)
	}
	home := t.TempDir()
	env, cfg, ws := agentDomain(t, home, filepath.Join(imageDir, "data"), runsc, bin)
	caFile := filepath.Join(home, "test-internet-ca.pem")
	if err := os.WriteFile(caFile, netlab.TestCAPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg, []byte(agentBrokerConfig(caFile)), 0o600); err != nil {
		t.Fatal(err)
	}
	env = append(env, "LZ_E2E_AGENT_KEY="+netlab.BrokerSecret)
	t.Cleanup(func() { agentWaitTeardown(t, env) })
	api := fmt.Sprintf("https://%s:%d", netlab.DynamicName(netlab.APIHost, 60), netlab.TLSPort)
	exec := func(t *testing.T, script string) (string, string, int, time.Duration) {
		t.Helper()
		start := time.Now()
		stdout, stderr, code := run(t, env, "lazaret-cli", "exec", "--profile", "agents", "--workspace", ws, "--config", cfg,
			"--linger", "30s", "--", "sh", "-c", script)
		return stdout, stderr, code, time.Since(start)
	}

	t.Run("placeholders only", func(t *testing.T) {
		out, errs, code, _ := exec(t, `printf '%s\n%s\n' "$ANTHROPIC_API_KEY" "$OPENAI_API_KEY"`)
		if code != 0 || strings.Contains(out, netlab.BrokerSecret) || strings.Count(out, "lzt-real-") != 2 {
			agentDumpLogs(t, home)
			t.Fatalf("exit %d stdout %q stderr %q", code, out, errs)
		}
	})
	t.Run("claude", func(t *testing.T) {
		out, errs, code, took := exec(t, "cd /workspace && ANTHROPIC_BASE_URL="+api+
			` claude -p "run the echo" --allowedTools Bash; echo "claude exit $?"`)
		if code != 0 || !strings.Contains(out, `tool said: "tool-42"`) || !strings.Contains(out, "claude exit 0") {
			agentDumpLogs(t, home)
			t.Fatalf("claude -p through the broker: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errs)
		}
		t.Logf("claude -p with one Bash tool call through the broker took %v", took.Round(time.Millisecond))
	})
	t.Run("codex", func(t *testing.T) {
		out, errs, code, took := exec(t, strings.Replace(codexScript, "@API@", api, 1))
		if code != 0 || !strings.Contains(out, "pong from the double") || !strings.Contains(out, "codex exit 0") {
			agentDumpLogs(t, home)
			t.Fatalf("codex exec through the broker: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errs)
		}
		t.Logf("codex exec through the broker took %v", took.Round(time.Millisecond))
	})
}
