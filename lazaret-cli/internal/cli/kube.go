package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"lazaret.dev/pkg/config"
	"lazaret.dev/pkg/image/store"
	"lazaret.dev/pkg/kube"
	"lazaret.dev/pkg/netpolicy"
	"lazaret.dev/pkg/netprofile"
	"lazaret.dev/pkg/paths"
)

// DefaultProberImage is the tag `make prober-image` gives the readiness
// prober's image.
const DefaultProberImage = "localhost/lazaret-prober:1"

func kubeCommand() *cli.Command {
	return &cli.Command{
		Name:  "kube",
		Usage: "run a profile on Kubernetes (agent-sandbox with gVisor)",
		Subcommands: []*cli.Command{{
			Name:  "render",
			Usage: "write the Sandbox and NetworkPolicy of a profile, changing nothing",
			Description: "Renders the selected profile as an agents.x-k8s.io Sandbox running its image under\n" +
				"a gVisor RuntimeClass and a NetworkPolicy admitting exactly the profile's IPv4 policy.\n" +
				"The pod proves readiness with the profile's targets before the agent starts and\n" +
				"clones the workspace's remote at its HEAD commit. env: references become keys of a\n" +
				"Secret; no value is read or written. See docs/KUBERNETES.md.",
			Flags: []cli.Flag{
				profileFlag(), workspaceFlag(), configFileFlag(),
				&cli.StringFlag{Name: "namespace", Usage: "namespace `NS` of every object (default: none, kubectl's current)"},
				&cli.StringFlag{Name: "name", Usage: "Sandbox (and pod) `NAME` (default: lazaret-PROFILE)"},
				&cli.StringFlag{Name: "runtime-class", Value: kube.DefaultRuntimeClass, Usage: "the gVisor RuntimeClass `NAME`"},
				&cli.StringFlag{Name: "secret", Usage: "Secret `NAME` holding the env: references' values (default: the Sandbox's name)"},
				&cli.StringFlag{Name: "prober-image", Value: DefaultProberImage, Usage: "readiness prober `IMAGE` (make prober-image; push it where the cluster pulls)"},
				&cli.StringFlag{Name: "git-image", Usage: "`IMAGE` with sh and git that clones the workspace (default: the profile's image)"},
				&cli.StringFlag{Name: "git-remote", Value: "origin", Usage: "the workspace's git remote `NAME` the cluster clones"},
				&cli.StringFlag{Name: "git-url", Usage: "clone this `URL` instead of the remote's URL"},
				&cli.StringFlag{Name: "storage-size", Value: kube.DefaultStorageSize, Usage: "`SIZE` of each volume claim"},
				&cli.StringFlag{Name: "storage-class", Usage: "StorageClass `NAME` of the volume claims (default: the cluster's)"},
				&cli.StringFlag{Name: "run-as-user", Usage: "run the pod as `UID` (default: the image's numeric user, when it is not root)"},
				&cli.StringFlag{Name: "image-user", Usage: "the image's user as `UID[:GID]`, when the image is not in the local store"},
				&cli.StringFlag{Name: "probe-timeout", Value: kube.DefaultProbeTimeout, Usage: "how long each readiness probe may take (`DURATION`)"},
				&cli.BoolFlag{Name: "without-host-names", Usage: "render a profile with allow_hosts by its address policy alone (the named hosts are unreachable)"},
				jsonFlag("a Kubernetes List instead of YAML documents"),
			},
			Action: runKubeRender,
		}},
	}
}

