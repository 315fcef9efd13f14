package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// kubeHost is a host with a committed workspace whose origin is url, and
// the configuration text cfg.
func kubeHost(t *testing.T, url, cfg string) *host {
	t.Helper()
	h := newHost(t)
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = h.ws
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	if url != "" {
		git("remote", "add", "origin", url)
	}
	os.WriteFile(filepath.Join(h.ws, "f"), []byte("x"), 0o644)
	git("add", "f")
	git("commit", "-q", "-m", "one")
	os.MkdirAll(filepath.Dir(h.file), 0o700)
	if err := os.WriteFile(h.file, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return h
}

const kubeV1 = `schema = "lazaret-trusted-host-config-v1"
[storage]
[network]
default_allow = []
default_deny = []
[profiles.dev]
image = "registry.example/dev:1"
isolate_gitignored = true
persistent_dirs = []
allow_egress = ["1.1.1.1/32"]
deny_egress = []
[profiles.dev.env]
TOKEN = "env:LAZARET_KUBE_TEST_TOKEN"
[profiles.dev.readiness]
denied = [{ address = "8.8.8.8", port = 443 }]
permitted = [{ address = "1.1.1.1", port = 443 }]
dns = [{ resolver = "1.1.1.1", query = "registry.npmjs.org" }]
[profiles.dev.escalation]
enabled = false
`

// TestKubeRender renders a v1 profile: the Secret's command names the
// key and host variable, no value (the variable is not even set) is
// read, and the policy is in the output.
func TestKubeRender(t *testing.T) {
	h := kubeHost(t, "https://git.example/a.git", kubeV1)
	os.Unsetenv("LAZARET_KUBE_TEST_TOKEN")
	stdout, stderr, err := runApp(t, "kube", "render", "--workspace", h.ws, "--image-user", "1000")
	if err != nil {
		t.Fatalf("render: %v\n%s", err, stderr)
	}
	for _, want := range []string{
		`kubectl create secret generic lazaret-dev --from-literal=TOKEN="$LAZARET_KUBE_TEST_TOKEN"`,
		"kind: Sandbox", "kind: NetworkPolicy", `cidr: "1.1.1.1/32"`, "runAsUser: 1000", "runtimeClassName: gvisor",
		`image: "localhost/lazaret-prober:1"`, `value: "https://git.example/a.git"`,
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if strings.Contains(stdout, "stand-in") {
		t.Error("the stand-in value reached the output")
	}
	if !strings.Contains(stderr, "is on no branch of remote origin") {
		t.Errorf("no warning about the unpushed commit: %q", stderr)
	}
}

// TestKubeRenderRefuses names what it cannot carry to a cluster.
func TestKubeRenderRefuses(t *testing.T) {
	cases := []struct {
		name, url, cfg string
		args           []string
		want           string
	}{
		{"ssh remote", "git@github.com:a/b.git", kubeV1, nil, "the cluster clones over https"},
		{"local remote", "/srv/git/a.git", kubeV1, nil, "the cluster clones over https"},
		{"credentials in URL", "https://user:tok@git.example/a.git", kubeV1, nil, "holds credentials"},
		{"no remote", "", kubeV1, nil, `has no git remote "origin"`},
		{"bad remote flag", "https://git.example/a.git", kubeV1, []string{"--git-remote", "-x"}, "not a remote name"},
		{"named user", "https://git.example/a.git", kubeV1, []string{"--image-user", "node"}, `image user: "node" is a name`},
		{"bad namespace", "https://git.example/a.git", kubeV1, []string{"--namespace", "A"}, "--namespace"},
		{"named run-as-user", "https://git.example/a.git", kubeV1, []string{"--run-as-user", "node"}, `--run-as-user "node"`},
		{"negative run-as-user", "https://git.example/a.git", kubeV1, []string{"--run-as-user", "-5"}, `--run-as-user "-5"`},
		{"credentials", "https://git.example/a.git", strings.Replace(strings.Replace(kubeV1, "v1", "v2", 1),
			"[profiles.dev.readiness]", `[[profiles.dev.credentials]]
env = "TOKEN"
hosts = ["api.example.com"]
scheme = "bearer"
[profiles.dev.readiness]`, 1), nil, "profiles.dev.credentials"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := c.cfg
			if c.name == "credentials" {
				cfg = strings.Replace(cfg, `allow_egress = ["1.1.1.1/32"]`, `allow_egress = ["1.1.1.1/32"]
allow_hosts = ["api.example.com"]
deny_hosts = []
resolver = "1.1.1.1"`, 1)
				cfg = strings.Replace(cfg, "[profiles.dev.escalation]", "hosts = [{ name = \"api.example.com\", port = 443 }]\n[profiles.dev.escalation]", 1)
				cfg = strings.Replace(cfg, "default_deny = []", "default_deny = []\nallow_hosts = []\ndeny_hosts = []", 1)
			}
			h := kubeHost(t, c.url, cfg)
			_, stderr, err := runApp(t, append([]string{"kube", "render", "--workspace", h.ws}, c.args...)...)
			if err == nil || !strings.Contains(stderr, c.want) {
				t.Fatalf("err=%v, stderr=%q, want it to contain %q", err, stderr, c.want)
			}
		})
	}
}

// TestKubeRenderSandboxBranch: HEAD and the refs are the sandbox's to
// write. A branch named like shell syntax, or a HEAD written by hand to
// a ref that begins with a dash, is rendered detached with a warning,
// never handed to git in the pod.
func TestKubeRenderSandboxBranch(t *testing.T) {
	for _, ref := range []string{"x;touch${IFS}pwned", "-f"} {
		h := kubeHost(t, "https://git.example/a.git", kubeV1)
		head, err := exec.Command("git", "-C", h.ws, "rev-parse", "HEAD").Output()
		if err != nil {
			t.Fatal(err)
		}
		// What the sandbox can do: write the ref and HEAD as files.
		refPath := filepath.Join(h.ws, ".git", "refs", "heads", ref)
		if err := os.WriteFile(refPath, head, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(h.ws, ".git", "HEAD"), []byte("ref: refs/heads/"+ref+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		stdout, stderr, err := runApp(t, "kube", "render", "--workspace", h.ws, "--image-user", "1000")
		if err != nil {
			t.Fatalf("%q: %v\n%s", ref, err, stderr)
		}
		if !strings.Contains(stderr, "is not a plain branch name; the clone checks the commit out detached") {
			t.Errorf("%q: no warning: %q", ref, stderr)
		}
		if strings.Contains(stdout, "pwned") || strings.Contains(stdout, "value: \"-f\"") || strings.Contains(stdout, "value: -f") {
			t.Errorf("%q reached the rendering", ref)
		}
	}
}
