//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// agentsOptIn enables TestAgentCLIs. The test downloads Claude Code and
// Codex from the npm registry (about 200 MB), writes an image tree of about
// 900 MB plus the stored image, and takes minutes, so `make e2e` skips it
// unless the variable is 1 (docs/AGENTS.md).
const agentsOptIn = "LAZARET_E2E_AGENTS"

// agentsDir, when set, names a directory that keeps the image tree and its
// storage root between runs; the image is rebuilt there only when
// scripts/make-agent-image changed since the last build.
const agentsDir = "LAZARET_E2E_AGENTS_DIR"

// Paths inside the agent image, as scripts/make-agent-image lays it out.
const (
	agentClaudeBin = "/opt/agents/node_modules/@anthropic-ai/claude-code-linux-x64/claude"
	agentCodexJS   = "/opt/agents/node_modules/@openai/codex/bin/codex.js"
)

// agentImageEnv is the environment the image's config sets; the bare runsc
// runs use the same.
var agentImageEnv = []string{
	"PATH=/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
	"HOME=/home/agent",
	"SHELL=/bin/bash",
	"SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt",
	"IS_SANDBOX=1",
	"DISABLE_AUTOUPDATER=1",
}

// agentCase is one CLI and the exact line its --version must print.
type agentCase struct {
	name string
	argv []string
	want string
}

// TestAgentCLIs builds localhost/lazaret-agents:1 with
// scripts/make-agent-image into a private storage root and shows that
// Claude Code and Codex start and answer --version inside gVisor with no
// network, and that Claude Code completes a Bash tool call: on bare runsc
// (both platforms), then through `lazaret-cli exec` when the built binaries
// have exec and the coordinator's serve.
func TestAgentCLIs(t *testing.T) {
	if os.Getenv(agentsOptIn) != "1" {
		t.Skipf("skipping: set %s=1 to build the agent image from the npm registry (minutes, about 1.5 GB of disk) and run Claude Code and Codex in gVisor", agentsOptIn)
	}
	bin := binDir(t)
	runsc := agentRunsc(t, bin)
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(repo, "scripts", "make-agent-image")
	claudeVersion, codexVersion := agentPins(t, script)
	cases := []agentCase{
		{"claude", []string{"claude", "--version"}, claudeVersion + " (Claude Code)"},
		{"codex", []string{"codex", "--version"}, "codex-cli " + codexVersion},
	}

	imageDir := os.Getenv(agentsDir)
	if imageDir == "" {
		imageDir = t.TempDir()
	}
	rootfs := agentBuildImage(t, script, bin, imageDir)

	t.Run("bare-runsc", func(t *testing.T) {
		for _, platform := range []string{"systrap", "ptrace"} {
			for _, c := range cases {
				t.Run(platform+"/"+c.name, func(t *testing.T) {
					got, inSandbox := agentBareRun(t, runsc, rootfs, platform, c.argv)
					if got != c.want+"\n" {
						t.Fatalf("%s in bare runsc (%s): stdout %q, want %q", strings.Join(c.argv, " "), platform, got, c.want+"\n")
					}
					onHost := agentHostRun(t, rootfs, c)
					t.Logf("bare runsc %s, %s: sandbox %v, host %v, ratio %.1f",
						platform, strings.Join(c.argv, " "), inSandbox.Round(time.Millisecond),
						onHost.Round(time.Millisecond), float64(inSandbox)/float64(onHost))
				})
			}
		}
	})

	// --version never reaches Claude Code's event loop, where gVisor
	// trouble was reported (a tool call starts and waits for a child):
	// answer one Bash tool call from a Messages API double on the
	// sandbox's loopback.
	t.Run("bare-runsc-claude-tool-call", func(t *testing.T) {
		dir := t.TempDir()
		for name, body := range map[string]string{"api.js": agentAPIDouble, "tool.sh": agentToolScript} {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		mount := map[string]any{"destination": "/double", "type": "bind", "source": dir, "options": []string{"rbind", "ro"}}
		for _, platform := range []string{"systrap", "ptrace"} {
			t.Run(platform, func(t *testing.T) {
				got, took := agentBareRun(t, runsc, rootfs, platform, []string{"/bin/sh", "/double/tool.sh"}, mount)
				// tool-42 is what the command printed; the command text
				// itself holds $((6*7)), so only a run tool produces it.
				if !strings.Contains(got, "tool said: \"tool-42\"") || !strings.Contains(got, "claude exit 0") {
					t.Fatalf("claude -p with a Bash tool call in bare runsc (%s) printed:\n%s", platform, got)
				}
				t.Logf("bare runsc %s: claude -p with one Bash tool call took %v", platform, took.Round(time.Millisecond))
			})
		}
	})

	t.Run("lazaret-cli-exec", func(t *testing.T) {
		if missing := agentProductMissing(t, bin); missing != "" {
			t.Skipf("skipping the product path: %s; the bare-runsc subtests ran the same tree", missing)
		}
		home := t.TempDir()
		env, cfg, ws := agentDomain(t, home, filepath.Join(imageDir, "data"), runsc, bin)
		t.Cleanup(func() { agentWaitTeardown(t, env) })
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				args := append([]string{"exec", "--profile", "agents", "--workspace", ws, "--config", cfg, "--linger", "2s", "--"}, c.argv...)
				start := time.Now()
				stdout, stderr, code := run(t, env, "lazaret-cli", args...)
				took := time.Since(start)
				if code != 0 || stdout != c.want+"\n" {
					agentDumpLogs(t, home)
					t.Fatalf("lazaret-cli exec -- %s: exit %d, stdout %q, want %q\nstderr:\n%s",
						strings.Join(c.argv, " "), code, stdout, c.want+"\n", stderr)
				}
				t.Logf("lazaret-cli exec -- %s took %v", strings.Join(c.argv, " "), took.Round(time.Millisecond))
			})
		}
	})
}

