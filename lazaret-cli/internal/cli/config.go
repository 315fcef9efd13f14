package cli

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	"lazaret.dev/pkg/config"
	"lazaret.dev/pkg/paths"
)

func configCommand() *cli.Command {
	return &cli.Command{
		Name:  "config",
		Usage: "check or create the trusted host configuration",
		Subcommands: []*cli.Command{
			configCheckCommand(),
			configInitCommand(),
		},
	}
}

func configCheckCommand() *cli.Command {
	return &cli.Command{
		Name:  "check",
		Usage: "validate the configuration and resolve one profile, changing nothing on the host",
		Flags: []cli.Flag{
			profileFlag(),
			workspaceFlag(),
			configFileFlag(),
			jsonFlag("the resolved configuration as one object"),
		},
		Action: runConfigCheck,
	}
}

func runConfigCheck(c *cli.Context) error {
	stdout, stderr := c.App.Writer, c.App.ErrWriter
	if stderr == nil {
		stderr = os.Stderr
	}
	cfg, file, err := resolveDomain(c, 1)
	if err != nil {
		return err
	}
	defer cfg.Close()
	// Warnings go to stderr in both formats, so the JSON object stays as
	// documented and a valid configuration still exits 0.
	for _, w := range cfg.Warnings() {
		fmt.Fprintln(stderr, "warning: "+w.String())
	}
	report := newCheckReport(file, cfg)
	if c.Bool("json") {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(report)
	}
	return report.writeText(stdout)
}

// checkReport is what `config check` prints. It carries names, paths and
// digests, never environment values.
type checkReport struct {
	Profile                  string          `json:"profile"`
	ConfigFile               string          `json:"config_file"`
	Workspace                string          `json:"workspace"`
	StorageRoot              string          `json:"storage_root"`
	RuntimeRoot              string          `json:"runtime_root"`
	ProfileDir               string          `json:"profile_dir"`
	DomainID                 string          `json:"domain_id"`
	ConfigurationFingerprint string          `json:"configuration_fingerprint"`
	Image                    string          `json:"image"`
	IsolateGitignored        bool            `json:"isolate_gitignored"`
	PersistentDirs           []string        `json:"persistent_dirs"`
	Environment              []envReport     `json:"environment"`
	Volumes                  []volumeReport  `json:"volumes"`
	EffectiveAllow           []string        `json:"effective_allow"`
	EffectiveDeny            []string        `json:"effective_deny"`
	Readiness                readinessReport `json:"readiness"`
	EscalationEnabled        bool            `json:"escalation_enabled"`
	AutoApprovalRules        []ruleReport    `json:"auto_approval_rules"`
	PendingCreates           []string        `json:"pending_creates"`
	// HostPolicy is set for a schema v2 document only, so a v1 report
	// keeps exactly the v1 keys.
	*HostPolicy
}

// HostPolicy is the host-name policy of a schema v2 document.
type HostPolicy struct {
	SchemaVersion       int      `json:"schema_version"`
	EffectiveAllowHosts []string `json:"effective_allow_hosts"`
	EffectiveDenyHosts  []string `json:"effective_deny_hosts"`
	// Resolver is the upstream resolver for allowed names; null when the
	// profile allows none.
	Resolver *string `json:"resolver"`
	// Credentials are the brokered credentials, in declaration order:
	// names and destinations, never values.
	Credentials []credentialReport `json:"credentials"`
}

type credentialReport struct {
	Env          string   `json:"env"`
	Scheme       string   `json:"scheme"`
	Header       string   `json:"header,omitempty"`
	Destinations []string `json:"destinations"` // host:port
	UpstreamCA   bool     `json:"upstream_ca"`
}

type envReport struct {
	SandboxName string `json:"sandbox_name"`
	HostName    string `json:"host_name"`
}

type volumeReport struct {
	Host      string `json:"host"`
	Container string `json:"container"`
	Kind      string `json:"kind"`
	Access    string `json:"access"`
	Create    bool   `json:"create"`
	Pending   bool   `json:"pending"`
}

type targetReport struct {
	Address string `json:"address"`
	Port    uint16 `json:"port"`
}

type dnsReport struct {
	Resolver string `json:"resolver"`
	Query    string `json:"query"`
}

type readinessReport struct {
	Denied    []targetReport `json:"denied"`
	Permitted []targetReport `json:"permitted"`
	DNS       []dnsReport    `json:"dns"`
	Hosts     []hostReport   `json:"hosts,omitempty"` // v2 only
}

