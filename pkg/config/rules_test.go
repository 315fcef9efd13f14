package config

import (
	"fmt"
	"strings"
	"testing"
)

func vol(host, container, kind, more string) string {
	return fmt.Sprintf("\n[[profiles.dev.volumes]]\nhost = %q\ncontainer = %q\nkind = %q\n%s\n", host, container, kind, more)
}

func escal(enabled bool, rules ...string) string {
	s := fmt.Sprintf("\n[profiles.dev.escalation]\nenabled = %v\n", enabled)
	for _, r := range rules {
		s += "\n[[profiles.dev.escalation.auto_approve]]\n" + r + "\n"
	}
	return s
}

func readinessDocWith(denied, permitted, dns, allow string) string {
	return `schema = "lazaret-trusted-host-config-v1"
[profiles.dev]
image = "docker.io/library/debian:bookworm"
allow_egress = [` + allow + `]
[profiles.dev.readiness]
denied = [` + denied + `]
permitted = [` + permitted + `]
dns = [` + dns + `]
`
}

const (
	okDenied    = `{ address = "198.51.100.1", port = 443 }`
	okPermitted = `{ address = "192.0.2.1", port = 443 }`
	okDNS       = `{ resolver = "192.0.2.53", query = "example.com" }`
	okAllow     = `"192.0.2.0/24"`
)

