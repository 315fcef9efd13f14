package kubetest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	sandboxv1beta1 "sigs.k8s.io/agent-sandbox/api/v1beta1"
	strictjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"lazaret.dev/pkg/kube"
	"lazaret.dev/pkg/netpolicy"
	"lazaret.dev/pkg/netpolicy/policytest"
)

var (
	sandboxes       = schema.GroupVersionResource{Group: "agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxes"}
	networkPolicies = schema.GroupVersionResource{Group: "networking.k8s.io", Version: "v1", Resource: "networkpolicies"}
)

// strict creates every call with server-side strict field validation: an
// unknown or duplicated field is an error, not a warning.
var strict = metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict}

// list is the JSON form `kube render --json` writes.
type list struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Items      []json.RawMessage `json:"items"`
}

// namespace makes a fresh namespace with a default service account (no
// controller manager runs to make it).
func (c *cluster) namespace(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	if _, err := c.core.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, strict); err != nil {
		t.Fatal(err)
	}
	if _, err := c.core.CoreV1().ServiceAccounts(name).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, strict); err != nil {
		t.Fatal(err)
	}
}

// validate decodes each rendered item strictly into its upstream type,
// creates it with strict field validation, reads it back and checks that
// everything rendered is stored unchanged; then it dry-runs the pod and
// claims the Sandbox controller would make from a Sandbox.
func (c *cluster) validate(t *testing.T, ctx context.Context, ns string, rendered []byte) {
	t.Helper()
	var l list
	if err := strictjson.UnmarshalCaseSensitivePreserveInts(rendered, &l); err != nil {
		t.Fatalf("the rendering is not a List: %v", err)
	}
	if l.APIVersion != "v1" || l.Kind != "List" || len(l.Items) != 2 {
		t.Fatalf("List %s/%s with %d items", l.APIVersion, l.Kind, len(l.Items))
	}
	for _, raw := range l.Items {
		var meta struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name      string `json:"name"`
				Namespace string `json:"namespace"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(raw, &meta); err != nil {
			t.Fatal(err)
		}
		if meta.Metadata.Namespace != "" && meta.Metadata.Namespace != ns {
			t.Fatalf("%s %s is for namespace %q, the test made %q", meta.Kind, meta.Metadata.Name, meta.Metadata.Namespace, ns)
		}
		var gvr schema.GroupVersionResource
		switch meta.Kind {
		case "NetworkPolicy":
			var np networkingv1.NetworkPolicy
			decodeStrict(t, raw, &np)
			gvr = networkPolicies
		case "Sandbox":
			var sb sandboxv1beta1.Sandbox
			decodeStrict(t, raw, &sb)
			gvr = sandboxes
			c.dryRunPod(t, ctx, ns, &sb)
		default:
			t.Fatalf("unexpected kind %q", meta.Kind)
		}
		var obj unstructured.Unstructured
		if err := obj.UnmarshalJSON(raw); err != nil {
			t.Fatal(err)
		}
		created, err := c.dynamic.Resource(gvr).Namespace(ns).Create(ctx, &obj, strict)
		if err != nil {
			t.Fatalf("creating %s %s: %v", meta.Kind, meta.Metadata.Name, err)
		}
		got, err := c.dynamic.Resource(gvr).Namespace(ns).Get(ctx, created.GetName(), metav1.GetOptions{})
		if err != nil {
			t.Fatalf("reading %s %s back: %v", meta.Kind, meta.Metadata.Name, err)
		}
		var sent map[string]any
		if err := json.Unmarshal(raw, &sent); err != nil {
			t.Fatal(err)
		}
		back, err := json.Marshal(got.Object)
		if err != nil {
			t.Fatal(err)
		}
		var stored map[string]any
		json.Unmarshal(back, &stored)
		delete(sent["metadata"].(map[string]any), "namespace")
		if path, ok := subset(sent, stored, meta.Kind); !ok {
			t.Errorf("%s %s: the API server stored something else at %s", meta.Kind, meta.Metadata.Name, path)
		}
	}
}

// decodeStrict decodes raw into v refusing unknown fields, duplicate
// fields and fields whose case differs from the type's.
func decodeStrict(t *testing.T, raw []byte, v any) {
	t.Helper()
	strictErrs, err := strictjson.UnmarshalStrict(raw, v, strictjson.DisallowUnknownFields)
	if err != nil {
		t.Fatalf("decoding into %T: %v", v, err)
	}
	if len(strictErrs) > 0 {
		t.Fatalf("decoding into %T: %v", v, strictErrs)
	}
}

// subset reports whether every value of sent is in stored at the same
// place (the server may add defaults, never drop or change a field).
func subset(sent, stored any, path string) (string, bool) {
	if stored == nil && isEmpty(sent) {
		// The API server stores an empty list or object as absent
		// (omitempty in its types); both mean the same.
		return "", true
	}
	switch s := sent.(type) {
	case map[string]any:
		g, ok := stored.(map[string]any)
		if !ok {
			return path, false
		}
		for k, v := range s {
			if p, ok := subset(v, g[k], path+"."+k); !ok {
				return p, false
			}
		}
		return "", true
	case []any:
		g, ok := stored.([]any)
		if !ok || len(g) != len(s) {
			return path, false
		}
		for i := range s {
			if p, ok := subset(s[i], g[i], fmt.Sprintf("%s[%d]", path, i)); !ok {
				return p, false
			}
		}
		return "", true
	}
	return path, reflect.DeepEqual(sent, stored)
}

func isEmpty(v any) bool {
	switch x := v.(type) {
	case []any:
		return len(x) == 0
	case map[string]any:
		return len(x) == 0
	}
	return false
}

// dryRunPod makes the pod and claims the agent-sandbox controller makes
// for sb (its podTemplate, plus one volume per claim template named after
// the template and bound to the claim "<template>-<sandbox>") and creates
// them as server-side dry runs: the API server's Pod and claim validation
// judge exactly what the controller would submit.
func (c *cluster) dryRunPod(t *testing.T, ctx context.Context, ns string, sb *sandboxv1beta1.Sandbox) {
	t.Helper()
	dry := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldValidation: metav1.FieldValidationStrict}
	spec := sb.Spec.PodTemplate.Spec.DeepCopy()
	for _, tmpl := range sb.Spec.VolumeClaimTemplates {
		claim := &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: tmpl.Name + "-" + sb.Name, Labels: tmpl.Labels},
			Spec:       tmpl.Spec,
		}
		if _, err := c.core.CoreV1().PersistentVolumeClaims(ns).Create(ctx, claim, dry); err != nil {
			t.Errorf("claim %s: %v", claim.Name, err)
		}
		spec.Volumes = append(spec.Volumes, corev1.Volume{Name: tmpl.Name, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim.Name},
		}})
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: sb.Name, Labels: sb.Spec.PodTemplate.ObjectMeta.Labels, Annotations: sb.Spec.PodTemplate.ObjectMeta.Annotations},
		Spec:       *spec,
	}
	if _, err := c.core.CoreV1().Pods(ns).Create(ctx, pod, dry); err != nil {
		t.Errorf("the Sandbox's pod: %v", err)
	}
}

// yamlDocuments returns the JSON of each document of a YAML stream, read
// by the YAML library kubectl uses.
func yamlDocuments(t *testing.T, stream []byte) [][]byte {
	t.Helper()
	var out [][]byte
	for _, doc := range bytes.Split(stream, []byte("\n---\n")) {
		if strings.TrimSpace(stripComments(string(doc))) == "" {
			continue
		}
		j, err := yaml.YAMLToJSONStrict(doc)
		if err != nil {
			t.Fatalf("YAML document does not parse: %v\n%s", err, doc)
		}
		out = append(out, j)
	}
	return out
}

func stripComments(s string) string {
	var b strings.Builder
	for _, line := range strings.Split(s, "\n") {
		if !strings.HasPrefix(line, "#") && line != "---" {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

// sameJSON compares two JSON documents as values.
func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatal(err)
	}
	return reflect.DeepEqual(x, y)
}

// checkYAML holds the YAML rendering to the JSON one: each document,
// read by the YAML library kubectl uses, is the JSON item.
func checkYAML(t *testing.T, yamlOut, jsonOut []byte) {
	t.Helper()
	var l list
	if err := json.Unmarshal(jsonOut, &l); err != nil {
		t.Fatal(err)
	}
	docs := yamlDocuments(t, yamlOut)
	if len(docs) != len(l.Items) {
		t.Fatalf("%d YAML documents, %d JSON items", len(docs), len(l.Items))
	}
	for i := range docs {
		if !sameJSON(t, docs[i], l.Items[i]) {
			t.Errorf("YAML document %d reads as\n%s\nnot\n%s", i, docs[i], l.Items[i])
		}
	}
}

const commit = "89abcdef0123456789abcdef0123456789abcdef"

// TestPlannerOnAPIServer renders hand-made profiles and random policies
// with the planner and validates every object on the API server.
func TestPlannerOnAPIServer(t *testing.T) {
	c := startCluster(t)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(37, 1))
	for i := range 12 {
		t.Run(fmt.Sprintf("policy-%d", i), func(t *testing.T) {
			ns := fmt.Sprintf("planner-%d", i)
			c.namespace(t, ctx, ns)
			pol := randomPolicy(t, rng)
			in := kube.Input{
				Profile: fmt.Sprintf("Random_%d", i), Image: "registry.example/agent:1", ImageUser: []string{"", "1000", "1000:100", "0"}[i%4],
				Policy:         pol,
				Targets:        netpolicy.Targets{Denied: []netpolicy.Destination{{Address: netip.MustParseAddr("10.0.0.1"), Port: 443}}},
				Env:            []kube.EnvRef{{Name: "API_KEY", HostName: "HOST_API_KEY"}},
				PersistentDirs: []string{"/home/agent/.config", "/root/.cache/tool"},
				Workspace:      kube.Workspace{URL: "https://git.example/r.git", Commit: commit, Branch: []string{"", "main"}[i%2]},
			}
			plan, err := kube.Render(in, kube.Options{Namespace: ns, ProberImage: "registry.example/lazaret-prober:1", StorageClass: []string{"", "standard"}[i%2]})
			if err != nil {
				t.Fatal(err)
			}
			var j, y bytes.Buffer
			if err := kube.JSON(&j, plan.Objects()); err != nil {
				t.Fatal(err)
			}
			if err := kube.YAML(&y, []string{"test"}, plan.Objects()); err != nil {
				t.Fatal(err)
			}
			checkYAML(t, y.Bytes(), j.Bytes())
			c.validate(t, ctx, ns, j.Bytes())
		})
	}
}

// randomPolicy draws a policy with nested allow and deny prefixes.
func randomPolicy(t *testing.T, rng *rand.Rand) *netpolicy.DerivedNetworkPolicy {
	t.Helper()
	for {
		allow, deny := policytest.NestedSets(rng)
		p, err := netpolicy.Derive(allow, append(deny, netpolicy.RFC1918...), []netip.Addr{netip.MustParseAddr("1.1.1.1"), netip.MustParseAddr("9.9.9.9")})
		if err == nil {
			return p
		}
	}
}

// TestValidationIsLive shows that the checks above can fail: the API
// server refuses an unknown field in a Sandbox's pod spec, an except
// block outside its cidr, and a pod whose mount names no volume.
func TestValidationIsLive(t *testing.T) {
	c := startCluster(t)
	ctx := context.Background()
	c.namespace(t, ctx, "live")
	sb := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "agents.x-k8s.io/v1beta1", "kind": "Sandbox",
		"metadata": map[string]any{"name": "bogus"},
		"spec": map[string]any{"podTemplate": map[string]any{"spec": map[string]any{
			"containers": []any{map[string]any{"name": "a", "image": "x"}},
			"bogusField": true,
		}}},
	}}
	if _, err := c.dynamic.Resource(sandboxes).Namespace("live").Create(ctx, sb, strict); err == nil || !strings.Contains(err.Error(), "bogusField") {
		t.Errorf("a Sandbox with an unknown pod field: %v", err)
	}
	np := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "outside"},
		Spec: networkingv1.NetworkPolicySpec{
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
			Egress: []networkingv1.NetworkPolicyEgressRule{{To: []networkingv1.NetworkPolicyPeer{{
				IPBlock: &networkingv1.IPBlock{CIDR: "10.1.0.0/16", Except: []string{"10.2.0.0/24"}},
			}}}},
		},
	}
	if _, err := c.core.NetworkingV1().NetworkPolicies("live").Create(ctx, np, strict); !apierrors.IsInvalid(err) {
		t.Errorf("an except block outside its cidr: %v", err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "nomount"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "a", Image: "x",
			VolumeMounts: []corev1.VolumeMount{{Name: "workspace", MountPath: "/workspace"}}}}},
	}
	if _, err := c.core.CoreV1().Pods("live").Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); !apierrors.IsInvalid(err) {
		t.Errorf("a pod mounting a volume it lacks: %v", err)
	}
}

// cliConfig is a configuration with profiles a developer would render.
const cliConfig = `schema = "lazaret-trusted-host-config-v2"

[storage]

[network]
default_allow = []
default_deny = []
allow_hosts = []
deny_hosts = []

[profiles.agent]
image = "registry.example/agent:3"
isolate_gitignored = true
persistent_dirs = ["/home/agent"]
allow_egress = ["0.0.0.0/0"]
deny_egress = ["100.64.0.0/10"]

[profiles.agent.env]
ANTHROPIC_API_KEY = "env:ANTHROPIC_API_KEY"
GH_TOKEN = "env:LAZARET_TEST_GH"

[profiles.agent.readiness]
denied = [{ address = "10.0.0.1", port = 443 }, { address = "100.64.0.1", port = 80 }]
permitted = [{ address = "1.1.1.1", port = 443 }]
dns = [{ resolver = "1.1.1.1", query = "example.com" }]

[profiles.agent.escalation]
enabled = false

[profiles.narrow]
image = "registry.example/narrow@sha256:0000000000000000000000000000000000000000000000000000000000000000"
isolate_gitignored = true
persistent_dirs = []
allow_egress = ["140.82.112.0/20", "160.79.104.0/23"]
deny_egress = ["160.79.104.128/25"]

[profiles.narrow.readiness]
denied = [{ address = "160.79.104.200", port = 443 }]
permitted = [{ address = "140.82.112.3", port = 443 }]
dns = [{ resolver = "9.9.9.9", query = "github.com" }, { resolver = "149.112.112.112", query = "github.com" }]

[profiles.narrow.escalation]
enabled = true

[profiles.named]
image = "registry.example/named:1"
isolate_gitignored = true
persistent_dirs = []
allow_egress = ["151.101.0.0/16"]
deny_egress = []
allow_hosts = ["registry.npmjs.org"]
deny_hosts = []
resolver = "1.1.1.1"

[profiles.named.readiness]
denied = [{ address = "8.8.8.8", port = 443 }]
dns = [{ resolver = "1.1.1.1", query = "registry.npmjs.org" }]
hosts = [{ name = "registry.npmjs.org", port = 443 }]

[profiles.named.escalation]
enabled = false
`

// TestCLIRenderOnAPIServer runs the built lazaret-cli on a real
// configuration and git workspace and validates what it prints, YAML and
// JSON, on the API server.
func TestCLIRenderOnAPIServer(t *testing.T) {
	cli := need(t, "LAZARET_E2E_BIN", "lazaret-cli", "run make build and set LAZARET_E2E_BIN=$PWD/bin")
	c := startCluster(t)
	ctx := context.Background()
	home := t.TempDir()
	ws := filepath.Join(home, "ws")
	gitRun := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = ws
		cmd.Env = append(os.Environ(), "HOME="+home, "GIT_CONFIG_NOSYSTEM=1",
			"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	os.MkdirAll(ws, 0o755)
	gitRun("init", "-q", "-b", "main")
	gitRun("remote", "add", "origin", "https://git.example/team/app.git")
	os.WriteFile(filepath.Join(ws, "README"), []byte("app\n"), 0o644)
	gitRun("add", ".")
	gitRun("commit", "-q", "-m", "one")
	cfgFile := filepath.Join(home, "config.toml")
	if err := os.WriteFile(cfgFile, []byte(cliConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) ([]byte, string, error) {
		cmd := exec.Command(cli, append([]string{"kube", "render", "--config", cfgFile, "--workspace", ws}, args...)...)
		cmd.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "XDG_DATA_HOME=" + filepath.Join(home, "data"),
			"XDG_RUNTIME_DIR=" + filepath.Join(home, "run")}
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		return stdout.Bytes(), stderr.String(), err
	}
	cases := []struct {
		profile string
		args    []string
	}{
		{"agent", []string{"--namespace", "cli-agent", "--image-user", "1000:1000"}},
		{"narrow", []string{"--namespace", "cli-narrow", "--name", "narrow-1", "--storage-class", "standard", "--run-as-user", "2000", "--git-image", "registry.example/git:2"}},
		{"named", []string{"--namespace", "cli-named", "--without-host-names"}},
	}
	for _, tc := range cases {
		t.Run(tc.profile, func(t *testing.T) {
			ns := tc.args[1]
			c.namespace(t, ctx, ns)
			args := append([]string{"--profile", tc.profile}, tc.args...)
			y, stderr, err := run(args...)
			if err != nil {
				t.Fatalf("kube render: %v\n%s", err, stderr)
			}
			j, stderr, err := run(append(args, "--json")...)
			if err != nil {
				t.Fatalf("kube render --json: %v\n%s", err, stderr)
			}
			if strings.Contains(string(y)+string(j), "kube-render-stand-in") {
				t.Fatal("a stand-in value reached the rendering")
			}
			checkYAML(t, y, j)
			c.validate(t, ctx, ns, j)
		})
	}
	// The named profile without the flag is refused, naming the field.
	if _, stderr, err := run("--profile", "named"); err == nil || !strings.Contains(stderr, "profiles.named allows host names (registry.npmjs.org)") {
		t.Errorf("named profile without --without-host-names: err=%v\n%s", err, stderr)
	}
}