type hostReport struct {
	Name string `json:"name"`
	Port uint16 `json:"port"`
}

type ruleReport struct {
	Executable     string   `json:"executable"`
	Args           []string `json:"args"`
	AllowExtraArgs bool     `json:"allow_extra_args"`
}

func prefixStrings(ps []netip.Prefix) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.String()
	}
	return out
}

func newCheckReport(file string, cfg *config.ResolvedDomainConfiguration) *checkReport {
	did, fp := cfg.DomainID(), cfg.Fingerprint()
	r := &checkReport{
		Profile:                  cfg.Profile(),
		ConfigFile:               file,
		Workspace:                cfg.Workspace(),
		StorageRoot:              cfg.StorageRoot(),
		RuntimeRoot:              cfg.RuntimeRoot(),
		ProfileDir:               cfg.ProfileDir(),
		DomainID:                 hex.EncodeToString(did[:]),
		ConfigurationFingerprint: hex.EncodeToString(fp[:]),
		Image:                    cfg.Image(),
		IsolateGitignored:        cfg.IsolateGitignored(),
		PersistentDirs:           append([]string{}, cfg.PersistentDirs()...),
		Environment:              []envReport{},
		Volumes:                  []volumeReport{},
		EffectiveAllow:           prefixStrings(cfg.EffectiveAllow()),
		EffectiveDeny:            prefixStrings(cfg.EffectiveDeny()),
		Readiness:                readinessReport{Denied: []targetReport{}, Permitted: []targetReport{}, DNS: []dnsReport{}},
		EscalationEnabled:        cfg.EscalationEnabled(),
		AutoApprovalRules:        []ruleReport{},
		PendingCreates:           []string{},
	}
	for _, e := range cfg.EnvironmentReferences() {
		r.Environment = append(r.Environment, envReport{e.SandboxName, e.HostName})
	}
	for _, v := range cfg.Volumes() {
		rec := v.Record
		r.Volumes = append(r.Volumes, volumeReport{rec.CanonicalHostSource, rec.ContainerPath, rec.Kind.String(), rec.Access.String(), rec.Create, v.Plan.Pending()})
		if v.Plan.Pending() {
			r.PendingCreates = append(r.PendingCreates, rec.CanonicalHostSource)
		}
	}
	rd := cfg.Readiness()
	for _, t := range rd.Denied {
		r.Readiness.Denied = append(r.Readiness.Denied, targetReport{t.Address.String(), t.Port})
	}
	for _, t := range rd.Permitted {
		r.Readiness.Permitted = append(r.Readiness.Permitted, targetReport{t.Address.String(), t.Port})
	}
	for _, d := range rd.DNS {
		r.Readiness.DNS = append(r.Readiness.DNS, dnsReport{d.Resolver.String(), d.Query})
	}
	if cfg.SchemaVersion() == 2 {
		r.HostPolicy = &HostPolicy{
			SchemaVersion:       2,
			EffectiveAllowHosts: append([]string{}, cfg.EffectiveAllowHosts()...),
			EffectiveDenyHosts:  append([]string{}, cfg.EffectiveDenyHosts()...),
		}
		if a, ok := cfg.NameResolver(); ok {
			s := a.String()
			r.Resolver = &s
		}
		r.Credentials = []credentialReport{}
		for _, c := range cfg.Credentials() {
			cr := credentialReport{Env: c.Env, Scheme: c.Scheme, Header: c.Header, Destinations: []string{}, UpstreamCA: c.UpstreamCA != nil}
			for _, h := range c.Hosts {
				cr.Destinations = append(cr.Destinations, fmt.Sprintf("%s:%d", h, c.Port))
			}
			r.Credentials = append(r.Credentials, cr)
		}
		r.Readiness.Hosts = []hostReport{}
		for _, h := range rd.Hosts {
			r.Readiness.Hosts = append(r.Readiness.Hosts, hostReport{h.Name, h.Port})
		}
	}
	for _, rule := range cfg.AutoApprovalRules() {
		r.AutoApprovalRules = append(r.AutoApprovalRules, ruleReport{rule.CanonicalExecutable, append([]string{}, rule.Args...), rule.AllowExtraArgs})
	}
	return r
}

