package config

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
)

// v2Base is a valid v2 document: profile dev allows two host patterns and
// proves one of them; it lists no permitted or dns targets, which hosts
// make optional.
const v2Base = `schema = "lazaret-trusted-host-config-v2"

[profiles.dev]
image = "docker.io/library/debian:bookworm"
persistent_dirs = ["/home/agent"]
allow_egress = ["192.0.2.0/24"]
allow_hosts = ["api.example.com", "*.cdn.example.net"]
resolver = "192.0.2.53"

[profiles.dev.readiness]
denied = [{ address = "198.51.100.1", port = 443 }]
hosts = [{ name = "api.example.com", port = 443 }]
`

// v2With replaces old by new in v2Base, failing loudly when old is absent.
func v2With(pairs ...string) string {
	s := v2Base
	for i := 0; i+1 < len(pairs); i += 2 {
		if !strings.Contains(s, pairs[i]) {
			panic(fmt.Sprintf("v2Base lacks %q", pairs[i]))
		}
		s = strings.Replace(s, pairs[i], pairs[i+1], 1)
	}
	return s
}

const (
	v2Allow = `allow_hosts = ["api.example.com", "*.cdn.example.net"]`
	v2Res   = `resolver = "192.0.2.53"`
	v2Hosts = `hosts = [{ name = "api.example.com", port = 443 }]`
)

func allowHosts(ps ...string) string { return `allow_hosts = ["` + strings.Join(ps, `", "`) + `"]` }

func TestV2Resolves(t *testing.T) {
	f := newFixture(t)
	doc := v2With(v2Allow, allowHosts("api.example.com", "*.cdn.example.net", "api.example.com")+"\ndeny_hosts = [\"bad.cdn.example.net\"]",
		v2Hosts, `hosts = [{ name = "x.cdn.example.net", port = 80 }, { name = "api.example.com", port = 8443 }, { name = "api.example.com", port = 443 }]`) +
		"\n[network]\nallow_hosts = [\"registry.npmjs.org\", \"api.example.com\"]\ndeny_hosts = [\"*.evil.example\"]\n"
	cfg, err := f.resolve(t, doc)
	if err != nil {
		t.Fatalf("resolve: %v%s", err, dumpProblems(problemsOf(t, err)))
	}
	if cfg.SchemaVersion() != 2 {
		t.Errorf("schema version %d", cfg.SchemaVersion())
	}
	if got, want := cfg.EffectiveAllowHosts(), []string{"*.cdn.example.net", "api.example.com", "registry.npmjs.org"}; !slices.Equal(got, want) {
		t.Errorf("allow hosts %q, want %q", got, want)
	}
	if got, want := cfg.EffectiveDenyHosts(), []string{"*.evil.example", "bad.cdn.example.net"}; !slices.Equal(got, want) {
		t.Errorf("deny hosts %q, want %q", got, want)
	}
	if a, ok := cfg.NameResolver(); !ok || a != netip.MustParseAddr("192.0.2.53") {
		t.Errorf("resolver %v %v", a, ok)
	}
	rd := cfg.Readiness()
	want := []HostTarget{{"api.example.com", 443}, {"api.example.com", 8443}, {"x.cdn.example.net", 80}}
	if !slices.Equal(rd.Hosts, want) {
		t.Errorf("hosts %v, want %v", rd.Hosts, want)
	}
	if len(rd.Permitted) != 0 || len(rd.DNS) != 0 {
		t.Errorf("permitted/dns %v %v", rd.Permitted, rd.DNS)
	}
	rd.Hosts[0].Name = "changed.example"
	if cfg.Readiness().Hosts[0].Name != "api.example.com" {
		t.Error("Readiness shares its hosts with the configuration")
	}
	rec, ok := cfg.FingerprintRecordV2()
	if !ok || rec.Digest() != cfg.Fingerprint() {
		t.Fatal("fingerprint is not the digest of the v2 record")
	}
	rec.EffectiveAllowHosts[0] = "x.example"
	if cfg.EffectiveAllowHosts()[0] != "*.cdn.example.net" {
		t.Error("FingerprintRecordV2 shares its lists with the configuration")
	}
	if cfg.DomainID() != DomainIDV1("dev", f.ws) {
		t.Error("a v2 Domain ID is not DomainIdV1")
	}
	for name, allowed := range map[string]bool{
		"api.example.com": true, "x.cdn.example.net": true, "bad.cdn.example.net": false,
		"cdn.example.net": false, "registry.npmjs.org": true, "a.evil.example": false, "other.example": false,
	} {
		if got, _ := cfg.DecideHost(name); got != allowed {
			t.Errorf("DecideHost(%q) = %v, want %v", name, got, allowed)
		}
	}
}