func runKubeRender(c *cli.Context) error {
	stdout, stderr := c.App.Writer, c.App.ErrWriter
	if stderr == nil {
		stderr = os.Stderr
	}
	if c.Args().Len() > 0 {
		return failCode(c, 2, "kube render takes no arguments, got %q", c.Args().Slice())
	}
	// No value behind an env: reference is read: the cluster takes them
	// from a Secret. Every reference resolves to a stand-in that passes
	// the value rules and is never printed.
	env := paths.FromProcess()
	env.LookupEnv = func(name string) (string, bool) {
		switch name {
		case "HOME", "USER", "LOGNAME", "LAZARET_CONFIG":
			return os.LookupEnv(name)
		}
		if strings.HasPrefix(name, "XDG_") {
			return os.LookupEnv(name)
		}
		return "kube-render-stand-in-0000000000000000", true
	}
	cfg, file, err := resolveDomainIn(c, 1, env)
	if err != nil {
		return err
	}
	defer cfg.Close()
	at := "profiles." + cfg.Profile()
	if creds := cfg.Credentials(); len(creds) > 0 {
		return failCode(c, 1, "%s: %s.credentials: the credential broker does not exist in a cluster; its real value would enter the pod. Render a profile without credentials", file, at)
	}
	var warnings []string
	warn := func(format string, args ...any) { warnings = append(warnings, fmt.Sprintf(format, args...)) }
	for _, v := range cfg.Volumes() {
		warn("%s.volumes: %s comes from the host directory %s, which the cluster does not have; it is left out", at, v.Record.ContainerPath, v.Record.CanonicalHostSource)
	}
	if cfg.EscalationEnabled() {
		warn("%s.escalation: host escalation does not exist in the cluster; lazaret-guest run fails there", at)
	}

	pol, targets, err := netprofile.PolicyOf(cfg)
	if err != nil {
		return failCode(c, 1, "%v", err)
	}
	if pol.HasNames() {
		if !c.Bool("without-host-names") {
			return failCode(c, 1, "%s: %s allows host names (%s); a NetworkPolicy admits addresses only. Give --without-host-names to render the address policy alone, under which those names are unreachable",
				file, at, strings.Join(cfg.EffectiveAllowHosts(), ", "))
		}
		if pol, err = addressPolicy(cfg, targets); err != nil {
			return failCode(c, 1, "%s: %s: %v", file, at, err)
		}
		if len(targets.Hosts) > 0 {
			warn("%s.readiness.hosts: host targets are not probed in the cluster (--without-host-names)", at)
		}
		targets.Hosts = nil
	}

	ws, err := workspaceSource(cfg.Workspace(), c.String("git-remote"), c.String("git-url"))
	if err != nil {
		return failCode(c, 1, "%v", err)
	}
	warnings = append(warnings, ws.warnings...)

	in := kube.Input{
		Profile: cfg.Profile(), Image: cfg.Image(), Fingerprint: cfg.Fingerprint().String(),
		Policy: pol, Targets: targets, PersistentDirs: cfg.PersistentDirs(), Workspace: ws.Workspace,
	}
	for _, r := range cfg.EnvironmentReferences() {
		in.Env = append(in.Env, kube.EnvRef{Name: r.SandboxName, HostName: r.HostName})
	}
	opts := kube.Options{
		Name: c.String("name"), Namespace: c.String("namespace"), RuntimeClass: c.String("runtime-class"),
		Secret: c.String("secret"), ProberImage: c.String("prober-image"), GitImage: c.String("git-image"),
		StorageSize: c.String("storage-size"), StorageClass: c.String("storage-class"), ProbeTimeout: c.String("probe-timeout"),
	}
	if v := c.String("run-as-user"); c.IsSet("run-as-user") {
		uid, err := strconv.ParseInt(v, 10, 32)
		if err != nil || uid < 0 {
			return failCode(c, 2, "--run-as-user %q: give a numeric uid of 0 or more", v)
		}
		opts.RunAsUser = &uid
	}
	switch u, known := imageUser(c, cfg); {
	case c.IsSet("image-user"):
		in.ImageUser = c.String("image-user")
	case known:
		in.ImageUser = u
	case opts.RunAsUser == nil:
		warn("image %s is not in the local store, so its user is unknown; the pod runs as the image says (give --image-user or --run-as-user to pin a non-root uid)", cfg.Image())
	}
	plan, err := kube.Render(in, opts)
	if err != nil {
		return failCode(c, 1, "%s: %s: %v", file, at, err)
	}
	for _, w := range warnings {
		fmt.Fprintln(stderr, "warning: "+w)
	}
	if c.Bool("json") {
		return kube.JSON(stdout, plan.Objects())
	}
	return kube.YAML(stdout, renderHeader(cfg, plan, in), plan.Objects())
}

// renderHeader is the comment at the top of the YAML: where it came from
// and what to do with it.
func renderHeader(cfg *config.ResolvedDomainConfiguration, plan *kube.Plan, in kube.Input) []string {
	h := []string{
		fmt.Sprintf("Lazaret profile %s, configuration %s, workspace %s at %s.", cfg.Profile(), cfg.Fingerprint(), in.Workspace.URL, in.Workspace.Commit),
		"Needs the agent-sandbox controller, a gVisor RuntimeClass and a CNI that enforces NetworkPolicy (docs/KUBERNETES.md).",
	}
	ns := ""
	if plan.NetworkPolicy.Metadata.Namespace != "" {
		ns = " -n " + plan.NetworkPolicy.Metadata.Namespace
	}
	if len(plan.SecretKeys) > 0 {
		h = append(h, "First create the Secret (values are never rendered):")
		line := "  kubectl" + ns + " create secret generic " + plan.SecretName
		for _, e := range in.Env {
			line += fmt.Sprintf(" --from-literal=%s=\"$%s\"", e.Name, e.HostName)
		}
		h = append(h, line)
	}
	h = append(h,
		"Apply:   kubectl"+ns+" apply -f FILE",
		"Attach:  kubectl"+ns+" exec -it "+plan.Sandbox.Metadata.Name+" -c "+kube.ContainerAgent+" -- sh",
		"",
	)
	return h
}