func TestRules(t *testing.T) {
	many := make([]string, 33)
	for i := range many {
		many[i] = fmt.Sprintf(`{ address = "198.51.100.%d", port = 443 }`, i+1)
	}
	tests := []struct {
		name  string
		doc   string
		field string // "" means any field
		rule  Rule
		also  []Rule // further rules that the single break implies
	}{
		// Decoding.
		{"syntax", "schema = \n", "", RuleDecode, nil},
		{"duplicate key", testDoc(`image = "docker.io/library/alpine:3"`, ""), "", RuleDecode, nil},
		{"duplicate table", testDoc("", "\n[profiles.dev]\n"), "", RuleDecode, nil},
		{"duplicate readiness table", testDoc("", readinessTail), "", RuleDecode, nil},
		{"wrong type", testDoc(`isolate_gitignored = "yes"`, ""), "", RuleDecode, nil},
		{"wrong list type", testDoc(`deny_egress = "203.0.113.0/24"`, ""), "", RuleDecode, nil},
		{"unknown root field", "extra = 1\n" + testDoc("", ""), "extra", RuleUnknownField, nil},
		{"unknown profile field", testDoc(`imag = "x"`, ""), "profiles.dev.imag", RuleUnknownField, nil},
		{"unknown volume field", testDoc("", vol("/x", "/home/agent/x", "file", `mode = "ro"`)), "profiles.dev.volumes[0].mode", RuleUnknownField, nil},
		{"unknown readiness target field", readinessDocWith(`{ address = "198.51.100.1", port = 443, proto = "tcp" }`, okPermitted, okDNS, okAllow), "profiles.dev.readiness.denied[0].proto", RuleUnknownField, nil},
		{"unknown storage field", testDoc("", "") + "\n[storage]\nroot = \"/x\"\n", "storage.root", RuleUnknownField, nil},
		{"alias of schema", strings.Replace(testDoc("", ""), "schema =", "Schema =", 1), "Schema", RuleFieldAlias, nil},
		{"alias of image", strings.Replace(testDoc("", ""), "image =", "IMAGE =", 1), "profiles.dev.IMAGE", RuleFieldAlias, nil},
		{"alias of table", strings.Replace(testDoc("", ""), "[profiles.dev.readiness]", "[profiles.dev.Readiness]", 1), "profiles.dev.Readiness", RuleFieldAlias, nil},
		{"invalid utf-8", testDoc("# \xff\n", ""), "", RuleEncoding, nil},

		// Root.
		{"schema missing", strings.Replace(testDoc("", ""), `schema = "lazaret-trusted-host-config-v1"`, "", 1), "schema", RuleRequired, nil},
		{"schema wrong", strings.Replace(testDoc("", ""), "config-v1", "config-v3", 1), "schema", RuleSchema, nil},
		{"no profiles", `schema = "lazaret-trusted-host-config-v1"` + "\n[profiles]\n", "profiles", RuleProfiles, []Rule{RuleProfileSelection}},
		{"profile name grammar", testDoc("", "\n[profiles.\"-bad\"]\nimage = \"docker.io/library/debian:bookworm\"\n"), "profiles.-bad", RuleProfileName, nil},
		{"profile name dot dot", testDoc("", "\n[profiles.\"..\"]\nimage = \"docker.io/library/debian:bookworm\"\n"), `profiles.".."`, RuleProfileName, nil},
		{"profile name too long", testDoc("", "\n[profiles."+strings.Repeat("a", 65)+"]\nimage = \"docker.io/library/debian:bookworm\"\n"), "", RuleProfileName, nil},
		{"storage root grammar", testDoc("", "") + "\n[storage]\ndata_root = \"data\"\n", "storage.data_root", RuleHostPath, nil},
		{"storage root profile_dir", testDoc("", "") + "\n[storage]\ndata_root = \"{profile_dir}/x\"\n", "storage.data_root", RuleHostPath, nil},
		{"storage root in workspace", testDoc("", "") + "\n[storage]\ndata_root = \"@WS@/state\"\n", "storage.data_root", RuleRoot, nil},

		// Profile fields.
		{"image missing", strings.Replace(testDoc("", ""), `image = "docker.io/library/debian:bookworm"`, "", 1), "profiles.dev.image", RuleRequired, nil},
		{"image empty", strings.Replace(testDoc("", ""), `"docker.io/library/debian:bookworm"`, `""`, 1), "profiles.dev.image", RuleImage, nil},
		{"image uppercase", strings.Replace(testDoc("", ""), `"docker.io/library/debian:bookworm"`, `"Debian:Latest"`, 1), "profiles.dev.image", RuleImage, nil},
		{"image bad digest", strings.Replace(testDoc("", ""), `"docker.io/library/debian:bookworm"`, `"debian@sha256:abc"`, 1), "profiles.dev.image", RuleImage, nil},
		{"persistent relative", strings.Replace(testDoc("", ""), `["/home/agent"]`, `["home"]`, 1), "profiles.dev.persistent_dirs[0]", RuleSandboxPath, nil},
		{"persistent root", strings.Replace(testDoc("", ""), `["/home/agent"]`, `["/"]`, 1), "profiles.dev.persistent_dirs[0]", RuleSandboxPath, nil},
		{"persistent trailing slash", strings.Replace(testDoc("", ""), `["/home/agent"]`, `["/home/agent/"]`, 1), "profiles.dev.persistent_dirs[0]", RuleSandboxPath, nil},
		{"persistent dot dot", strings.Replace(testDoc("", ""), `["/home/agent"]`, `["/home/../agent"]`, 1), "profiles.dev.persistent_dirs[0]", RuleSandboxPath, nil},
		{"persistent repeated separator", strings.Replace(testDoc("", ""), `["/home/agent"]`, `["/home//agent"]`, 1), "profiles.dev.persistent_dirs[0]", RuleSandboxPath, nil},
		{"persistent glob", strings.Replace(testDoc("", ""), `["/home/agent"]`, `["/home/*"]`, 1), "profiles.dev.persistent_dirs[0]", RuleSandboxPath, nil},
		{"persistent equal", strings.Replace(testDoc("", ""), `["/home/agent"]`, `["/home/agent", "/home/agent"]`, 1), "profiles.dev.persistent_dirs[1]", RulePersistentOverlap, nil},
		{"persistent nested", strings.Replace(testDoc("", ""), `["/home/agent"]`, `["/home/agent", "/home/agent/cache"]`, 1), "profiles.dev.persistent_dirs[1]", RulePersistentOverlap, nil},
		{"persistent nested reverse", strings.Replace(testDoc("", ""), `["/home/agent"]`, `["/home/agent/cache", "/home"]`, 1), "profiles.dev.persistent_dirs[1]", RulePersistentOverlap, nil},
		{"persistent protected beneath", strings.Replace(testDoc("", ""), `["/home/agent"]`, `["/workspace/cache"]`, 1), "profiles.dev.persistent_dirs[0]", RuleProtected, nil},
		{"persistent protected ancestor", strings.Replace(testDoc("", ""), `["/home/agent"]`, `["/etc"]`, 1), "profiles.dev.persistent_dirs[0]", RuleProtected, nil},
		{"persistent protected run", strings.Replace(testDoc("", ""), `["/home/agent"]`, `["/run"]`, 1), "profiles.dev.persistent_dirs[0]", RuleProtected, nil},

		// Environment.
		{"env key grammar", testDoc("env = { \"1X\" = \"env:API_TOKEN\" }", ""), "profiles.dev.env.1X", RuleEnvName, nil},
		{"env key reserved", testDoc(`env = { LAZARET_SESSION = "env:API_TOKEN" }`, ""), "profiles.dev.env.LAZARET_SESSION", RuleEnvName, nil},
		{"env literal value", testDoc(`env = { TOKEN = "hunter2" }`, ""), "profiles.dev.env.TOKEN", RuleEnvReference, nil},
		{"env other scheme", testDoc(`env = { TOKEN = "file:/etc/token" }`, ""), "profiles.dev.env.TOKEN", RuleEnvReference, nil},
		{"env reference grammar", testDoc(`env = { TOKEN = "env:1X" }`, ""), "profiles.dev.env.TOKEN", RuleEnvReference, nil},
		{"env unset", testDoc(`env = { TOKEN = "env:NOT_SET_ANYWHERE" }`, ""), "profiles.dev.env.TOKEN", RuleEnvUnset, nil},

		// Volumes: declarations.
		{"volume host missing", testDoc("", "\n[[profiles.dev.volumes]]\ncontainer = \"/home/agent/x\"\nkind = \"directory\"\n"), "profiles.dev.volumes[0].host", RuleRequired, nil},
		{"volume container missing", testDoc("", "\n[[profiles.dev.volumes]]\nhost = \"@DIR@/src/dir\"\nkind = \"directory\"\n"), "profiles.dev.volumes[0].container", RuleRequired, nil},
		{"volume kind missing", testDoc("", "\n[[profiles.dev.volumes]]\nhost = \"@DIR@/src/dir\"\ncontainer = \"/home/agent/x\"\n"), "profiles.dev.volumes[0].kind", RuleRequired, nil},
		{"volume kind enum", testDoc("", vol("@DIR@/src/dir", "/home/agent/x", "dir", "")), "profiles.dev.volumes[0].kind", RuleEnum, nil},
		{"volume access enum", testDoc("", vol("@DIR@/src/dir", "/home/agent/x", "directory", `access = "rw"`)), "profiles.dev.volumes[0].access", RuleEnum, nil},
		{"volume host relative", testDoc("", vol("src/dir", "/home/agent/x", "directory", "")), "profiles.dev.volumes[0].host", RuleHostPath, nil},
		{"volume host root", testDoc("", vol("/", "/home/agent/x", "directory", "")), "profiles.dev.volumes[0].host", RuleHostPath, nil},
		{"volume host tilde double slash", testDoc("", vol("~//etc", "/home/agent/x", "directory", "")), "profiles.dev.volumes[0].host", RuleHostPath, nil},
		{"volume host profile_dir double slash", testDoc("", vol("{profile_dir}//etc", "/home/agent/x", "directory", "")), "profiles.dev.volumes[0].host", RuleHostPath, nil},
		{"volume host profile_dir empty suffix", testDoc("", vol("{profile_dir}/", "/home/agent/x", "directory", "")), "profiles.dev.volumes[0].host", RuleHostPath, nil},
		{"volume host bare tilde", testDoc("", vol("~", "/home/agent/x", "directory", "")), "profiles.dev.volumes[0].host", RuleHostPath, nil},
		{"volume host tilde user", testDoc("", vol("~root/x", "/home/agent/x", "directory", "")), "profiles.dev.volumes[0].host", RuleHostPath, nil},
		{"volume host dot", testDoc("", vol("/tmp/./x", "/home/agent/x", "directory", "")), "profiles.dev.volumes[0].host", RuleHostPath, nil},
		{"volume host dot dot", testDoc("", vol("~/../x", "/home/agent/x", "directory", "")), "profiles.dev.volumes[0].host", RuleHostPath, nil},
		{"volume host trailing slash", testDoc("", vol("/tmp/x/", "/home/agent/x", "directory", "")), "profiles.dev.volumes[0].host", RuleHostPath, nil},
		{"volume host variable", testDoc("", vol("$HOME/x", "/home/agent/x", "directory", "")), "profiles.dev.volumes[0].host", RuleHostPath, nil},
		{"volume host embedded variable", testDoc("", vol("/tmp/${USER}", "/home/agent/x", "directory", "")), "profiles.dev.volumes[0].host", RuleHostPath, nil},
		{"volume host glob", testDoc("", vol("/tmp/*.txt", "/home/agent/x", "file", "")), "profiles.dev.volumes[0].host", RuleHostPath, nil},
		{"volume host brace", testDoc("", vol("/tmp/{a,b}", "/home/agent/x", "directory", "")), "profiles.dev.volumes[0].host", RuleHostPath, nil},
		{"volume host control character", testDoc("", vol("/tmp/a\tb", "/home/agent/x", "directory", "")), "profiles.dev.volumes[0].host", RuleHostPath, nil},
		{"volume container relative", testDoc("", vol("@DIR@/src/dir", "home/agent/x", "directory", "")), "profiles.dev.volumes[0].container", RuleSandboxPath, nil},
		{"volume container protected", testDoc("", vol("@DIR@/src/dir", "/proc/x", "directory", "")), "profiles.dev.volumes[0].container", RuleProtected, nil},
		{"volume container equal persistent", testDoc("", vol("@DIR@/src/dir", "/home/agent", "directory", "")), "profiles.dev.volumes[0].container", RuleVolumeParent, nil},
		{"volume container outside persistent", testDoc("", vol("@DIR@/src/dir", "/opt/x", "directory", "")), "profiles.dev.volumes[0].container", RuleVolumeParent, nil},
		{"volume containers equal", testDoc("", vol("@DIR@/src/dir", "/home/agent/x", "directory", "")+vol("@DIR@/src/file", "/home/agent/x", "file", "")), "profiles.dev.volumes[1].container", RuleVolumeOverlap, nil},
		{"volume containers nested", testDoc("", vol("@DIR@/src/dir", "/home/agent/x", "directory", "")+vol("@DIR@/src/file", "/home/agent/x/f", "file", "")), "profiles.dev.volumes[1].container", RuleVolumeOverlap, nil},
		{"create for file", testDoc("", vol("{profile_dir}/f", "/home/agent/f", "file", "create = true")), "profiles.dev.volumes[0].create", RuleCreate, nil},
		{"create outside profile_dir", testDoc("", vol("@DIR@/src/new", "/home/agent/x", "directory", "create = true")), "profiles.dev.volumes[0].create", RuleCreate, nil},

		// Volumes: sources.
		{"source missing file", testDoc("", vol("@DIR@/src/nothing", "/home/agent/x", "file", "")), "profiles.dev.volumes[0].host", RuleSource, nil},
		{"source missing directory", testDoc("", vol("{profile_dir}/cache", "/home/agent/x", "directory", "")), "profiles.dev.volumes[0].host", RuleSource, nil},
		{"source symlink", testDoc("", vol("@DIR@/src/link", "/home/agent/x", "directory", "")), "profiles.dev.volumes[0].host", RuleSource, nil},
		{"source beneath symlink", testDoc("", vol("@DIR@/src/link/x", "/home/agent/x", "directory", "")), "profiles.dev.volumes[0].host", RuleSource, nil},
		{"source fifo", testDoc("", vol("@DIR@/src/fifo", "/home/agent/x", "file", "")), "profiles.dev.volumes[0].host", RuleSource, nil},
		{"source socket", testDoc("", vol("@DIR@/src/sock", "/home/agent/x", "file", "")), "profiles.dev.volumes[0].host", RuleSource, nil},
		{"source device", testDoc("", vol("/dev/null", "/home/agent/x", "file", "")), "profiles.dev.volumes[0].host", RuleSource, nil},
		{"source kind mismatch", testDoc("", vol("@DIR@/src/dir", "/home/agent/x", "file", "")), "profiles.dev.volumes[0].host", RuleSource, nil},
		{"source kind mismatch file", testDoc("", vol("@DIR@/src/file", "/home/agent/x", "directory", "")), "profiles.dev.volumes[0].host", RuleSource, nil},
		{"source in workspace", testDoc("", vol("@WS@/sub", "/home/agent/x", "directory", "")), "profiles.dev.volumes[0].host", RuleSourcePlacement, nil},
		{"source contains workspace", testDoc("", vol("@DIR@", "/home/agent/x", "directory", "")), "profiles.dev.volumes[0].host", RuleSourcePlacement, nil},
		{"source in runtime root", testDoc("", vol("@DIR@/run/lazaret", "/home/agent/x", "directory", "")), "profiles.dev.volumes[0].host", RuleSourcePlacement, nil},
		{"source in storage root", testDoc("", vol("@DIR@/data/lazaret/catalog", "/home/agent/x", "directory", "")), "profiles.dev.volumes[0].host", RuleSourcePlacement, nil},

		// Network.
		{"prefix without length", testDoc(`deny_egress = ["203.0.113.0"]`, ""), "profiles.dev.deny_egress[0]", RulePrefix, nil},
		{"prefix ipv6", testDoc(`deny_egress = ["2001:db8::/32"]`, ""), "profiles.dev.deny_egress[0]", RulePrefix, nil},
		{"prefix mapped ipv6", testDoc(`deny_egress = ["::ffff:203.0.113.0/120"]`, ""), "profiles.dev.deny_egress[0]", RulePrefix, nil},
		{"prefix out of range", testDoc("", "") + "\n[network]\ndefault_deny = [\"300.0.0.0/8\"]\n", "network.default_deny[0]", RulePrefix, nil},
		{"prefix length too long", testDoc("", "") + "\n[network]\ndefault_allow = [\"192.0.2.0/33\"]\n", "network.default_allow[0]", RulePrefix, nil},
		{"prefix conflict rfc1918", readinessDocWith(okDenied, okPermitted, okDNS, okAllow+`, "10.0.0.0/8"`), "profiles.dev.allow_egress[1]", RulePrefixConflict, nil},
		{"prefix conflict after masking", readinessDocWith(okDenied, `{ address = "192.0.2.1", port = 443 }`, okDNS, `"192.0.2.0/24", "192.0.2.1/32"`) + "\n[network]\ndefault_deny = [\"192.0.2.7/24\"]\n", "profiles.dev.allow_egress[0]", RulePrefixConflict, nil},

		// Readiness.
		{"readiness missing", strings.Replace(testDoc("", ""), readinessTail, "", 1), "profiles.dev.readiness", RuleReadinessRequired, nil},
		{"readiness denied empty", readinessDocWith("", okPermitted, okDNS, okAllow), "profiles.dev.readiness.denied", RuleReadinessCount, nil},
		{"readiness permitted missing", strings.Replace(readinessDocWith(okDenied, okPermitted, okDNS, okAllow), "permitted = ["+okPermitted+"]", "", 1), "profiles.dev.readiness.permitted", RuleReadinessCount, nil},
		{"readiness dns empty", readinessDocWith(okDenied, okPermitted, "", okAllow), "profiles.dev.readiness.dns", RuleReadinessCount, nil},
		{"readiness too many", readinessDocWith(strings.Join(many, ", "), okPermitted, okDNS, okAllow), "profiles.dev.readiness.denied", RuleReadinessCount, nil},
		{"readiness duplicate", readinessDocWith(okDenied+", "+okDenied, okPermitted, okDNS, okAllow), "profiles.dev.readiness.denied[1]", RuleReadinessUnique, nil},
		{"readiness dns duplicate", readinessDocWith(okDenied, okPermitted, okDNS+", "+okDNS, okAllow), "profiles.dev.readiness.dns[1]", RuleReadinessUnique, nil},
		{"readiness address", readinessDocWith(`{ address = "198.51.100", port = 443 }`, okPermitted, okDNS, okAllow), "profiles.dev.readiness.denied[0].address", RuleAddress, nil},
		{"readiness address ipv6", readinessDocWith(okDenied, okPermitted, `{ resolver = "2001:db8::53", query = "example.com" }`, okAllow), "profiles.dev.readiness.dns[0].resolver", RuleAddress, nil},
		{"readiness address missing", readinessDocWith(`{ port = 443 }`, okPermitted, okDNS, okAllow), "profiles.dev.readiness.denied[0].address", RuleRequired, nil},
		{"readiness port zero", readinessDocWith(`{ address = "198.51.100.1", port = 0 }`, okPermitted, okDNS, okAllow), "profiles.dev.readiness.denied[0].port", RulePort, nil},
		{"readiness port too large", readinessDocWith(okDenied, `{ address = "192.0.2.1", port = 65536 }`, okDNS, okAllow), "profiles.dev.readiness.permitted[0].port", RulePort, nil},
		{"readiness port negative", readinessDocWith(okDenied, `{ address = "192.0.2.1", port = -1 }`, okDNS, okAllow), "profiles.dev.readiness.permitted[0].port", RulePort, nil},
		{"dns uppercase", readinessDocWith(okDenied, okPermitted, `{ resolver = "192.0.2.53", query = "Example.com" }`, okAllow), "profiles.dev.readiness.dns[0].query", RuleDNSName, nil},
		{"dns single label", readinessDocWith(okDenied, okPermitted, `{ resolver = "192.0.2.53", query = "example" }`, okAllow), "profiles.dev.readiness.dns[0].query", RuleDNSName, nil},
		{"dns trailing dot", readinessDocWith(okDenied, okPermitted, `{ resolver = "192.0.2.53", query = "example.com." }`, okAllow), "profiles.dev.readiness.dns[0].query", RuleDNSName, nil},
		{"dns empty label", readinessDocWith(okDenied, okPermitted, `{ resolver = "192.0.2.53", query = "example..com" }`, okAllow), "profiles.dev.readiness.dns[0].query", RuleDNSName, nil},
		{"dns hyphen edge", readinessDocWith(okDenied, okPermitted, `{ resolver = "192.0.2.53", query = "-example.com" }`, okAllow), "profiles.dev.readiness.dns[0].query", RuleDNSName, nil},
		{"dns underscore", readinessDocWith(okDenied, okPermitted, `{ resolver = "192.0.2.53", query = "_srv.example.com" }`, okAllow), "profiles.dev.readiness.dns[0].query", RuleDNSName, nil},
		{"dns long label", readinessDocWith(okDenied, okPermitted, `{ resolver = "192.0.2.53", query = "`+strings.Repeat("a", 64)+`.com" }`, okAllow), "profiles.dev.readiness.dns[0].query", RuleDNSName, nil},
		{"dns numeric tld", readinessDocWith(okDenied, okPermitted, `{ resolver = "192.0.2.53", query = "1.2.3.4" }`, okAllow), "profiles.dev.readiness.dns[0].query", RuleDNSName, nil},
		{"dns nul", readinessDocWith(okDenied, okPermitted, `{ resolver = "192.0.2.53", query = "exa\u0000mple.com" }`, okAllow), "profiles.dev.readiness.dns[0].query", RuleString, nil},
		{"permitted unmatched", readinessDocWith(okDenied, `{ address = "203.0.113.1", port = 443 }`, okDNS, okAllow), "profiles.dev.readiness.permitted[0].address", RuleReadinessPolicy, nil},
		{"permitted denied by rfc1918", readinessDocWith(okDenied, `{ address = "10.1.2.3", port = 443 }`, okDNS, `"0.0.0.0/0"`), "profiles.dev.readiness.permitted[0].address", RuleReadinessPolicy, nil},
		{"denied allowed", readinessDocWith(`{ address = "192.0.2.9", port = 443 }`, okPermitted, okDNS, okAllow), "profiles.dev.readiness.denied[0].address", RuleReadinessPolicy, nil},
		{"permitted structural", readinessDocWith(`{ address = "10.0.0.1", port = 1 }`, `{ address = "127.0.0.1", port = 443 }`, okDNS, `"0.0.0.0/0"`), "profiles.dev.readiness.permitted[0].address", RuleStructural, nil},
		{"resolver structural", readinessDocWith(okDenied, okPermitted, `{ resolver = "127.0.0.53", query = "example.com" }`, okAllow), "profiles.dev.readiness.dns[0].resolver", RuleStructural, nil},

		// Escalation.
		{"rules while disabled", testDoc("", escal(false, `executable = "@DIR@/bin/tool"`)), "profiles.dev.escalation.auto_approve", RuleEscalation, nil},
		{"rules without escalation table enabled", testDoc("", "\n[[profiles.dev.escalation.auto_approve]]\nexecutable = \"@DIR@/bin/tool\"\n"), "profiles.dev.escalation.auto_approve", RuleEscalation, nil},
		{"executable missing field", testDoc("", escal(true, `args = ["x"]`)), "profiles.dev.escalation.auto_approve[0].executable", RuleRequired, nil},
		{"executable grammar", testDoc("", escal(true, `executable = "tool"`)), "profiles.dev.escalation.auto_approve[0].executable", RuleHostPath, nil},
		{"executable profile_dir", testDoc("", escal(true, `executable = "{profile_dir}/tool"`)), "profiles.dev.escalation.auto_approve[0].executable", RuleHostPath, nil},
		{"extra args without args", testDoc("", escal(true, "executable = \"@DIR@/bin/tool\"\nallow_extra_args = true")), "profiles.dev.escalation.auto_approve[0].allow_extra_args", RuleArgs, nil},
		{"arg nul", testDoc("", escal(true, "executable = \"@DIR@/bin/tool\"\nargs = [\"a\\u0000b\"]")), "profiles.dev.escalation.auto_approve[0].args[0]", RuleString, nil},
		{"executable does not exist", testDoc("", escal(true, `executable = "@DIR@/bin/none"`)), "profiles.dev.escalation.auto_approve[0].executable", RuleExecutable, nil},
		{"executable hard links", testDoc("", escal(true, `executable = "@DIR@/bin/hard"`)), "profiles.dev.escalation.auto_approve[0].executable", RuleExecutable, nil},
		{"executable group writable", testDoc("", escal(true, `executable = "@DIR@/bin/gw"`)), "profiles.dev.escalation.auto_approve[0].executable", RuleExecutable, nil},
		{"executable not executable", testDoc("", escal(true, `executable = "@DIR@/bin/noexec"`)), "profiles.dev.escalation.auto_approve[0].executable", RuleExecutable, nil},
		{"executable directory", testDoc("", escal(true, `executable = "@DIR@/bin"`)), "profiles.dev.escalation.auto_approve[0].executable", RuleExecutable, nil},
		{"executable in workspace", testDoc("", escal(true, `executable = "@WS@/tool"`)), "profiles.dev.escalation.auto_approve[0].executable", RuleExecutable, nil},
		{"executable in volume source", testDoc("", vol("@DIR@/bin", "/home/agent/bin", "directory", "access = \"read-only\"")+escal(true, `executable = "@DIR@/bin/tool"`)), "profiles.dev.escalation.auto_approve[0].executable", RuleExecutable, nil},
		{"executable in storage root", testDoc("", escal(true, `executable = "@DIR@/bin/tool"`)) + "\n[storage]\ndata_root = \"@DIR@/bin\"\n", "profiles.dev.escalation.auto_approve[0].executable", RuleExecutable, nil},
		{"duplicate rule", testDoc("", escal(true, "executable = \"@DIR@/bin/tool\"\nargs = [\"a\"]", "executable = \"@DIR@/bin/toollink\"\nargs = [\"a\"]")), "profiles.dev.escalation.auto_approve[1]", RuleDuplicateRule, nil},

		// Credentials (v2).
		{"v1 credentials", testDoc(`env = { API_KEY = "env:API_KEY" }`, "\n[[profiles.dev.credentials]]\n"+okCred), "profiles.dev.credentials", RuleUnknownField, nil},
		{"credential unknown field", credDoc(okCred + "\nmode = 1"), "profiles.dev.credentials[0].mode", RuleUnknownField, nil},
		{"credential alias", credDoc(strings.Replace(okCred, "scheme", "Scheme", 1)), "profiles.dev.credentials[0].Scheme", RuleFieldAlias, nil},
		{"credentials too many", nineCreds(), "profiles.dev.credentials", RuleCredentialCount, nil},
		{"credential env missing", credDoc(`hosts = ["api.example.com"]` + "\nscheme = \"bearer\""), "profiles.dev.credentials[0].env", RuleRequired, nil},
		{"credential env not in table", credDoc(strings.Replace(okCred, `"API_KEY"`, `"OTHER_KEY"`, 1)), "profiles.dev.credentials[0].env", RuleCredentialEnv, nil},
		{"credential env twice", credDoc(okCred, cred("API_KEY", `"x.cdn.example.net"`, "header", "x-api-key")), "profiles.dev.credentials[1].env", RuleCredentialEnv, nil},
		{"credential hosts missing", credDoc(`env = "API_KEY"` + "\nscheme = \"bearer\""), "profiles.dev.credentials[0].hosts", RuleCredentialHosts, nil},
		{"credential hosts empty", credDoc(cred("API_KEY", "", "bearer", "")), "profiles.dev.credentials[0].hosts", RuleCredentialHosts, nil},
		{"credential hosts too many", credDoc(cred("API_KEY", manyCDNHosts(17), "bearer", "")), "profiles.dev.credentials[0].hosts", RuleCredentialHosts, nil},
		{"credential host twice", credDoc(cred("API_KEY", `"api.example.com", "api.example.com"`, "bearer", "")), "profiles.dev.credentials[0].hosts[1]", RuleCredentialHosts, nil},
		{"credential host wildcard", credDoc(cred("API_KEY", `"*.cdn.example.net"`, "bearer", "")), "profiles.dev.credentials[0].hosts[0]", RuleDNSName, nil},
		{"credential host uppercase", credDoc(cred("API_KEY", `"API.example.com"`, "bearer", "")), "profiles.dev.credentials[0].hosts[0]", RuleDNSName, nil},
		{"credential host nul", credDoc(cred("API_KEY", `"a\u0000.example.com"`, "bearer", "")), "profiles.dev.credentials[0].hosts[0]", RuleString, nil},
		{"credential host not allowed", credDoc(cred("API_KEY", `"api.example.com", "other.example.com"`, "bearer", "")), "profiles.dev.credentials[0].hosts[1]", RuleCredentialPolicy, nil},
		{"credential host is the wildcard base", credDoc(cred("API_KEY", `"cdn.example.net"`, "bearer", "")), "profiles.dev.credentials[0].hosts[0]", RuleCredentialPolicy, nil},
		{"credential host denied", strings.Replace(credDoc(cred("API_KEY", `"x.cdn.example.net"`, "bearer", "")), v2Res, v2Res+"\ndeny_hosts = [\"x.cdn.example.net\"]", 1), "profiles.dev.credentials[0].hosts[0]", RuleCredentialPolicy, nil},
		{"credential without allow_hosts", credNoHosts(), "profiles.dev.credentials[0].hosts[0]", RuleCredentialPolicy, nil},
		{"credential port zero", credDoc(okCred + "\nport = 0"), "profiles.dev.credentials[0].port", RulePort, nil},
		{"credential port too large", credDoc(okCred + "\nport = 65536"), "profiles.dev.credentials[0].port", RulePort, nil},
		{"credential scheme missing", credDoc(`env = "API_KEY"` + "\nhosts = [\"api.example.com\"]"), "profiles.dev.credentials[0].scheme", RuleRequired, nil},
		{"credential scheme enum", credDoc(cred("API_KEY", `"api.example.com"`, "token", "")), "profiles.dev.credentials[0].scheme", RuleEnum, nil},
		{"credential scheme uppercase", credDoc(cred("API_KEY", `"api.example.com"`, "Bearer", "")), "profiles.dev.credentials[0].scheme", RuleEnum, nil},
		{"credential header missing", credDoc(cred("API_KEY", `"api.example.com"`, "header", "")), "profiles.dev.credentials[0].header", RuleRequired, nil},
		{"credential header with bearer", credDoc(okCred + "\nheader = \"x-api-key\""), "profiles.dev.credentials[0].header", RuleCredentialHeader, nil},
		{"credential header uppercase", credDoc(cred("API_KEY", `"api.example.com"`, "header", "X-Api-Key")), "profiles.dev.credentials[0].header", RuleCredentialHeader, nil},
		{"credential header space", credDoc(cred("API_KEY", `"api.example.com"`, "header", "x api")), "profiles.dev.credentials[0].header", RuleCredentialHeader, nil},
		{"credential header empty", credDoc(okCred[:strings.Index(okCred, "scheme")] + "scheme = \"header\"\nheader = \"\""), "profiles.dev.credentials[0].header", RuleCredentialHeader, nil},
		{"credential header authorization", credDoc(cred("API_KEY", `"api.example.com"`, "header", "authorization")), "profiles.dev.credentials[0].header", RuleCredentialHeader, nil},
		{"credential header cookie", credDoc(cred("API_KEY", `"api.example.com"`, "header", "cookie")), "profiles.dev.credentials[0].header", RuleCredentialHeader, nil},
		{"credential header host", credDoc(cred("API_KEY", `"api.example.com"`, "header", "host")), "profiles.dev.credentials[0].header", RuleCredentialHeader, nil},
		{"credential bearer and basic clash", credDoc(okCred, cred("TOKEN", `"x.cdn.example.net", "api.example.com"`, "basic", "")), "profiles.dev.credentials[1].hosts[1]", RuleCredentialClash, nil},
		{"credential same header clash", credDoc(cred("API_KEY", `"api.example.com"`, "header", "x-api-key"), cred("TOKEN", `"api.example.com"`, "header", "x-api-key")), "profiles.dev.credentials[1].hosts[0]", RuleCredentialClash, nil},
		{"credential ca relative", credDoc(okCred + "\nupstream_ca = \"ca/good.pem\""), "profiles.dev.credentials[0].upstream_ca", RuleHostPath, nil},
		{"credential ca home", credDoc(okCred + "\nupstream_ca = \"~/ca.pem\""), "profiles.dev.credentials[0].upstream_ca", RuleCredentialCA, nil},
		{"credential ca missing", credDoc(okCred + "\nupstream_ca = \"@DIR@/ca/none.pem\""), "profiles.dev.credentials[0].upstream_ca", RuleCredentialCA, nil},
		{"credential ca directory", credDoc(okCred + "\nupstream_ca = \"@DIR@/ca\""), "profiles.dev.credentials[0].upstream_ca", RuleCredentialCA, nil},
		{"credential ca without certificate", credDoc(okCred + "\nupstream_ca = \"@DIR@/ca/nocert.pem\""), "profiles.dev.credentials[0].upstream_ca", RuleCredentialCA, nil},
		{"credential ca unparseable", credDoc(okCred + "\nupstream_ca = \"@DIR@/ca/bad.pem\""), "profiles.dev.credentials[0].upstream_ca", RuleCredentialCA, nil},
		{"credential ca group writable", credDoc(okCred + "\nupstream_ca = \"@DIR@/ca/gw.pem\""), "profiles.dev.credentials[0].upstream_ca", RuleCredentialCA, nil},
		{"credential ca too large", credDoc(okCred + "\nupstream_ca = \"@DIR@/ca/big.pem\""), "profiles.dev.credentials[0].upstream_ca", RuleCredentialCA, nil},
		{"credential value too short", credDoc(cred("TOKEN", `"api.example.com"`, "bearer", "")), "profiles.dev.env.TOKEN", RuleCredentialValue, nil},
		{"credential value with space", credDoc(cred("SPACE", `"api.example.com"`, "bearer", "")), "profiles.dev.env.SPACE", RuleCredentialValue, nil},
		{"credential value too long", credDoc(cred("LONG", `"api.example.com"`, "bearer", "")), "profiles.dev.env.LONG", RuleCredentialValue, nil},
		{"credential value empty", credDoc(cred("EMPTY", `"api.example.com"`, "bearer", "")), "profiles.dev.env.EMPTY", RuleCredentialValue, nil},
		{"credential value unset", strings.Replace(credDoc(cred("UNSET", `"api.example.com"`, "bearer", "")), credEnv, credEnv[:len(credEnv)-2]+`, UNSET = "env:NOT_SET_ANYWHERE" }`, 1), "profiles.dev.env.UNSET", RuleEnvUnset, nil},

		// Selection.
		{"selected profile absent", strings.ReplaceAll(testDoc("", ""), "profiles.dev", "profiles.prod"), "", RuleProfileSelection, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { expectRule(t, tc.doc, tc.field, tc.rule, tc.also) })
	}
}