// A v1 document carries no host-name policy, and the v1 shape with only the
// schema changed is a valid v2 document with a different fingerprint and
// the same Domain ID.
func TestV1HasNoHostPolicy(t *testing.T) {
	f := newFixture(t)
	doc := readinessDocWith(okDenied, okPermitted, okDNS, okAllow)
	v1, err := f.resolve(t, doc)
	if err != nil {
		t.Fatal(err)
	}
	if v1.SchemaVersion() != 1 || v1.EffectiveAllowHosts() != nil || v1.EffectiveDenyHosts() != nil || v1.Readiness().Hosts != nil {
		t.Errorf("v1 configuration has v2 data: %d %v %v %v", v1.SchemaVersion(), v1.EffectiveAllowHosts(), v1.EffectiveDenyHosts(), v1.Readiness().Hosts)
	}
	if _, ok := v1.NameResolver(); ok {
		t.Error("v1 configuration has a name resolver")
	}
	if _, ok := v1.FingerprintRecordV2(); ok {
		t.Error("v1 configuration has a v2 record")
	}
	rec := v1.FingerprintRecord()
	if rec.Digest() != v1.Fingerprint() {
		t.Error("v1 fingerprint is not the digest of the v1 record")
	}
	v2, err := f.resolve(t, strings.Replace(doc, SchemaID, SchemaIDV2, 1))
	if err != nil {
		t.Fatalf("v1 shape as v2: %v%s", err, dumpProblems(problemsOf(t, err)))
	}
	if v2.SchemaVersion() != 2 || v2.DomainID() != v1.DomainID() || v2.Fingerprint() == v1.Fingerprint() {
		t.Errorf("v2 of the v1 shape: version %d, same domain %v, same fingerprint %v", v2.SchemaVersion(), v2.DomainID() == v1.DomainID(), v2.Fingerprint() == v1.Fingerprint())
	}
	// Its preimage is the v1 one under the v2 separator, followed by two
	// empty lists, an empty resolver and an empty list.
	r2, _ := v2.FingerprintRecordV2()
	want := "lazaret-configuration-fingerprint-v2\x00" + strings.TrimPrefix(string(rec.Preimage()), "lazaret-configuration-fingerprint-v1\x00") +
		list() + list() + fr("") + list()
	if got := string(r2.Preimage()); got != want {
		t.Errorf("v2 preimage of the v1 shape:\n got %x\nwant %x", got, want)
	}
}

