package cli

import (
	"fmt"
	"slices"
	"strings"
)

// agentPreset is what `config init --agent` needs to know about one coding
// agent: the host names it reaches, each with what it is for, and the host
// that proves the policy at start. docs/CONFIGURATION.md ("Agent presets")
// names the public documentation each name comes from.
type agentPreset struct {
	title string // product name, for comments
	hosts []presetHost
	// left are names the agent may use that the preset leaves out on
	// purpose; they are written as comments saying why.
	left      []presetHost
	readiness string // host proven on port 443 at start
	key       presetKey
}

// presetKey is the agent's API key variable, written as a brokered
// credential: the sandbox sees a placeholder and the credential broker
// sends the real key only to host.
type presetKey struct {
	env, host, scheme, header string
}

type presetHost struct {
	name, why string
}

// npmRegistry is in every preset: these agents install and update
// themselves through npm.
var npmRegistry = presetHost{"registry.npmjs.org", "npm registry: installing and updating the agent"}

var agentPresets = map[string]agentPreset{
	"claude": {
		title: "Claude Code",
		hosts: []presetHost{
			{"api.anthropic.com", "API: every model request"},
			{"claude.ai", "login with a Claude subscription (OAuth)"},
			{"console.anthropic.com", "login with an Anthropic Console account (OAuth)"},
			{"statsig.anthropic.com", "telemetry (Statsig metrics); you may remove it (DISABLE_TELEMETRY=1)"},
			npmRegistry,
		},
		left: []presetHost{
			{"*.sentry.io", "error reports (Sentry); these names serve every Sentry customer, a way out for data"},
		},
		readiness: "api.anthropic.com",
		key:       presetKey{"ANTHROPIC_API_KEY", "api.anthropic.com", "header", "x-api-key"},
	},
	"codex": {
		title: "Codex CLI",
		hosts: []presetHost{
			{"api.openai.com", "API: model requests with an API key"},
			{"auth.openai.com", "login: sign in with ChatGPT (OAuth) and token refresh"},
			{"chatgpt.com", "model requests when signed in with a ChatGPT plan"},
			npmRegistry,
		},
		readiness: "api.openai.com",
		key:       presetKey{"OPENAI_API_KEY", "api.openai.com", "bearer", ""},
	},
	"gemini": {
		title: "Gemini CLI",
		hosts: []presetHost{
			{"generativelanguage.googleapis.com", "API: the Gemini API with GEMINI_API_KEY"},
			{"cloudcode-pa.googleapis.com", "API: Gemini Code Assist, when logged in with Google"},
			{"oauth2.googleapis.com", "login: OAuth token exchange and refresh"},
			{"accounts.google.com", "login with Google (OAuth)"},
			{"play.googleapis.com", "telemetry (usage statistics); you may remove it (usageStatisticsEnabled)"},
			npmRegistry,
		},
		readiness: "generativelanguage.googleapis.com",
		key:       presetKey{"GEMINI_API_KEY", "generativelanguage.googleapis.com", "header", "x-goog-api-key"},
	},
}