// addressPolicy is the v1 policy of a profile with host names: its
// effective prefix sets and the resolvers of its DNS targets.
func addressPolicy(cfg *config.ResolvedDomainConfiguration, t netpolicy.Targets) (*netpolicy.DerivedNetworkPolicy, error) {
	var resolvers []netip.Addr
	for _, d := range t.DNS {
		if !slices.Contains(resolvers, d.Resolver) {
			resolvers = append(resolvers, d.Resolver)
		}
	}
	if len(resolvers) == 0 {
		return nil, errors.New("readiness.dns: the address policy needs a resolver, and the profile names none")
	}
	return netpolicy.Derive(cfg.EffectiveAllow(), cfg.EffectiveDeny(), resolvers)
}

// imageUser reads the profile image's User from the local image store,
// without creating the store; known is false when the image is not there.
func imageUser(c *cli.Context, cfg *config.ResolvedDomainConfiguration) (user string, known bool) {
	dir := filepath.Join(cfg.StorageRoot(), "images")
	if _, err := os.Stat(filepath.Join(dir, "index.json")); err != nil {
		return "", false
	}
	st, err := store.Open(dir, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		return "", false
	}
	img, err := st.Open(cfg.Image())
	if err != nil {
		return "", false
	}
	defer img.Close()
	return img.Config.Config.User, true
}

// source is the commit the cluster clones, and what the developer should
// know about it.
type source struct {
	kube.Workspace
	warnings []string
}

// workspaceSource reads the workspace's remote URL, HEAD commit and
// branch. git runs with every GIT_* variable removed, reading only the
// repository's configuration (which the sandbox cannot write), its refs
// and commits, never the work tree (no status: nothing of the tree's
// content reaches a filter). The branch, which the sandbox can set, is
// kept only when it is a plain name.
// The URL must be one a cluster can fetch without the developer's keys:
// https (or http, with a warning), carrying no credentials.
func workspaceSource(ws, remote, override string) (*source, error) {
	src := &source{}
	u := override
	if u == "" {
		if remote == "" || strings.HasPrefix(remote, "-") {
			return nil, fmt.Errorf("--git-remote %q: not a remote name", remote)
		}
		out, err := gitIn(ws, "config", "--get", "remote."+remote+".url")
		if err != nil || out == "" {
			return nil, fmt.Errorf("workspace %s has no git remote %q (give --git-remote NAME or --git-url URL)", ws, remote)
		}
		u = out
	}
	parsed, err := url.Parse(u)
	switch {
	case err != nil || parsed.Host == "" || (parsed.Scheme != "https" && parsed.Scheme != "http"):
		return nil, fmt.Errorf("git remote URL %q: the cluster clones over https (an SSH or local remote needs keys or files the cluster does not have); give --git-url https://", u)
	case parsed.User != nil:
		return nil, fmt.Errorf("git remote URL of %s holds credentials; they would be written into the Sandbox object. Give --git-url without them", ws)
	case parsed.Scheme == "http":
		src.warnings = append(src.warnings, fmt.Sprintf("git remote %s is plain http: the clone is neither private nor authenticated", u))
	}
	commit, err := gitIn(ws, "rev-parse", "--verify", "-q", "HEAD^{commit}")
	if err != nil || commit == "" {
		return nil, fmt.Errorf("workspace %s has no commit at HEAD; commit and push first", ws)
	}
	branch, _ := gitIn(ws, "symbolic-ref", "-q", "--short", "HEAD")
	if branch != "" && kube.CheckBranch(branch) != nil {
		src.warnings = append(src.warnings, fmt.Sprintf("branch %q is not a plain branch name; the clone checks the commit out detached", branch))
		branch = ""
	}
	src.Workspace = kube.Workspace{URL: u, Commit: commit, Branch: branch}
	if override == "" {
		if refs, _ := gitIn(ws, "for-each-ref", "--contains", commit, "--format=%(refname)", "refs/remotes/"+remote+"/"); refs == "" {
			src.warnings = append(src.warnings, fmt.Sprintf("commit %s is on no branch of remote %s that this clone knows of; push it before the pod starts", commit, remote))
		}
	}
	return src, nil
}

// gitIn runs git in dir in paths.GitEnviron, fsmonitor off, and returns
// its trimmed standard output.
func gitIn(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", append([]string{"--no-pager", "-c", "core.fsmonitor=false"}, args...)...)
	cmd.Dir = dir
	cmd.Env = paths.GitEnviron()
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	err := cmd.Run()
	return strings.TrimSpace(stdout.String()), err
}