func TestV2Rules(t *testing.T) {
	many := make([]string, 33)
	for i := range many {
		many[i] = fmt.Sprintf(`{ name = "api.example.com", port = %d }`, i+1)
	}
	noHosts := func(doc string) string {
		return strings.NewReplacer(v2Allow+"\n", "", v2Res+"\n", "", v2Hosts+"\n", "").Replace(doc)
	}
	pat := "profiles.dev.allow_hosts[0]"
	tests := []struct {
		name  string
		doc   string
		field string
		rule  Rule
	}{
		// Patterns.
		{"pattern bare tld wildcard", v2With(v2Allow, allowHosts("*.com")), pat, RuleHostPattern},
		{"pattern star", v2With(v2Allow, allowHosts("*")), pat, RuleHostPattern},
		{"pattern inner star", v2With(v2Allow, allowHosts("a.*.com")), pat, RuleHostPattern},
		{"pattern star without dot", v2With(v2Allow, allowHosts("*example.com")), pat, RuleHostPattern},
		{"pattern double star", v2With(v2Allow, allowHosts("**.x.com")), pat, RuleHostPattern},
		{"pattern double wildcard", v2With(v2Allow, allowHosts("*.*.example.com")), pat, RuleHostPattern},
		{"pattern uppercase", v2With(v2Allow, allowHosts("API.example.com")), pat, RuleHostPattern},
		{"pattern trailing dot", v2With(v2Allow, allowHosts("api.example.com.")), pat, RuleHostPattern},
		{"pattern single label", v2With(v2Allow, allowHosts("localhost")), pat, RuleHostPattern},
		{"pattern empty", v2With(v2Allow, allowHosts("")), pat, RuleHostPattern},
		{"pattern address", v2With(v2Allow, allowHosts("192.0.2.1")), pat, RuleHostPattern},
		{"pattern nul", v2With(v2Allow, `allow_hosts = ["a\u0000.example.com"]`), pat, RuleString},
		{"deny pattern", v2With(v2Res, v2Res+"\ndeny_hosts = [\"*.com\"]"), "profiles.dev.deny_hosts[0]", RuleHostPattern},
		{"network pattern", v2Base + "\n[network]\nallow_hosts = [\"*\"]\n", "network.allow_hosts[0]", RuleHostPattern},
		{"network deny pattern", v2Base + "\n[network]\ndeny_hosts = [\"Example.com\"]\n", "network.deny_hosts[0]", RuleHostPattern},
		{"pattern conflict", v2With(v2Res, v2Res+"\ndeny_hosts = [\"*.cdn.example.net\"]"), "profiles.dev.allow_hosts[1]", RuleHostConflict},
		{"pattern conflict with network", v2With(v2Res, v2Res+"\ndeny_hosts = [\"registry.npmjs.org\"]") + "\n[network]\nallow_hosts = [\"registry.npmjs.org\"]\n", "network.allow_hosts[0]", RuleHostConflict},

		// Resolver.
		{"resolver missing", v2With(v2Res+"\n", ""), "profiles.dev.resolver", RuleResolver},
		{"resolver missing with network hosts", v2With(v2Allow+"\n", "", v2Res+"\n", "") + "\n[network]\nallow_hosts = [\"api.example.com\"]\n", "profiles.dev.resolver", RuleResolver},
		{"resolver without hosts", strings.Replace(noHosts(v2Base), "persistent_dirs", v2Res+"\npersistent_dirs", 1) + "permitted = [" + okPermitted + "]\ndns = [" + okDNS + "]\n", "profiles.dev.resolver", RuleResolver},
		{"resolver ipv6", v2With(v2Res, `resolver = "2001:db8::53"`), "profiles.dev.resolver", RuleAddress},
		{"resolver name", v2With(v2Res, `resolver = "dns.example.com"`), "profiles.dev.resolver", RuleAddress},
		{"resolver loopback", v2With(v2Res, `resolver = "127.0.0.53"`), "profiles.dev.resolver", RuleStructural},
		{"resolver multicast", v2With(v2Res, `resolver = "224.0.0.251"`), "profiles.dev.resolver", RuleStructural},
		{"resolver in other profile", v2Base + "\n[profiles.other]\nimage = \"docker.io/library/debian:bookworm\"\nallow_hosts = [\"a.example.com\"]\n", "profiles.other.resolver", RuleResolver},

		// Readiness hosts.
		{"hosts missing", v2With(v2Hosts+"\n", "permitted = ["+okPermitted+"]\ndns = ["+okDNS+"]\n"), "profiles.dev.readiness.hosts", RuleReadinessCount},
		{"hosts without allow_hosts", strings.NewReplacer(v2Allow+"\n", "", v2Res+"\n", "").Replace(v2Base), "profiles.dev.readiness.hosts", RuleReadinessCount},
		{"hosts too many", v2With(v2Hosts, "hosts = ["+strings.Join(many, ", ")+"]"), "profiles.dev.readiness.hosts", RuleReadinessCount},
		{"hosts duplicate", v2With(v2Hosts, `hosts = [{ name = "api.example.com", port = 443 }, { name = "api.example.com", port = 443 }]`), "profiles.dev.readiness.hosts[1]", RuleReadinessUnique},
		{"host wildcard", v2With(v2Hosts, `hosts = [{ name = "*.cdn.example.net", port = 443 }]`), "profiles.dev.readiness.hosts[0].name", RuleDNSName},
		{"host uppercase", v2With(v2Hosts, `hosts = [{ name = "API.example.com", port = 443 }]`), "profiles.dev.readiness.hosts[0].name", RuleDNSName},
		{"host nul", v2With(v2Hosts, `hosts = [{ name = "a\u0000.example.com", port = 443 }]`), "profiles.dev.readiness.hosts[0].name", RuleString},
		{"host name missing", v2With(v2Hosts, `hosts = [{ port = 443 }]`), "profiles.dev.readiness.hosts[0].name", RuleRequired},
		{"host port missing", v2With(v2Hosts, `hosts = [{ name = "api.example.com" }]`), "profiles.dev.readiness.hosts[0].port", RuleRequired},
		{"host port zero", v2With(v2Hosts, `hosts = [{ name = "api.example.com", port = 0 }]`), "profiles.dev.readiness.hosts[0].port", RulePort},
		{"host port too large", v2With(v2Hosts, `hosts = [{ name = "api.example.com", port = 65536 }]`), "profiles.dev.readiness.hosts[0].port", RulePort},
		{"host unknown field", v2With(v2Hosts, `hosts = [{ name = "api.example.com", port = 443, proto = "tcp" }]`), "profiles.dev.readiness.hosts[0].proto", RuleUnknownField},
		{"host alias", v2With(v2Hosts, `hosts = [{ Name = "api.example.com", port = 443 }]`), "profiles.dev.readiness.hosts[0].Name", RuleFieldAlias},
		{"host not allowed", v2With(v2Hosts, `hosts = [{ name = "other.example.com", port = 443 }]`), "profiles.dev.readiness.hosts[0].name", RuleReadinessPolicy},
		{"host is the wildcard base", v2With(v2Hosts, `hosts = [{ name = "cdn.example.net", port = 443 }]`), "profiles.dev.readiness.hosts[0].name", RuleReadinessPolicy},
		{"host denied by broader deny", v2With(v2Res, v2Res+"\ndeny_hosts = [\"*.example.com\"]"), "profiles.dev.readiness.hosts[0].name", RuleReadinessPolicy},
		{"host denied by network deny", v2Base + "\n[network]\ndeny_hosts = [\"*.example.com\"]\n", "profiles.dev.readiness.hosts[0].name", RuleReadinessPolicy},

		// Without hosts the v1 readiness counts hold.
		{"v2 permitted required without hosts", noHosts(v2Base) + "dns = [" + okDNS + "]\n", "profiles.dev.readiness.permitted", RuleReadinessCount},
		{"v2 dns required without hosts", noHosts(v2Base) + "permitted = [" + okPermitted + "]\n", "profiles.dev.readiness.dns", RuleReadinessCount},
		{"v2 denied still required", v2With(`denied = [{ address = "198.51.100.1", port = 443 }]`+"\n", ""), "profiles.dev.readiness.denied", RuleReadinessCount},
		{"v2 alias", v2With(v2Res, `Resolver = "192.0.2.53"`), "profiles.dev.Resolver", RuleFieldAlias},

		// v2 fields are unknown in a v1 document.
		{"v1 allow_hosts", testDoc(`allow_hosts = ["api.example.com"]`, ""), "profiles.dev.allow_hosts", RuleUnknownField},
		{"v1 resolver", testDoc(`resolver = "192.0.2.53"`, ""), "profiles.dev.resolver", RuleUnknownField},
		{"v1 network deny_hosts", testDoc("", "") + "\n[network]\ndeny_hosts = [\"a.example.com\"]\n", "network.deny_hosts", RuleUnknownField},
		{"v1 readiness hosts", testDoc("", "") + `hosts = [{ name = "api.example.com", port = 443 }]` + "\n", "profiles.dev.readiness.hosts", RuleUnknownField},
		{"v1 ill-typed v2 field", testDoc(`allow_hosts = 1`, ""), "profiles.dev.allow_hosts", RuleUnknownField},
		{"v1 alias of v2 field", testDoc(`Allow_Hosts = ["api.example.com"]`, ""), "profiles.dev.Allow_Hosts", RuleUnknownField},
		{"v2 shape in v1 document", strings.Replace(v2Base, SchemaIDV2, SchemaID, 1), "profiles.dev.allow_hosts", RuleUnknownField},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { expectRule(t, tc.doc, tc.field, tc.rule, nil) })
	}
}