// agentNames lists the valid --agent values, sorted.
func agentNames() []string {
	names := make([]string, 0, len(agentPresets))
	for n := range agentPresets {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// presetDeniedAddress is the readiness denied target of every preset:
// 8.8.8.8 accepts connections on port 443 on the internet and is no
// agent's host, so only the policy can make it unreachable.
const presetDeniedAddress = "8.8.8.8"

// agentStarterConfig is the v2 starter that `config init --agent` writes.
func agentStarterConfig(agent, profile, image string) (string, error) {
	a, ok := agentPresets[agent]
	if !ok {
		return "", fmt.Errorf("unknown agent %q; valid agents: %s", agent, strings.Join(agentNames(), ", "))
	}
	p := "profiles." + tomlKey(profile)
	width := 0
	for _, h := range append(slices.Clone(a.hosts), a.left...) {
		width = max(width, len(h.name)+3)
	}
	var hosts strings.Builder
	for _, h := range a.hosts {
		fmt.Fprintf(&hosts, "  %-*s # %s\n", width, `"`+h.name+`",`, h.why)
	}
	for _, h := range a.left {
		fmt.Fprintf(&hosts, "  # %-*s # left out: %s\n", width-2, `"`+h.name+`",`, h.why)
	}
	k := a.key
	header := ""
	if k.header != "" {
		header = "# header = \"" + k.header + "\"\n"
	}
	return `# Lazaret trusted host configuration: a starter for ` + a.title + `.
# Every field, default and rule is described in docs/CONFIGURATION.md; its
# section "Agent presets" names the public documentation each host name
# below comes from. Review them: vendors add and move hosts.
# Check this file with: lazaret-cli config check --profile ` + profile + `
schema = "lazaret-trusted-host-config-v2"

# Where Lazaret keeps images, Domain state and profile directories.
# Default: $XDG_DATA_HOME/lazaret (~/.local/share/lazaret).
[storage]
# data_root = "~/.local/share/lazaret"

# IPv4 prefixes and host names every profile allows or denies.
# 10.0.0.0/8, 172.16.0.0/12 and 192.168.0.0/16 are always denied.
[network]
default_allow = []
default_deny = []
allow_hosts = []
deny_hosts = []

[` + p + `]
image = "` + image + `"
# Route git-ignored files to a private per-Domain copy (default true).
isolate_gitignored = true
# Sandbox directories that survive from one run to the next (the agent's
# login and settings live in its home directory).
persistent_dirs = ["/home/agent"]
# No IPv4 prefix is open: the sandbox reaches the host names below, at the
# addresses the resolver returns for them, and nothing else.
allow_egress = []
deny_egress = []
# Host names the agent may reach. A pattern "*.example.com" matches every
# name below example.com, never example.com itself; deny_hosts beats
# allow_hosts. A name served from a shared CDN admits every other site
# served from the same addresses.
allow_hosts = [
` + hosts.String() + `]
deny_hosts = []
# The upstream resolver to which the host side forwards allowed names.
# 1.1.1.1 (Cloudflare) is only a default: change it to a resolver you trust.
resolver = "1.1.1.1"

# Sandbox environment variables; each value names a host variable, which
# must be set when Lazaret runs.
[` + p + `.env]
# Using an API key rather than logging in? Uncomment this line and the
# credential below together: the key is then brokered, the sandbox sees
# only a placeholder, and the credential broker on the host sends the real
# key only to ` + k.host + `. Without the credential the
# real key would be in the sandbox.
# ` + k.env + ` = "env:` + k.env + `"

# [[` + p + `.credentials]]
# env = "` + k.env + `"
# hosts = ["` + k.host + `"]
# scheme = "` + k.scheme + `"
` + header + `
# Host paths made visible inside a persistent dir.
# [[` + p + `.volumes]]
# host = "{profile_dir}/cache"
# container = "/home/agent/.cache"
# kind = "directory"
# access = "read-write"
# create = true

# Targets that prove the network policy before the sandbox is used. Start
# fails, naming the target, when one of them is not as stated.
# hosts: ` + a.readiness + ` must resolve through the resolver and
# accept a TCP connection on port 443. With hosts listed, permitted and dns
# may be left out.
# denied: ` + presetDeniedAddress + ` accepts connections on port 443 on the internet
# and is no host of the agent, so only the policy can make it unreachable.
[` + p + `.readiness]
hosts = [{ name = "` + a.readiness + `", port = 443 }]
denied = [{ address = "` + presetDeniedAddress + `", port = 443 }]

# Host commands the agent may request; see docs/CONFIGURATION.md.
[` + p + `.escalation]
enabled = false
# [[` + p + `.escalation.auto_approve]]
# executable = "/usr/bin/git"
# args = ["fetch", "origin"]
# allow_extra_args = true
`, nil
}
