package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func FuzzLoadResolve(f *testing.F) {
	fx := newFixture(f)
	seeds := []string{
		testDoc("", ""),
		testDoc(`env = { TOKEN = "env:API_TOKEN" }`, vol("{profile_dir}/c", "/home/agent/c", "directory", "create = true")),
		readinessDocWith(okDenied, okPermitted, okDNS, okAllow),
		"schema = 1",
		"[[profiles.dev.volumes]]\nhost = \"~//etc\"\n",
		"Schema = \"lazaret-trusted-host-config-v1\"\n[profiles.\"a.b\"]\nimage = \"x\"\n",
		v2Base,
		v2Base + "permitted = [" + okPermitted + "]\ndns = [" + okDNS + "]\n[network]\nallow_hosts = [\"registry.npmjs.org\"]\ndeny_hosts = [\"*.evil.example\"]\n",
		v2With(v2Res, v2Res+"\ndeny_hosts = [\"*.example.com\"]"),
		v2With(v2Hosts, `hosts = [{ name = "x.cdn.example.net", port = 443 }, { name = "api.example.com", port = 80 }]`),
		strings.Replace(readinessDocWith(okDenied, okPermitted, okDNS, okAllow), SchemaID, SchemaIDV2, 1),
		"schema = \"lazaret-trusted-host-config-v2\"\n[profiles.dev]\nallow_hosts = [\"*.com\"]\n",
		credDoc(okCred, cred("TOKEN", `"x.cdn.example.net"`, "header", "x-api-key")+"\nport = 8443"),
	}
	for _, name := range []string{"basic.toml", "v2.toml", "v2-credentials.toml"} {
		if data, err := os.ReadFile(filepath.Join("testdata", "golden", name)); err == nil {
			seeds = append(seeds, string(data))
		}
	}
	for _, s := range seeds {
		f.Add([]byte(fx.expand(s)))
	}
	opts := fx.options("dev")
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Resolve(data, opts)
		if err != nil {
			if cfg != nil {
				t.Fatal("error with a configuration")
			}
			var ie *InvalidError
			if !errors.As(err, &ie) || len(ie.Problems) == 0 {
				t.Fatalf("error is not a nonempty *InvalidError: %v", err)
			}
			for _, p := range ie.Problems {
				if p.Rule == "" || p.Message == "" {
					t.Fatalf("problem without rule or message: %#v", p)
				}
				if strings.Contains(p.String(), fx.env["API_TOKEN"]) {
					t.Fatalf("problem leaks an environment value: %s", p)
				}
			}
			return
		}
		defer cfg.Close()
		switch rec2, ok := cfg.FingerprintRecordV2(); {
		case cfg.SchemaVersion() == 2 && (!ok || rec2.Digest() != cfg.Fingerprint()):
			t.Fatal("v2 fingerprint is not the digest of its v2 record")
		case cfg.SchemaVersion() == 1 && (ok || cfg.EffectiveAllowHosts() != nil || len(cfg.Readiness().Hosts) != 0):
			t.Fatal("v1 configuration carries v2 data")
		case cfg.SchemaVersion() == 1:
			rec := cfg.FingerprintRecord()
			if rec.Digest() != cfg.Fingerprint() {
				t.Fatal("fingerprint is not the digest of its record")
			}
		case cfg.SchemaVersion() != 2:
			t.Fatalf("schema version %d", cfg.SchemaVersion())
		}
		for _, h := range cfg.Readiness().Hosts {
			if ok, _ := cfg.DecideHost(h.Name); !ok {
				t.Fatalf("readiness host %s is not allowed by the policy that accepted it", h.Name)
			}
		}
		again, err := Resolve(data, opts)
		if err != nil {
			t.Fatalf("second resolution failed: %v", err)
		}
		defer again.Close()
		if again.Fingerprint() != cfg.Fingerprint() || again.DomainID() != cfg.DomainID() || again.SchemaVersion() != cfg.SchemaVersion() {
			t.Fatal("resolution is not deterministic")
		}
		if strings.Contains(fmt.Sprintf("%+v", cfg), fx.env["API_TOKEN"]) {
			t.Fatal("formatting leaks an environment value")
		}
	})
}

