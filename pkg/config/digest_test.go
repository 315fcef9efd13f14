package config

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"lazaret.dev/pkg/layout"
	"lazaret.dev/pkg/paths"
)

var update = flag.Bool("update", false, "rewrite the golden digest files")

// Independent encoders for hand-built preimages: they share no code with
// digest.go.
func u32(n int) string   { return string([]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}) }
func fr(s string) string { return u32(len(s)) + s }

// list frames items that the caller has already put in the required order.
func list(items ...string) string {
	out := u32(len(items))
	for _, it := range items {
		out += fr(it)
	}
	return out
}

func pfx(a, b, c, d, bits byte) string { return string([]byte{a, b, c, d, bits}) }
func tgt(a, b, c, d byte, port uint16) string {
	return string([]byte{a, b, c, d, byte(port >> 8), byte(port)})
}

type goldenVector struct {
	name      string
	profile   string
	workspace string
	record    FingerprintRecordV1
	handBuilt string // the fingerprint preimage, written out by hand
}

func goldenVectors() []goldenVector {
	a := netip.MustParseAddr
	p := netip.MustParsePrefix
	return []goldenVector{
		{
			name:      "minimal",
			profile:   "dev",
			workspace: "/home/user/project",
			record: FingerprintRecordV1{
				SelectedProfile:      "dev",
				CanonicalStorageRoot: "/home/user/.local/share/lazaret",
				CanonicalRuntimeRoot: "/run/user/1000/lazaret",
				Image:                "docker.io/library/debian:bookworm",
				IsolateGitignored:    true,
				EffectiveAllow:       []netip.Prefix{p("192.0.2.0/24")},
				EffectiveDeny:        []netip.Prefix{p("192.168.0.0/16"), p("10.0.0.0/8"), p("172.16.0.0/12")},
				Readiness: ReadinessV1{
					Denied:    []Target{{a("198.51.100.1"), 443}},
					Permitted: []Target{{a("192.0.2.1"), 443}},
					DNS:       []DNSTarget{{a("192.0.2.53"), "example.com"}},
				},
			},
			handBuilt: "lazaret-configuration-fingerprint-v1\x00" +
				fr("dev") + fr("/home/user/.local/share/lazaret") + fr("/run/user/1000/lazaret") +
				fr("docker.io/library/debian:bookworm") + "\x01" +
				list() + list() + list() +
				list(pfx(192, 0, 2, 0, 24)) +
				list(pfx(10, 0, 0, 0, 8), pfx(172, 16, 0, 0, 12), pfx(192, 168, 0, 0, 16)) +
				list(tgt(198, 51, 100, 1, 443)) + list(tgt(192, 0, 2, 1, 443)) +
				list(string([]byte{192, 0, 2, 53})+fr("example.com")) +
				"\x00" + list(),
		},
		{
			name:      "full",
			profile:   "agent.ci",
			workspace: "/srv/work space/ünïcode",
			record: FingerprintRecordV1{
				SelectedProfile:      "agent.ci",
				CanonicalStorageRoot: "/data/lazaret",
				CanonicalRuntimeRoot: "/tmp/lazaret-1000",
				Image:                "localhost/agent:1",
				IsolateGitignored:    false,
				PersistentDirs:       []string{"/home/agent/cache", "/opt/x"},
				EnvironmentReferences: []EnvironmentReference{
					{"TOKEN", "GH_TOKEN"}, {"A", "B"},
				},
				Volumes: []ResolvedVolumeRecord{
					{"/data/lazaret/profiles/agent.ci/npm", "/home/agent/cache/npm", KindDirectory, ReadWrite, true},
					{"/home/user/.gitconfig", "/opt/x/gitconfig", KindFile, ReadOnly, false},
				},
				EffectiveAllow: []netip.Prefix{p("0.0.0.0/0"), p("203.0.113.0/25")},
				EffectiveDeny:  []netip.Prefix{p("10.0.0.0/8"), p("172.16.0.0/12"), p("192.168.0.0/16"), p("203.0.113.128/25")},
				Readiness: ReadinessV1{
					Denied:    []Target{{a("203.0.113.200"), 80}, {a("10.0.0.1"), 22}},
					Permitted: []Target{{a("203.0.113.5"), 443}, {a("203.0.113.5"), 80}},
					DNS:       []DNSTarget{{a("192.0.2.53"), "example.com"}, {a("192.0.2.53"), "a.example"}},
				},
				EscalationEnabled: true,
				AutoApprovalRules: []AutoApprovalRule{
					{"/usr/bin/git", []string{"push", "origin"}, true},
					{"/usr/bin/gh", []string{"pr", "create"}, false},
					{"/usr/bin/git", []string{"status"}, false},
				},
			},
			// Items appear in unsigned bytewise order of their encodings;
			// a length-prefixed item therefore sorts shorter strings first.
			handBuilt: "lazaret-configuration-fingerprint-v1\x00" +
				fr("agent.ci") + fr("/data/lazaret") + fr("/tmp/lazaret-1000") + fr("localhost/agent:1") + "\x00" +
				list(fr("/opt/x"), fr("/home/agent/cache")) +
				list(fr("A")+fr("B"), fr("TOKEN")+fr("GH_TOKEN")) +
				list(fr("/home/user/.gitconfig")+fr("/opt/x/gitconfig")+"\x00\x00\x00",
					fr("/data/lazaret/profiles/agent.ci/npm")+fr("/home/agent/cache/npm")+"\x01\x01\x01") +
				list(pfx(0, 0, 0, 0, 0), pfx(203, 0, 113, 0, 25)) +
				list(pfx(10, 0, 0, 0, 8), pfx(172, 16, 0, 0, 12), pfx(192, 168, 0, 0, 16), pfx(203, 0, 113, 128, 25)) +
				list(tgt(10, 0, 0, 1, 22), tgt(203, 0, 113, 200, 80)) +
				list(tgt(203, 0, 113, 5, 80), tgt(203, 0, 113, 5, 443)) +
				list(string([]byte{192, 0, 2, 53})+fr("a.example"), string([]byte{192, 0, 2, 53})+fr("example.com")) +
				"\x01" +
				list(fr("/usr/bin/gh")+list(fr("pr"), fr("create"))+"\x00",
					fr("/usr/bin/git")+list(fr("status"))+"\x00",
					fr("/usr/bin/git")+list(fr("push"), fr("origin"))+"\x01"),
		},
	}
}