func TestV2BaseIsValid(t *testing.T) {
	f := newFixture(t)
	for name, doc := range map[string]string{
		"base":            v2Base,
		"hosts relax":     v2Base + "permitted = []\ndns = []\n",
		"no host names":   strings.NewReplacer(v2Allow+"\n", "", v2Res+"\n", "", v2Hosts+"\n", "").Replace(v2Base) + "permitted = [" + okPermitted + "]\ndns = [" + okDNS + "]\n",
		"network hosts":   strings.Replace(v2Base, v2Allow+"\n", "", 1) + "\n[network]\nallow_hosts = [\"api.example.com\"]\n",
		"narrower deny":   v2With(v2Res, v2Res+"\ndeny_hosts = [\"x.cdn.example.net\"]"),
		"other no ready":  v2Base + "\n[profiles.other]\nimage = \"docker.io/library/debian:bookworm\"\nallow_hosts = [\"a.example.com\"]\nresolver = \"192.0.2.53\"\n",
		"permitted too":   v2Base + "permitted = [" + okPermitted + "]\n",
		"quoted schema":   strings.Replace(v2Base, `schema = "lazaret-trusted-host-config-v2"`, `"schema" = 'lazaret-trusted-host-config-v2'`, 1),
		"escaped schema":  strings.Replace(v2Base, `schema = "lazaret-trusted-host-config-v2"`, `schema = "lazaret-trusted-host-config-\u00762"`, 1),
		"schema in table": "# comment\n" + v2Base,
	} {
		t.Run(name, func(t *testing.T) {
			cfg, err := f.resolve(t, doc)
			if err != nil {
				t.Fatalf("base document invalid: %v%s", err, dumpProblems(problemsOf(t, err)))
			}
			if cfg.SchemaVersion() != 2 {
				t.Errorf("schema version %d", cfg.SchemaVersion())
			}
		})
	}
}