// FuzzHostPattern checks the host-name matcher on arbitrary bytes: it never
// panics, matches only strict (lowercase) DNS names, never lets a wildcard
// match its own base, and lets deny beat allow.
func FuzzHostPattern(f *testing.F) {
	for _, s := range [][2]string{
		{"*.example.com", "api.example.com"},
		{"*.example.com", "example.com"},
		{"api.example.com", "API.example.com"},
		{"*.com", "example.com"},
		{"**.x.com", "a.x.com"},
		{"a.*.com", "a.b.com"},
		{"*", ""},
		{"*.example.com", "a.example.com."},
		{"*.example.com", "a\x00.example.com"},
		{"*.example.com", "\xff.example.com"},
		{"registry.npmjs.org", "registry.npmjs.org"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, pattern, name string) {
		m := MatchHost(pattern, name)
		if m && checkDNSName(name) != "" {
			t.Fatalf("%q matches %q, which is not a strict DNS name", pattern, name)
		}
		if m && checkHostPattern(pattern) != "" {
			t.Fatalf("invalid pattern %q matches %q", pattern, name)
		}
		if base, wild := strings.CutPrefix(pattern, "*."); wild && MatchHost(pattern, base) {
			t.Fatalf("wildcard %q matches its own base", pattern)
		}
		if m && strings.ToLower(name) != name {
			t.Fatalf("%q matches %q, which is not lowercase", pattern, name)
		}
		allowed, rule := DecideHost([]string{pattern}, nil, name)
		if allowed != m || (allowed && rule != pattern) {
			t.Fatalf("DecideHost allow-only = %v %q, MatchHost = %v", allowed, rule, m)
		}
		if allowed, rule := DecideHost([]string{pattern}, []string{pattern}, name); allowed || (m && rule != pattern) {
			t.Fatalf("deny did not beat allow: %v %q", allowed, rule)
		}
		if upper := strings.ToUpper(name); upper != name {
			if ok, _ := DecideHost([]string{pattern}, nil, upper); ok {
				t.Fatalf("uppercase %q allowed", upper)
			}
		}
		// Arbitrary lists never panic.
		DecideHost([]string{pattern, name, "*." + name}, []string{name + pattern}, pattern)
	})
}

func BenchmarkLoadResolve20Profiles(b *testing.B) {
	fx := newFixture(b)
	var doc strings.Builder
	doc.WriteString("schema = \"lazaret-trusted-host-config-v1\"\n[network]\ndefault_deny = [\"203.0.113.0/24\"]\n")
	for i := range 20 {
		name := fmt.Sprintf("p%02d", i)
		fmt.Fprintf(&doc, `
[profiles.%[1]s]
image = "docker.io/library/debian:bookworm"
persistent_dirs = ["/home/agent", "/opt/tools"]
allow_egress = ["192.0.2.0/24", "198.51.100.%[2]d/32"]
env = { TOKEN = "env:API_TOKEN", HOME_COPY = "env:HOME" }

[[profiles.%[1]s.volumes]]
host = "{profile_dir}/cache"
container = "/home/agent/cache"
kind = "directory"
create = true

[[profiles.%[1]s.volumes]]
host = "%[3]s/src/dir"
container = "/opt/tools/src"
kind = "directory"
access = "read-only"

[profiles.%[1]s.readiness]
denied = [{ address = "203.0.113.1", port = 443 }]
permitted = [{ address = "192.0.2.1", port = 443 }, { address = "198.51.100.%[2]d", port = 80 }]
dns = [{ resolver = "192.0.2.53", query = "example.com" }]

[profiles.%[1]s.escalation]
enabled = true
auto_approve = [{ executable = "%[3]s/bin/tool", args = ["status"] }]
`, name, i+1, fx.dir)
	}
	data := []byte(doc.String())
	opts := fx.options("p07")
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		cfg, err := Resolve(data, opts)
		if err != nil {
			b.Fatal(err)
		}
		cfg.Close()
	}
}
