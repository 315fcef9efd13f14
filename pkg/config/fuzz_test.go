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
	}
	if data, err := os.ReadFile(filepath.Join("testdata", "golden", "basic.toml")); err == nil {
		seeds = append(seeds, string(data))
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
		rec := cfg.FingerprintRecord()
		if rec.Digest() != cfg.Fingerprint() {
			t.Fatal("fingerprint is not the digest of its record")
		}
		again, err := Resolve(data, opts)
		if err != nil {
			t.Fatalf("second resolution failed: %v", err)
		}
		defer again.Close()
		if again.Fingerprint() != cfg.Fingerprint() || again.DomainID() != cfg.DomainID() {
			t.Fatal("resolution is not deterministic")
		}
		if strings.Contains(fmt.Sprintf("%+v", cfg), fx.env["API_TOKEN"]) {
			t.Fatal("formatting leaks an environment value")
		}
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