func (r *checkReport) writeText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "configuration %s is valid for profile %q\n", r.ConfigFile, r.Profile)
	fmt.Fprintf(&b, "workspace:                 %s\n", r.Workspace)
	fmt.Fprintf(&b, "storage root:              %s\n", r.StorageRoot)
	fmt.Fprintf(&b, "runtime root:              %s\n", r.RuntimeRoot)
	fmt.Fprintf(&b, "domain id:                 %s\n", r.DomainID)
	fmt.Fprintf(&b, "configuration fingerprint: %s\n", r.ConfigurationFingerprint)
	fmt.Fprintf(&b, "image:                     %s\n", r.Image)
	fmt.Fprintf(&b, "effective allow:           %s\n", listOrNone(r.EffectiveAllow))
	fmt.Fprintf(&b, "effective deny:            %s\n", listOrNone(r.EffectiveDeny))
	if hp := r.HostPolicy; hp != nil {
		fmt.Fprintf(&b, "schema version:            %d\n", hp.SchemaVersion)
		fmt.Fprintf(&b, "allowed host names:        %s\n", listOrNone(hp.EffectiveAllowHosts))
		fmt.Fprintf(&b, "denied host names:         %s\n", listOrNone(hp.EffectiveDenyHosts))
		resolver := "(none)"
		if hp.Resolver != nil {
			resolver = *hp.Resolver
		}
		fmt.Fprintf(&b, "name resolver:             %s\n", resolver)
		hosts := make([]string, len(r.Readiness.Hosts))
		for i, h := range r.Readiness.Hosts {
			hosts[i] = fmt.Sprintf("%s:%d", h.Name, h.Port)
		}
		fmt.Fprintf(&b, "readiness hosts:           %s\n", listOrNone(hosts))
		if len(hp.Credentials) == 0 {
			fmt.Fprintf(&b, "credentials:               (none)\n")
		}
		for _, c := range hp.Credentials {
			how := c.Scheme
			if c.Header != "" {
				how += " " + c.Header
			}
			fmt.Fprintf(&b, "credential:                %s: %s to %s\n", c.Env, how, strings.Join(c.Destinations, ", "))
		}
	}
	for _, p := range r.PendingCreates {
		fmt.Fprintf(&b, "will be created at start:  %s\n", p)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func listOrNone(l []string) string {
	if len(l) == 0 {
		return "(none)"
	}
	return strings.Join(l, ", ")
}

func configInitCommand() *cli.Command {
	return &cli.Command{
		Name:  "init",
		Usage: "write a commented starter configuration",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "profile", Value: "dev", Usage: "name of the starter profile (default with --agent: the agent's name)"},
			&cli.StringFlag{Name: "image", Value: defaultStarterImage, Usage: "OCI image `REF` of the starter profile"},
			&cli.StringFlag{Name: "agent", Usage: "write a schema v2 starter whose profile allows the host names `AGENT` needs: " + strings.Join(agentNames(), ", ")},
			configFileFlag(),
			&cli.BoolFlag{Name: "force", Usage: "replace an existing file"},
		},
		Action: runConfigInit,
	}
}

func runConfigInit(c *cli.Context) error {
	profile := c.String("profile")
	agent := c.String("agent")
	if agent != "" && !c.IsSet("profile") {
		profile = agent
	}
	if _, ok := agentPresets[agent]; agent != "" && !ok {
		return fmt.Errorf("unknown agent %q for --agent; valid agents: %s", agent, strings.Join(agentNames(), ", "))
	}
	if !config.ValidProfileName(profile) {
		return fmt.Errorf("profile name %q must match [A-Za-z0-9][A-Za-z0-9._-]{0,63} and not be . or ..", profile)
	}
	file, err := paths.FromProcess().ConfigFile(c.String("config"))
	if err != nil {
		return fmt.Errorf("configuration path: %w", err)
	}
	image := c.String("image")
	if image == "" || strings.ContainsAny(image, "\"\\\n\r\x00") {
		return fmt.Errorf("--image %q must be a nonempty OCI image reference without quotes, backslashes or line breaks", image)
	}
	data := starterConfig(profile, image)
	if agent != "" {
		if data, err = agentStarterConfig(agent, profile, image); err != nil {
			return err
		}
	}
	if err := writeNewFile(file, []byte(data), c.Bool("force")); err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "wrote %s\ncheck it with: lazaret-cli config check --profile %s\n", file, profile)
	return nil
}