func TestMatchHost(t *testing.T) {
	tests := []struct {
		pattern, name string
		want          bool
	}{
		{"api.example.com", "api.example.com", true},
		{"api.example.com", "x.api.example.com", false},
		{"api.example.com", "example.com", false},
		{"*.example.com", "api.example.com", true},
		{"*.example.com", "a.b.example.com", true},
		{"*.example.com", "example.com", false},
		{"*.example.com", "badexample.com", false},
		{"*.example.com", "api.example.com.evil.net", false},
		{"*.example.com", "API.example.com", false},
		{"*.example.com", "api.example.com.", false},
		{"*.example.com", "*.example.com", false},
		{"*.example.com", ".example.com", false},
		{"*.com", "example.com", false},
		{"*", "example.com", false},
		{"example.com", "example.com\x00", false},
		{"Example.com", "Example.com", false},
	}
	for _, tc := range tests {
		if got := MatchHost(tc.pattern, tc.name); got != tc.want {
			t.Errorf("MatchHost(%q, %q) = %v, want %v", tc.pattern, tc.name, got, tc.want)
		}
	}
}

func TestDecideHost(t *testing.T) {
	allow := []string{"*.example.com", "api.example.org", "registry.npmjs.org"}
	deny := []string{"*.internal.example.com", "telemetry.example.com", "api.example.org"}
	tests := []struct {
		name    string
		allowed bool
		rule    string
	}{
		{"www.example.com", true, "*.example.com"},
		{"registry.npmjs.org", true, "registry.npmjs.org"},
		{"telemetry.example.com", false, "telemetry.example.com"},
		{"db.internal.example.com", false, "*.internal.example.com"},
		{"internal.example.com", true, "*.example.com"},
		{"api.example.org", false, "api.example.org"},
		{"example.com", false, ""},
		{"other.net", false, ""},
		{"WWW.example.com", false, ""},
		{"www.example.com.", false, ""},
		{"", false, ""},
		{"\xff\xfe.example.com", false, ""},
	}
	for _, tc := range tests {
		allowed, rule := DecideHost(allow, deny, tc.name)
		if allowed != tc.allowed || rule != tc.rule {
			t.Errorf("DecideHost(%q) = %v %q, want %v %q", tc.name, allowed, rule, tc.allowed, tc.rule)
		}
	}
	// Deny beats allow even when the allow is narrower, and the most
	// specific deny is reported.
	if ok, rule := DecideHost([]string{"api.example.com"}, []string{"*.example.com", "api.example.com.evil", "api.example.com"}, "api.example.com"); ok || rule != "api.example.com" {
		t.Errorf("narrow allow under broad deny: %v %q", ok, rule)
	}
	if ok, rule := DecideHost([]string{"api.example.com"}, []string{"*.example.com"}, "api.example.com"); ok || rule != "*.example.com" {
		t.Errorf("narrow allow under broad deny: %v %q", ok, rule)
	}
	// Invalid patterns in the lists match nothing.
	if ok, _ := DecideHost([]string{"*", "*.com", "API.example.com"}, nil, "api.example.com"); ok {
		t.Error("an invalid pattern allowed a name")
	}
}