// expectRule resolves doc as profile dev and requires a problem of rule at
// field ("" for any field) and no problem of any rule but rule and also.
func expectRule(t *testing.T, doc, field string, rule Rule, also []Rule) {
	t.Helper()
	f := newFixture(t)
	cfg, err := f.resolve(t, doc)
	if err == nil {
		t.Fatalf("resolution succeeded (%v); want %s", cfg, rule)
	}
	ps := problemsOf(t, err)
	found := false
	for _, p := range ps {
		ok := p.Rule == rule
		for _, a := range also {
			ok = ok || p.Rule == a
		}
		if !ok {
			t.Errorf("unexpected problem [%s] %s", p.Rule, p)
		}
		if p.Rule == rule && (field == "" || p.Field == field) {
			found = true
		}
	}
	if !found {
		t.Errorf("no %s problem at field %q; got:%s", rule, field, dumpProblems(ps))
	}
	for _, p := range ps {
		if strings.Contains(p.String(), f.env["API_TOKEN"]) || strings.Contains(p.String(), f.env["API_KEY"]) ||
			strings.Contains(p.String(), "Zq8vN3pL5tR7wX2yB4mK") || strings.Contains(p.String(), "hunter2") {
			t.Errorf("problem leaks a value: %s", p)
		}
	}
}

// TestBaseDocumentsAreValid guards the table above: each base document must
// resolve, so a case fails only because of its own change.
func TestBaseDocumentsAreValid(t *testing.T) {
	f := newFixture(t)
	for name, doc := range map[string]string{
		"profile":    testDoc("", ""),
		"readiness":  readinessDocWith(okDenied, okPermitted, okDNS, okAllow),
		"volume":     testDoc("", vol("@DIR@/src/dir", "/home/agent/x", "directory", "")),
		"escalation": testDoc("", escal(true, "executable = \"@DIR@/bin/tool\"\nargs = [\"a\"]", "executable = \"@DIR@/bin/toollink\"\nargs = [\"b\"]")),
		"env":        testDoc(`env = { TOKEN = "env:API_TOKEN" }`, ""),
		"create":     testDoc("", vol("{profile_dir}/cache", "/home/agent/x", "directory", "create = true")),
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := f.resolve(t, doc); err != nil {
				t.Fatalf("base document invalid: %v%s", err, dumpProblems(problemsOf(t, err)))
			}
		})
	}
}