// agentBuildImage runs scripts/make-agent-image with the storage root
// dir/data/lazaret and the kept tree dir/rootfs, unless dir/stamp records a
// build by the same script. It returns the tree.
func agentBuildImage(t *testing.T, script, bin, dir string) string {
	t.Helper()
	b, err := os.ReadFile(script)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	want := hex.EncodeToString(sum[:]) + "\n"
	rootfs := filepath.Join(dir, "rootfs")
	data := filepath.Join(dir, "data")
	stamp := filepath.Join(dir, "stamp")
	if got, err := os.ReadFile(stamp); err == nil && string(got) == want {
		if _, err := os.Stat(filepath.Join(rootfs, agentClaudeBin)); err == nil {
			t.Logf("reusing the agent image in %s (built by this script)", dir)
			return rootfs
		}
	}
	for _, p := range []string{stamp, rootfs, data} {
		if err := os.RemoveAll(p); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	cmd := exec.Command(script, "--storage-root", filepath.Join(data, "lazaret"), "--rootfs", rootfs)
	cmd.Env = append(os.Environ(), "LAZARET_CLI="+filepath.Join(bin, "lazaret-cli"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make-agent-image: %v\n%s", err, out)
	}
	t.Logf("make-agent-image took %v:\n%s", time.Since(start).Round(time.Second), out)
	if err := os.WriteFile(stamp, []byte(want), 0o600); err != nil {
		t.Fatal(err)
	}
	return rootfs
}

// agentAPIDouble answers Claude Code's Messages API requests: a request
// offering the Bash tool and holding no tool result gets a streamed
// tool_use of `echo tool-$((6*7))`; any other request gets a text reply
// quoting the tool result it carries.
const agentAPIDouble = `const http = require('http');
http.createServer((req, res) => {
  let body = '';
  req.on('data', (c) => { body += c; });
  req.on('end', () => {
    if (req.method !== 'POST' || !req.url.startsWith('/v1/messages')) {
      res.writeHead(404, {'content-type': 'application/json'});
      res.end('{"type":"error","error":{"type":"not_found_error","message":"no such endpoint"}}');
      return;
    }
    let r = {};
    try { r = JSON.parse(body); } catch (e) {}
    const last = (r.messages || []).slice(-1)[0] || {};
    const result = (Array.isArray(last.content) ? last.content : []).find((p) => p.type === 'tool_result');
    const bash = (r.tools || []).some((t) => t.name === 'Bash');
    const block = bash && !result
      ? {type: 'tool_use', id: 'toolu_double', name: 'Bash', input: {command: 'echo tool-$((6*7))', description: 'print a number'}}
      : {type: 'text', text: 'tool said: ' + (result ? JSON.stringify(result.content) : 'nothing')};
    const stop = block.type === 'tool_use' ? 'tool_use' : 'end_turn';
    const usage = {input_tokens: 1, output_tokens: 1, cache_creation_input_tokens: 0, cache_read_input_tokens: 0};
    const msg = {id: 'msg_double', type: 'message', role: 'assistant', model: r.model || 'double', stop_sequence: null, usage};
    if (!r.stream) {
      res.writeHead(200, {'content-type': 'application/json'});
      res.end(JSON.stringify({...msg, content: [block], stop_reason: stop}));
      return;
    }
    const events = [['message_start', {message: {...msg, content: [], stop_reason: null}}]];
    if (block.type === 'text') {
      events.push(['content_block_start', {index: 0, content_block: {type: 'text', text: ''}}]);
      events.push(['content_block_delta', {index: 0, delta: {type: 'text_delta', text: block.text}}]);
    } else {
      events.push(['content_block_start', {index: 0, content_block: {...block, input: {}}}]);
      events.push(['content_block_delta', {index: 0, delta: {type: 'input_json_delta', partial_json: JSON.stringify(block.input)}}]);
    }
    events.push(['content_block_stop', {index: 0}]);
    events.push(['message_delta', {delta: {stop_reason: stop, stop_sequence: null}, usage: {output_tokens: 1}}]);
    events.push(['message_stop', {}]);
    res.writeHead(200, {'content-type': 'text/event-stream'});
    for (const [type, data] of events) res.write('event: ' + type + '\ndata: ' + JSON.stringify({type, ...data}) + '\n\n');
    res.end();
  });
}).listen(8765, '127.0.0.1', () => console.error('api double listening'));
`

// agentToolScript starts the API double in the sandbox and asks Claude Code
// for one Bash tool call; it prints Claude's output and its exit status.
const agentToolScript = `node /double/api.js 2>/tmp/api.log &
i=0
until grep -q listening /tmp/api.log 2>/dev/null; do
	i=$((i + 1))
	[ $i -gt 200 ] && { echo "api double did not start"; cat /tmp/api.log; exit 1; }
	sleep 0.1
done
cd /workspace
ANTHROPIC_BASE_URL=http://127.0.0.1:8765 ANTHROPIC_API_KEY=sk-ant-double claude -p "run the echo" --allowedTools Bash
echo "claude exit $?"
`

// agentRunsc is the runsc the end-to-end suite uses: $LAZARET_RUNSC, else
// the one `make runsc` put beside the binaries.
func agentRunsc(t *testing.T, bin string) string {
	t.Helper()
	p := os.Getenv("LAZARET_RUNSC")
	if p == "" {
		p = filepath.Join(bin, "runsc")
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("runsc: %v (run `make runsc`, or set LAZARET_RUNSC)", err)
	}
	return p
}

// agentPins reads the pinned versions from the script, so that moving a
// pin needs no change here.
func agentPins(t *testing.T, script string) (claude, codex string) {
	t.Helper()
	b, err := os.ReadFile(script)
	if err != nil {
		t.Fatal(err)
	}
	pin := func(name string) string {
		m := regexp.MustCompile(`(?m)^` + name + `=([0-9][0-9A-Za-z.+-]*)$`).FindSubmatch(b)
		if m == nil {
			t.Fatalf("%s: no %s= line", script, name)
		}
		return string(m[1])
	}
	return pin("claude_version"), pin("codex_version")
}

// agentBareRun runs argv as the image's user (root) in a fresh sandbox on
// rootfs with bare `runsc run`, the flags Lazaret passes (docs/RUNSC.md) and
// no network. It returns stdout and the time from start to exit.
func agentBareRun(t *testing.T, runsc, rootfs, platform string, argv []string, extraMounts ...map[string]any) (string, time.Duration) {
	t.Helper()
	bundle := t.TempDir()
	spec := map[string]any{
		"ociVersion": "1.0.2",
		"process": map[string]any{
			"terminal":        false,
			"user":            map[string]any{"uid": 0, "gid": 0},
			"args":            argv,
			"env":             agentImageEnv,
			"cwd":             "/workspace",
			"noNewPrivileges": true,
			"capabilities":    map[string]any{"bounding": []string{}, "effective": []string{}, "permitted": []string{}},
		},
		"root":     map[string]any{"path": rootfs, "readonly": true},
		"hostname": "sandbox",
		"mounts": []map[string]any{
			{"destination": "/proc", "type": "proc", "source": "proc"},
			{"destination": "/dev", "type": "tmpfs", "source": "tmpfs", "options": []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
			{"destination": "/sys", "type": "sysfs", "source": "sysfs", "options": []string{"nosuid", "noexec", "nodev", "ro"}},
			{"destination": "/tmp", "type": "tmpfs", "source": "tmpfs", "options": []string{"nosuid", "nodev", "mode=1777"}},
			{"destination": "/home/agent", "type": "tmpfs", "source": "tmpfs", "options": []string{"nosuid", "nodev", "mode=1777"}},
		},
		"linux": map[string]any{"namespaces": []map[string]string{
			{"type": "pid"}, {"type": "ipc"}, {"type": "uts"}, {"type": "mount"}, {"type": "network"},
		}},
	}
	spec["mounts"] = append(spec["mounts"].([]map[string]any), extraMounts...)
	b, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bundle, "config.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	state := t.TempDir()
	id := fmt.Sprintf("agents-%s-%d", platform, time.Now().UnixNano())
	flags := []string{
		"--root=" + state, "--platform=" + platform, "--network=none", "--ignore-cgroups",
		"--host-uds=none", "--host-fifo=none", "--gofer-network-namespace=new",
	}
	if os.Geteuid() != 0 {
		flags = append(flags, "--rootless")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, runsc, append(flags, "run", "--bundle", bundle, id)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err = cmd.Run()
	elapsed := time.Since(start)
	if ctx.Err() != nil {
		_ = exec.Command(runsc, append(flags, "delete", "--force", id)...).Run()
		t.Fatalf("%s in bare runsc (%s) did not finish within 2 minutes; stdout %q, stderr %q",
			strings.Join(argv, " "), platform, stdout.String(), stderr.String())
	}
	if err != nil {
		t.Fatalf("%s in bare runsc (%s): %v\nstdout %q\nstderr %q", strings.Join(argv, " "), platform, err, stdout.String(), stderr.String())
	}
	return stdout.String(), elapsed
}

// agentHostRun runs the same CLI from the tree directly on the host (the
// host's loader and libraries; for codex the host's node) and returns the
// time from start to exit, as the reference for the sandbox's ratio.
func agentHostRun(t *testing.T, rootfs string, c agentCase) time.Duration {
	t.Helper()
	var cmd *exec.Cmd
	switch c.name {
	case "claude":
		cmd = exec.Command(filepath.Join(rootfs, agentClaudeBin), c.argv[1:]...)
	case "codex":
		cmd = exec.Command(filepath.Join(rootfs, "usr/local/bin/node"), append([]string{filepath.Join(rootfs, agentCodexJS)}, c.argv[1:]...)...)
	default:
		t.Fatalf("no host command for %q", c.name)
	}
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "DISABLE_AUTOUPDATER=1")
	start := time.Now()
	out, err := cmd.Output()
	elapsed := time.Since(start)
	if err != nil || string(out) != c.want+"\n" {
		t.Fatalf("%s on the host: %v, stdout %q, want %q", c.name, err, out, c.want+"\n")
	}
	return elapsed
}

// agentProductMissing names what the built binaries lack for `lazaret-cli
// exec` (the exec command, or a coordinator with its serve command), or
// returns "" when both are there.
func agentProductMissing(t *testing.T, bin string) string {
	t.Helper()
	for _, c := range []struct{ binary, command string }{
		{"lazaret-cli", "exec"},
		{"lazaret-coordinator", "serve"},
	} {
		out, _, code := run(t, nil, c.binary, c.command, "--help")
		if code != 0 || !strings.Contains(out, c.binary+" "+c.command) {
			return fmt.Sprintf("%s has no %s command", filepath.Join(bin, c.binary), c.command)
		}
	}
	return ""
}

// agentDomain prepares an isolated user for the product path: XDG
// directories under home whose data home is dataHome (it holds the storage
// root the image was stored in), a configuration with the profile "agents",
// and a git workspace.
func agentDomain(t *testing.T, home, dataHome, runsc, bin string) (env []string, cfg, ws string) {
	t.Helper()
	runtimeDir := filepath.Join(home, "run")
	if err := os.Mkdir(runtimeDir, 0o700); err != nil {
		t.Fatal(err)
	}
	env = []string{
		"HOME=" + home,
		"XDG_CONFIG_HOME=" + filepath.Join(home, "config"),
		"XDG_DATA_HOME=" + dataHome,
		"XDG_RUNTIME_DIR=" + runtimeDir,
		"LAZARET_CONFIG=",
		"LAZARET_LIBEXEC_DIR=" + bin,
		"LAZARET_RUNSC=" + runsc,
	}
	dir := filepath.Join(home, "config", "lazaret")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	cfg = filepath.Join(dir, "config.toml")
	doc := `schema = "lazaret-trusted-host-config-v1"
[profiles.agents]
image = "localhost/lazaret-agents:1"
persistent_dirs = ["/home/agent"]
allow_egress = ["198.51.100.0/24"]
[profiles.agents.readiness]
denied = [{ address = "198.19.0.1", port = 443 }]
permitted = [{ address = "198.51.100.1", port = 443 }]
dns = [{ resolver = "198.51.100.53", query = "example.com" }]
`
	if err := os.WriteFile(cfg, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	return env, cfg, gitWorkspace(t)
}

// agentDumpLogs logs every coordinator.log under home's runtime directory.
func agentDumpLogs(t *testing.T, home string) {
	t.Helper()
	logs, _ := filepath.Glob(filepath.Join(home, "run", "lazaret", "domains", "*", "coordinator.log"))
	for _, l := range logs {
		b, err := os.ReadFile(l)
		if err != nil {
			t.Logf("%s: %v", l, err)
			continue
		}
		t.Logf("%s:\n%s", l, b)
	}
}

// agentWaitTeardown waits until `lazaret-cli status --json` shows no
// Domain lock held, so the temporary directories go after the sandbox.
func agentWaitTeardown(t *testing.T, env []string) {
	t.Helper()
	var last error
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		out, stderr, code := run(t, env, "lazaret-cli", "status", "--json")
		if code != 0 {
			last = fmt.Errorf("status: exit %d: %s", code, stderr)
			continue
		}
		var st struct {
			Domains []struct {
				Lock string `json:"lock"`
			} `json:"domains"`
		}
		if err := json.Unmarshal([]byte(out), &st); err != nil {
			last = fmt.Errorf("status --json printed %q: %w", out, err)
			continue
		}
		held := false
		for _, d := range st.Domains {
			held = held || d.Lock == "held"
		}
		if !held {
			return
		}
		last = errors.New("a Domain lock is still held")
	}
	t.Errorf("the agents Domain did not stop within 60 s: %v", last)
}

// TestClaudeCodeInteractiveFirstScreen runs Claude Code the way a developer
// does, `lazaret-cli start --profile agents -- claude` in a terminal (tmux),
// with no network. The first-run state is seeded into the persistent home by
// an earlier generation. Claude Code must draw its workspace trust dialog,
// then, once the folder is trusted, its welcome screen and empty prompt;
// `/exit` must end the session with exit status 0 and leave the terminal
// mode as it was, and the trust must be kept in the persistent home.
func TestClaudeCodeInteractiveFirstScreen(t *testing.T) {
	if os.Getenv(agentsOptIn) != "1" {
		t.Skipf("skipping: set %s=1 to build the agent image from the npm registry (minutes, about 1.5 GB of disk) and run Claude Code in gVisor", agentsOptIn)
	}
	bin := binDir(t)
	runsc := agentRunsc(t, bin)
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(repo, "scripts", "make-agent-image")
	claudeVersion, _ := agentPins(t, script)
	imageDir := os.Getenv(agentsDir)
	if imageDir == "" {
		imageDir = t.TempDir()
	}
	agentBuildImage(t, script, bin, imageDir)
	if missing := agentProductMissing(t, bin); missing != "" {
		t.Skipf("skipping: %s", missing)
	}
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Fatal("tmux is required for the interactive end-to-end tests")
	}

	home := t.TempDir()
	env, cfg, ws := agentDomain(t, home, filepath.Join(imageDir, "data"), runsc, bin)
	t.Cleanup(func() { agentWaitTeardown(t, env) })
	t.Cleanup(func() {
		if t.Failed() {
			agentDumpLogs(t, home)
		}
	})
	s := &sandbox{t: t, env: env, home: home, config: cfg, workspace: ws}
	agentExec := func(argv ...string) string {
		t.Helper()
		args := append([]string{"exec", "--profile", "agents", "--workspace", ws, "--config", cfg, "--linger", "0s", "--"}, argv...)
		stdout, stderr, code := run(t, env, "lazaret-cli", args...)
		if code != 0 {
			t.Fatalf("lazaret-cli exec -- %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(argv, " "), code, stdout, stderr)
		}
		return stdout
	}

	// Without this state an interactive claude first checks that it can
	// reach api.anthropic.com, and with no network it exits.
	agentExec("/bin/sh", "-c", `printf '{"hasCompletedOnboarding": true}\n' > /home/agent/.claude.json`)
	// The seeding generation ends before the session starts, so the file
	// reaches Claude Code across generations, through the persistent dir.
	agentWaitTeardown(t, env)

	tm := agentTerminal(s, "claude", "claude")
	tm.waitScreen("Yes, I trust this folder", 3*time.Minute)
	scr := tm.screen()
	t.Logf("Claude Code's first screen:\n%s", scr)
	for _, want := range []string{"Accessing workspace:", "/workspace", "Quick safety check", "❯ No, exit"} {
		if !strings.Contains(scr, want) {
			t.Fatalf("the trust dialog lacks %q; screen:\n%s", want, scr)
		}
	}

	// A key sent right after the dialog appears is at times not acted on
	// (the selection stays on "No, exit"), so Down is repeated until the
	// selection moves.
	moved := false
	for presses := 1; presses <= 10 && !moved; presses++ {
		tm.send("Down")
		for wait := time.Now().Add(3 * time.Second); time.Now().Before(wait); time.Sleep(100 * time.Millisecond) {
			if strings.Contains(tm.screen(), "❯ Yes, I trust this folder") {
				moved = true
				if presses > 1 {
					t.Logf("the trust dialog's selection moved after %d presses of Down", presses)
				}
				break
			}
		}
	}
	if !moved {
		t.Fatalf("the trust dialog's selection never reached \"Yes, I trust this folder\"; screen:\n%s", tm.screen())
	}
	tm.send("Enter")
	// The empty input line: the marker, then a no-break space where the
	// cursor sits.
	prompt := regexp.MustCompile(`(?m)^❯[ \x{a0}]*$`)
	tm.waitScreen("Claude Code v"+claudeVersion, time.Minute)
	deadline := time.Now().Add(30 * time.Second)
	for scr = tm.screen(); !prompt.MatchString(scr); scr = tm.screen() {
		if time.Now().After(deadline) {
			t.Fatalf("Claude Code drew no empty prompt line; screen:\n%s", scr)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("Claude Code's screen after trusting the folder:\n%s", scr)
	for _, want := range []string{"/workspace", "Not logged in"} {
		if !strings.Contains(scr, want) {
			t.Errorf("the welcome screen lacks %q", want)
		}
	}

	tm.send("/exit")
	tm.waitScreen("Exit the CLI", 30*time.Second)
	tm.send("Enter")
	tm.finish("0")

	agentWaitTeardown(t, env)
	var state struct {
		Onboarded bool `json:"hasCompletedOnboarding"`
		Projects  map[string]struct {
			Trusted bool `json:"hasTrustDialogAccepted"`
		} `json:"projects"`
	}
	out := agentExec("cat", "/home/agent/.claude.json")
	if err := json.Unmarshal([]byte(out), &state); err != nil {
		t.Fatalf("/home/agent/.claude.json after the session: %v\n%s", err, out)
	}
	if !state.Onboarded || !state.Projects["/workspace"].Trusted {
		t.Errorf("/home/agent/.claude.json after the session does not record onboarding and the trusted /workspace:\n%s", out)
	}
}

// agentTerminal is a tmux session of 120x40 running `lazaret-cli start
// --profile agents --linger 0s -- ARGV` in the sandbox's agents Domain,
// through the same wrapper as terminal: it records the terminal mode before
// and after and the exit code, so send, waitScreen and finish apply.
func agentTerminal(s *sandbox, name string, argv ...string) *terminal {
	s.t.Helper()
	tm := &terminal{s: s, name: name, socket: e2eSocket(s.home), dir: filepath.Join(s.home, name)}
	if err := os.Mkdir(tm.dir, 0o700); err != nil {
		s.t.Fatal(err)
	}
	quoted := make([]string, len(argv))
	for i, a := range argv {
		quoted[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	body := fmt.Sprintf("#!/bin/sh\nstty -g > %[1]s/before\n%[2]s start --profile agents --workspace %[3]s --config %[4]s --linger 0s -- %[5]s\necho $? > %[1]s/code.tmp && mv %[1]s/code.tmp %[1]s/code\nstty -g > %[1]s/after\nexec sleep 600\n",
		tm.dir, filepath.Join(binDir(s.t), "lazaret-cli"), s.workspace, s.config, strings.Join(quoted, " "))
	script := filepath.Join(tm.dir, "run.sh")
	if err := os.WriteFile(script, []byte(body), 0o700); err != nil {
		s.t.Fatal(err)
	}
	args := []string{"-L", tm.socket, "-f", "/dev/null", "new-session", "-d", "-x", "120", "-y", "40", "-s", name}
	for _, kv := range s.env {
		args = append(args, "-e", kv)
	}
	tm.tmux(append(args, script)...)
	s.t.Cleanup(func() { exec.Command("tmux", "-L", tm.socket, "kill-session", "-t", name).Run() })
	return tm
}
