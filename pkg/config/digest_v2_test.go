package config

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"lazaret.dev/pkg/layout"
	"lazaret.dev/pkg/paths"
)

// resolveGolden resolves testdata/golden/name with profile dev and
// workspace /srv/project on a host whose every path lies under
// /nonexistent.
func resolveGolden(t *testing.T, name string) *ResolvedDomainConfiguration {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "golden", name))
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"HOME": "/nonexistent/lazaret-golden/home", "XDG_RUNTIME_DIR": "/nonexistent/lazaret-golden/run", "API_TOKEN": "x",
		"API_KEY": "sk-golden-0123456789abcdef", "GH_TOKEN": "ghp_0123456789abcdefghij"}
	cfg, err := Resolve(data, Options{
		Profile:     "dev",
		Workspace:   "/srv/project",
		Layout:      layout.Production(),
		Environment: paths.Environment{LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok }, UID: os.Getuid()},
		File:        name,
	})
	if err != nil {
		t.Fatalf("%v%s", err, dumpProblems(problemsOf(t, err)))
	}
	t.Cleanup(func() { cfg.Close() })
	return cfg
}

// v2GoldenFingerprint is ConfigurationFingerprintV2 of
// testdata/golden/v2.toml, as docs/CONFIGURATION.md states it.
const v2GoldenFingerprint = "e4dbfa136d35580688748b72b3296a3191c8bf49d7cae96b57b50c48d1895b37"

// TestGoldenV2Configuration resolves testdata/golden/v2.toml end to end and
// compares its preimage with one assembled by hand.
func TestGoldenV2Configuration(t *testing.T) {
	cfg := resolveGolden(t, "v2.toml")
	if cfg.SchemaVersion() != 2 {
		t.Fatalf("schema version %d", cfg.SchemaVersion())
	}
	rec, ok := cfg.FingerprintRecordV2()
	if !ok {
		t.Fatal("no v2 record")
	}
	pre := rec.Preimage()
	port443 := "\x01\xbb"
	// Items in the unsigned bytewise order of their encodings: the length
	// prefix puts shorter strings first.
	handBuilt := "lazaret-configuration-fingerprint-v2\x00" +
		fr("dev") + fr("/nonexistent/lazaret-golden/data") + fr("/nonexistent/lazaret-golden/run/lazaret") +
		fr("docker.io/library/debian:bookworm") + "\x01" +
		list(fr("/home/agent")) + list() + list() +
		list() +
		list(pfx(10, 0, 0, 0, 8), pfx(172, 16, 0, 0, 12), pfx(192, 168, 0, 0, 16), pfx(198, 51, 100, 0, 24)) +
		list(tgt(198, 51, 100, 7, 443)) + list() + list() +
		"\x00" + list() +
		list(fr("*.example.org"), fr("api.example.com"), fr("registry.npmjs.org")) +
		list(fr("*.evil.example"), fr("telemetry.example.org")) +
		fr("\xc0\x00\x02\x35") +
		list(fr("api.example.com")+port443, fr("registry.npmjs.org")+port443)
	if string(pre) != handBuilt {
		t.Fatalf("preimage differs from the hand-built one:\n got %x\nwant %x", pre, handBuilt)
	}
	sum := sha256.Sum256([]byte(handBuilt))
	fp, did := cfg.Fingerprint(), cfg.DomainID()
	if fp != rec.Digest() || hex.EncodeToString(fp[:]) != hex.EncodeToString(sum[:]) {
		t.Fatal("fingerprint is not SHA-256 of the preimage")
	}
	if got := hex.EncodeToString(fp[:]); got != v2GoldenFingerprint {
		t.Errorf("fingerprint %s, want %s", got, v2GoldenFingerprint)
	}
	if did != DomainIDV1("dev", "/srv/project") {
		t.Error("the Domain ID of a v2 document is not DomainIdV1")
	}
	checkGolden(t, "v2", map[string]string{
		"profile":               "dev",
		"workspace":             "/srv/project",
		"effective_allow_hosts": fmt.Sprint(cfg.EffectiveAllowHosts()),
		"effective_deny_hosts":  fmt.Sprint(cfg.EffectiveDenyHosts()),
		"readiness_hosts":       fmt.Sprint(cfg.Readiness().Hosts),
		"domain_id":             hex.EncodeToString(did[:]),
		"fingerprint_preimage":  hex.EncodeToString(pre),
		"fingerprint":           hex.EncodeToString(fp[:]),
	}, []string{"profile", "workspace", "effective_allow_hosts", "effective_deny_hosts", "readiness_hosts", "domain_id", "fingerprint_preimage", "fingerprint"})
}

// TestV1GoldenUnchanged pins every v1 golden vector to the digests that
// were published before v2 existed: adding v2 must not move one v1 byte.
func TestV1GoldenUnchanged(t *testing.T) {
	published := map[string]struct{ domainID, fingerprint string }{
		"minimal": {"1dda30f4bc0613b6741914861047fbe03504bced69bb10838b0b754936f66f2c", "96b9ce109e291ed0acfb0278b747edc4a7bcfe5dd7a3f36a9f28c45c7cccf0ef"},
		"full":    {"c8f44cc652f355fa59f797443d3ad4a31f80f6dd43a16c729ac5c47afc167acf", "a5e29c6b6a672732bb3c2529ceddad674b334b08c8dc6027a6ebf945846396bc"},
	}
	for _, v := range goldenVectors() {
		want, ok := published[v.name]
		if !ok {
			t.Errorf("golden vector %q has no published digest here", v.name)
			continue
		}
		did, fp := DomainIDV1(v.profile, v.workspace), v.record.Digest()
		if hex.EncodeToString(did[:]) != want.domainID || hex.EncodeToString(fp[:]) != want.fingerprint {
			t.Errorf("%s: domain %x fingerprint %x, want %s %s", v.name, did, fp, want.domainID, want.fingerprint)
		}
		// Hosts are not part of a v1 record's preimage.
		withHosts := v.record
		withHosts.Readiness.Hosts = []HostTarget{{"api.example.com", 443}}
		if withHosts.Digest() != fp {
			t.Errorf("%s: readiness hosts changed a v1 fingerprint", v.name)
		}
	}
	cfg := resolveGolden(t, "basic.toml")
	fp, did := cfg.Fingerprint(), cfg.DomainID()
	if cfg.SchemaVersion() != 1 ||
		hex.EncodeToString(did[:]) != "f607846635651ed7871a8cbd0beaa1d3f7c79f75c50b686552860db49a9e8fbe" ||
		hex.EncodeToString(fp[:]) != "1bfa436562105fd46a465e590dbdb8102f68ab7843d03b7fdb2fcab48b878e45" {
		t.Errorf("basic: version %d domain %x fingerprint %x", cfg.SchemaVersion(), did, fp)
	}
}