// writeNewFile writes data to path with mode 0600, creating missing parent
// directories with mode 0700. Without force an existing path is never
// replaced: the file is written under a temporary name and hard-linked into
// place, which fails if anything is there.
func writeNewFile(path string, data []byte, force bool) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("creating configuration directory: %w", err)
	}
	if !force {
		if _, err := os.Lstat(path); err == nil {
			return fmt.Errorf("configuration %q already exists; use --force to replace it", path)
		}
	}
	tmp, err := os.CreateTemp(dir, ".config-*.toml")
	if err != nil {
		return fmt.Errorf("creating configuration: %w", err)
	}
	tmpName := tmp.Name()
	defer os.Remove(tmpName)
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return fmt.Errorf("setting configuration mode: %w", err)
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("writing configuration: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("writing configuration: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing configuration: %w", err)
	}
	if force {
		if err := os.Rename(tmpName, path); err != nil {
			return fmt.Errorf("installing configuration: %w", err)
		}
		return nil
	}
	if err := os.Link(tmpName, path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("configuration %q already exists; use --force to replace it", path)
		}
		return fmt.Errorf("installing configuration: %w", err)
	}
	return nil
}

// tomlKey writes a profile name as a TOML key; valid names need quotes
// only when they contain a dot.
func tomlKey(name string) string {
	if strings.Contains(name, ".") {
		return `"` + name + `"`
	}
	return name
}

// defaultStarterImage is the image of a starter profile unless --image
// names another.
const defaultStarterImage = "docker.io/library/debian:bookworm"

func starterConfig(profile, image string) string {
	p := "profiles." + tomlKey(profile)
	return `# Lazaret trusted host configuration.
# Every field, default and rule is described in docs/CONFIGURATION.md.
# Check this file with: lazaret-cli config check --profile ` + profile + `
schema = "lazaret-trusted-host-config-v1"

# Where Lazaret keeps images, Domain state and profile directories.
# Default: $XDG_DATA_HOME/lazaret (~/.local/share/lazaret).
[storage]
# data_root = "~/.local/share/lazaret"

# IPv4 prefixes every profile allows or denies. 10.0.0.0/8, 172.16.0.0/12 and
# 192.168.0.0/16 are always denied. An address is reachable only when its
# longest matching prefix is an allow prefix.
[network]
default_allow = []
default_deny = []

[` + p + `]
image = "` + image + `"
# Route git-ignored files to a private per-Domain copy (default true).
isolate_gitignored = true
# Sandbox directories that survive from one run to the next.
persistent_dirs = ["/home/agent"]
# The sandbox may reach only Cloudflare's public resolver (1.1.1.1) until
# you allow what the agent needs, for instance allow_egress = ["0.0.0.0/0"]
# for the whole internet minus every deny.
allow_egress = ["1.1.1.1/32"]
deny_egress = []

# Sandbox environment variables; each value names a host variable.
[` + p + `.env]
# ANTHROPIC_API_KEY = "env:ANTHROPIC_API_KEY"

# Host paths made visible inside a persistent dir.
# [[` + p + `.volumes]]
# host = "{profile_dir}/cache"
# container = "/home/agent/.cache"
# kind = "directory"
# access = "read-write"
# create = true

# Targets that prove the network policy before the sandbox is used: each
# denied target must be unreachable from inside (8.8.8.8 answers on port
# 443 on the internet, so the policy is what stops it), each permitted
# target reachable, and each DNS query answered by its resolver. Start
# fails, naming the target, when one of them is not as stated.
[` + p + `.readiness]
denied = [{ address = "8.8.8.8", port = 443 }]
permitted = [{ address = "1.1.1.1", port = 443 }]
dns = [{ resolver = "1.1.1.1", query = "registry.npmjs.org" }]

# Host commands the agent may request. A rule auto-approves an exact argv;
# with allow_extra_args it also admits more arguments after args, but for
# git (and every tool whose options can run commands or write files, see
# docs/CONFIGURATION.md) only operands: an extra argument beginning with
# "-" or "+" goes to the prompt. This rule admits "git fetch origin main"
# and prompts for "git fetch origin --upload-pack=...".
[` + p + `.escalation]
enabled = false
# [[` + p + `.escalation.auto_approve]]
# executable = "/usr/bin/git"
# args = ["fetch", "origin"]
# allow_extra_args = true
`
}