// golden reads or (with -update) writes name.golden: key = hex lines.
func checkGolden(t *testing.T, name string, got map[string]string, order []string) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name+".golden")
	if *update {
		var b strings.Builder
		fmt.Fprintf(&b, "# Golden digest vector %q; see docs/CONFIGURATION.md.\n", name)
		for _, k := range order {
			fmt.Fprintf(&b, "%s = %s\n", k, got[k])
		}
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading golden file (run go test -update to create it): %v", err)
	}
	want := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, " = ")
		if !ok {
			t.Fatalf("%s: malformed line %q", path, line)
		}
		want[k] = v
	}
	for _, k := range order {
		if got[k] != want[k] {
			t.Errorf("%s: %s\n got %s\nwant %s", path, k, got[k], want[k])
		}
	}
}

func TestGoldenRecordDigests(t *testing.T) {
	for _, v := range goldenVectors() {
		t.Run(v.name, func(t *testing.T) {
			pre := v.record.Preimage()
			if !bytes.Equal(pre, []byte(v.handBuilt)) {
				t.Fatalf("preimage differs from the hand-built one:\n got %x\nwant %x", pre, v.handBuilt)
			}
			sum := sha256.Sum256([]byte(v.handBuilt))
			if d := v.record.Digest(); !bytes.Equal(d[:], sum[:]) {
				t.Fatal("digest is not SHA-256 of the preimage")
			}
			dpre := "lazaret-domain-id-v1\x00" + fr(v.profile) + fr(v.workspace)
			if got := DomainIDPreimageV1(v.profile, v.workspace); string(got) != dpre {
				t.Fatalf("domain preimage:\n got %x\nwant %x", got, dpre)
			}
			did := DomainIDV1(v.profile, v.workspace)
			dsum := sha256.Sum256([]byte(dpre))
			if !bytes.Equal(did[:], dsum[:]) {
				t.Fatal("domain ID is not SHA-256 of its preimage")
			}
			checkGolden(t, v.name, map[string]string{
				"profile":              v.profile,
				"workspace":            v.workspace,
				"domain_id_preimage":   hex.EncodeToString([]byte(dpre)),
				"domain_id":            hex.EncodeToString(dsum[:]),
				"fingerprint_preimage": hex.EncodeToString(pre),
				"fingerprint":          hex.EncodeToString(sum[:]),
			}, []string{"profile", "workspace", "domain_id_preimage", "domain_id", "fingerprint_preimage", "fingerprint"})
		})
	}
}

// TestGoldenConfiguration resolves testdata/golden/basic.toml end to end.
func TestGoldenConfiguration(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "golden", "basic.toml"))
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"HOME": "/nonexistent/lazaret-golden/home", "XDG_RUNTIME_DIR": "/nonexistent/lazaret-golden/run", "API_TOKEN": "x"}
	cfg, err := Resolve(data, Options{
		Profile:     "dev",
		Workspace:   "/srv/project",
		Layout:      layout.Production(),
		Environment: paths.Environment{LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok }, UID: os.Getuid()},
		File:        "basic.toml",
	})
	if err != nil {
		t.Fatalf("%v%s", err, dumpProblems(problemsOf(t, err)))
	}
	defer cfg.Close()
	rec := cfg.FingerprintRecord()
	pre := rec.Preimage()
	fp, did := cfg.Fingerprint(), cfg.DomainID()
	checkGolden(t, "basic", map[string]string{
		"profile":              "dev",
		"workspace":            "/srv/project",
		"storage_root":         cfg.StorageRoot(),
		"runtime_root":         cfg.RuntimeRoot(),
		"effective_allow":      fmt.Sprint(cfg.EffectiveAllow()),
		"effective_deny":       fmt.Sprint(cfg.EffectiveDeny()),
		"domain_id":            hex.EncodeToString(did[:]),
		"fingerprint_preimage": hex.EncodeToString(pre),
		"fingerprint":          hex.EncodeToString(fp[:]),
	}, []string{"profile", "workspace", "storage_root", "runtime_root", "effective_allow", "effective_deny", "domain_id", "fingerprint_preimage", "fingerprint"})
}
