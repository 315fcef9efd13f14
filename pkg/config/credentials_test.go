package config

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// credEnv is the env table of the credential documents: API_KEY holds a
// value fit for brokering, the others (see newFixture) do not.
const credEnv = `env = { API_KEY = "env:API_KEY", TOKEN = "env:API_TOKEN", SPACE = "env:SPACE_KEY", LONG = "env:LONG_KEY", EMPTY = "env:EMPTY_KEY" }`

// okCred is a valid credential of credDoc's profile.
const okCred = "env = \"API_KEY\"\nhosts = [\"api.example.com\"]\nscheme = \"bearer\""

// cred writes one credential; hosts is the inside of the hosts array and
// header is left out when empty.
func cred(env, hosts, scheme, header string) string {
	s := fmt.Sprintf("env = %q\nhosts = [%s]\nscheme = %q", env, hosts, scheme)
	if header != "" {
		s += fmt.Sprintf("\nheader = %q", header)
	}
	return s
}

// credDoc is v2Base with credEnv and the given credentials of profile dev.
func credDoc(creds ...string) string {
	s := v2With(v2Res, v2Res+"\n"+credEnv)
	for _, c := range creds {
		s += "\n[[profiles.dev.credentials]]\n" + c + "\n"
	}
	return s
}

// nineCreds is a document whose profile has one credential too many.
func nineCreds() string {
	env := make([]string, 9)
	var creds string
	for i := range env {
		env[i] = fmt.Sprintf(`K%d = "env:API_KEY"`, i)
		creds += "\n[[profiles.dev.credentials]]\n" + cred(fmt.Sprintf("K%d", i), `"api.example.com"`, "header", fmt.Sprintf("x-key-%d", i)) + "\n"
	}
	return v2With(v2Res, v2Res+"\nenv = { "+strings.Join(env, ", ")+" }") + creds
}

func manyCDNHosts(n int) string {
	hosts := make([]string, n)
	for i := range hosts {
		hosts[i] = fmt.Sprintf(`"h%d.cdn.example.net"`, i)
	}
	return strings.Join(hosts, ", ")
}

// credNoHosts is a v2 document with a credential whose profile allows no
// host names.
func credNoHosts() string {
	s := strings.NewReplacer(v2Allow+"\n", "", v2Res+"\n", "", v2Hosts+"\n", "").Replace(v2Base)
	s = strings.Replace(s, "persistent_dirs", credEnv+"\npersistent_dirs", 1)
	return s + "permitted = [" + okPermitted + "]\ndns = [" + okDNS + "]\n\n[[profiles.dev.credentials]]\n" + okCred + "\n"
}

var (
	testCertOnce sync.Once
	testCertPEM  []byte
)

// testCert returns a self-signed certificate in PEM, made once per run.
func testCert(t testing.TB) []byte {
	t.Helper()
	testCertOnce.Do(func() {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			panic(err)
		}
		tmpl := &x509.Certificate{
			SerialNumber:          big.NewInt(1),
			Subject:               pkix.Name{CommonName: "lazaret test root"},
			NotBefore:             time.Unix(0, 0),
			NotAfter:              time.Unix(0, 0).Add(100 * 365 * 24 * time.Hour),
			IsCA:                  true,
			BasicConstraintsValid: true,
			KeyUsage:              x509.KeyUsageCertSign,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
		if err != nil {
			panic(err)
		}
		testCertPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	})
	return testCertPEM
}

// writeCAFiles writes the upstream_ca files of the credential tests into
// dir: good.pem, and files that break one rule each.
func writeCAFiles(t testing.TB, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cert := testCert(t)
	for name, c := range map[string]struct {
		data []byte
		mode os.FileMode
	}{
		"good.pem":   {append([]byte("# extra roots\n"), cert...), 0o644},
		"gw.pem":     {cert, 0o664},
		"nocert.pem": {pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: []byte{1, 2, 3}}), 0o644},
		"bad.pem":    {pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte{1, 2, 3}}), 0o644},
	} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, c.data, c.mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, c.mode); err != nil {
			t.Fatal(err)
		}
	}
	// A sparse file one byte over the limit, beginning with a certificate.
	big, err := os.Create(filepath.Join(dir, "big.pem"))
	if err != nil {
		t.Fatal(err)
	}
	defer big.Close()
	if _, err := big.Write(cert); err != nil {
		t.Fatal(err)
	}
	if err := big.Truncate(MaxUpstreamCASize + 1); err != nil {
		t.Fatal(err)
	}
}

func TestCredentialBaseIsValid(t *testing.T) {
	f := newFixture(t)
	for name, doc := range map[string]string{
		"one":               credDoc(okCred),
		"header":            credDoc(cred("API_KEY", `"api.example.com"`, "header", "x-api-key")),
		"basic":             credDoc(cred("API_KEY", `"api.example.com", "x.cdn.example.net"`, "basic", "")),
		"port":              credDoc(okCred + "\nport = 8443"),
		"ca":                credDoc(okCred + "\nupstream_ca = \"@DIR@/ca/good.pem\""),
		"other port":        credDoc(okCred, "env = \"SPACE\"\nhosts = [\"api.example.com\"]\nport = 8443\nscheme = \"basic\""),
		"other header":      credDoc(okCred, cred("SPACE", `"api.example.com"`, "header", "x-api-key")),
		"unbrokered values": credDoc(),
		"eight":             strings.Replace(nineCreds(), "\n[[profiles.dev.credentials]]\nenv = \"K8\"", "\n[[profiles.dev.other]]\nenv = \"K8\"", 1),
	} {
		t.Run(name, func(t *testing.T) {
			if name == "other port" || name == "other header" {
				// SPACE's value is not fit for brokering: point it at API_KEY.
				doc = strings.Replace(doc, `SPACE = "env:SPACE_KEY"`, `SPACE = "env:API_KEY"`, 1)
			}
			if name == "eight" {
				doc = doc[:strings.Index(doc, "\n[[profiles.dev.other]]")]
			}
			if _, err := f.resolve(t, doc); err != nil {
				t.Fatalf("base document invalid: %v%s", err, dumpProblems(problemsOf(t, err)))
			}
		})
	}
}

func TestCheckCredentialValue(t *testing.T) {
	for _, tc := range []struct {
		val string
		ok  bool
	}{
		{"abcdefghijkl", true},
		{"abcdefghijk", false},
		{"sk-ant-api03-" + strings.Repeat("A", 12), true},
		{"sk-ant-api03-" + strings.Repeat("A", 11), false},
		{"sk-ant-api03-" + strings.Repeat("A", 11) + "-----", false},
		{"ghp_0123456789abcdefghij", true},
		// A separator past the first 24 bytes does not count.
		{strings.Repeat("a", 24) + "-b", true},
		{"a-b-c-d-e-f-g-h-i-j-k-l-m-n-o", false},
		{"AIza" + strings.Repeat("x", 35), true},
		{"", false},
		{strings.Repeat("a", MaxCredentialValue), true},
		{strings.Repeat("a", MaxCredentialValue+1), false},
		{"abcdefghijkl\n", false},
		{"abcdefghijkl mn", false},
		{"abcdefghijkl\x7f", false},
		{"abcdefghijklé", false},
	} {
		why := checkCredentialValue(tc.val)
		if (why == "") != tc.ok {
			t.Errorf("checkCredentialValue(%.40q) = %q, want ok %v", tc.val, why, tc.ok)
		}
		if why != "" && len(tc.val) > 4 && strings.Contains(why, tc.val) {
			t.Errorf("reason %q contains the value", why)
		}
	}
}

func TestCredentialsResolve(t *testing.T) {
	f := newFixture(t)
	doc := strings.Replace(credDoc(
		cred("API_KEY", `"x.cdn.example.net", "api.example.com"`, "header", "x-api-key")+"\nport = 8443\nupstream_ca = \"@DIR@/ca/good.pem\"",
		cred("SPACE", `"api.example.com"`, "bearer", ""),
	), `SPACE = "env:SPACE_KEY"`, `SPACE = "env:API_KEY"`, 1)
	cfg, err := f.resolve(t, doc)
	if err != nil {
		t.Fatalf("resolve: %v%s", err, dumpProblems(problemsOf(t, err)))
	}
	ca, err := os.ReadFile(filepath.Join(f.dir, "ca", "good.pem"))
	if err != nil {
		t.Fatal(err)
	}
	got := cfg.Credentials()
	want := []Credential{
		{Env: "API_KEY", Hosts: []string{"x.cdn.example.net", "api.example.com"}, Port: 8443, Scheme: SchemeHeader, Header: "x-api-key", UpstreamCA: ca},
		{Env: "SPACE", Hosts: []string{"api.example.com"}, Port: 443, Scheme: SchemeBearer},
	}
	if len(got) != len(want) {
		t.Fatalf("credentials %+v", got)
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Env != w.Env || !slices.Equal(g.Hosts, w.Hosts) || g.Port != w.Port || g.Scheme != w.Scheme || g.Header != w.Header || string(g.UpstreamCA) != string(w.UpstreamCA) || (g.UpstreamCA == nil) != (w.UpstreamCA == nil) {
			t.Errorf("credential %d: %+v, want %+v", i, g, w)
		}
	}
	got[0].Hosts[0], got[0].UpstreamCA[0] = "changed.example", 'X'
	if again := cfg.Credentials(); again[0].Hosts[0] != "x.cdn.example.net" || again[0].UpstreamCA[0] != ca[0] {
		t.Error("Credentials shares its slices with the configuration")
	}
	if v, ok := cfg.EnvironmentValue("API_KEY"); !ok || v != f.env["API_KEY"] {
		t.Error("the real value is not behind EnvironmentValue")
	}
	for _, s := range []string{cfg.String(), fmt.Sprintf("%v %+v %#v", cfg, cfg, cfg)} {
		if strings.Contains(s, f.env["API_KEY"]) {
			t.Errorf("configuration prints a value: %s", s)
		}
	}
	rec, ok := cfg.FingerprintRecordV2()
	if !ok || rec.Digest() != cfg.Fingerprint() || len(rec.Credentials) != 2 {
		t.Fatal("fingerprint is not the digest of the v2 record with credentials")
	}
	rec.Credentials[0].Hosts[0] = "changed.example"
	if cfg.Credentials()[0].Hosts[0] != "x.cdn.example.net" {
		t.Error("FingerprintRecordV2 shares its credentials with the configuration")
	}

	// The fingerprint covers every credential field but never the value.
	base := cfg.Fingerprint()
	for name, change := range map[string][2]string{
		"host":   {`"x.cdn.example.net", "api.example.com"`, `"y.cdn.example.net", "api.example.com"`},
		"port":   {"port = 8443", "port = 8444"},
		"scheme": {`scheme = "bearer"`, `scheme = "basic"`},
		"header": {`header = "x-api-key"`, `header = "x-api-token"`},
		"ca":     {"\nupstream_ca = \"@DIR@/ca/good.pem\"", ""},
		"env":    {`env = "SPACE"`, `env = "TOKEN"`},
	} {
		other := strings.Replace(doc, change[0], change[1], 1)
		if name == "env" {
			other = strings.Replace(other, `TOKEN = "env:API_TOKEN"`, `TOKEN = "env:API_KEY"`, 1)
			other = strings.Replace(other, `SPACE = "env:API_KEY"`, `SPACE = "env:API_TOKEN"`, 1)
		}
		c2, err := f.resolve(t, other)
		if err != nil {
			t.Fatalf("%s: %v%s", name, err, dumpProblems(problemsOf(t, err)))
		}
		if c2.Fingerprint() == base {
			t.Errorf("changing the credential %s leaves the fingerprint unchanged", name)
		}
	}
	f.env["API_KEY"] = "sk-live-0000000000000000000000"
	c3, err := f.resolve(t, doc)
	if err != nil {
		t.Fatal(err)
	}
	if c3.Fingerprint() != base {
		t.Error("the fingerprint depends on a credential value")
	}
}

func TestCredentialsSummary(t *testing.T) {
	f := newFixture(t)
	doc := credDoc(cred("API_KEY", `"api.example.com", "x.cdn.example.net"`, "header", "x-api-key")+"\nupstream_ca = \"/etc/lazaret/ca.pem\"", cred("TOKEN", `"api.example.com"`, "basic", "")+"\nport = 8443")
	s, err := Summarize([]byte(f.expand(doc)), "config.toml", f.options("").Environment)
	if err != nil {
		t.Fatalf("summarize: %v%s", err, dumpProblems(problemsOf(t, err)))
	}
	got := s.Credentials["dev"]
	if len(s.Credentials) != 1 || len(got) != 2 {
		t.Fatalf("credentials %+v", s.Credentials)
	}
	for i, want := range []string{
		"API_KEY: header x-api-key to api.example.com:443, x.cdn.example.net:443 (extra roots /etc/lazaret/ca.pem)",
		"TOKEN: basic to api.example.com:8443",
	} {
		if got[i].String() != want {
			t.Errorf("summary %d %q, want %q", i, got[i], want)
		}
	}
	if plain, err := Summarize([]byte(f.expand(v2Base)), "config.toml", f.options("").Environment); err != nil || plain.Credentials != nil {
		t.Errorf("summary without credentials: %v %v", err, plain)
	}
}

// v2CredentialsFingerprint is ConfigurationFingerprintV2 of
// testdata/golden/v2-credentials.toml, as docs/CONFIGURATION.md states it.
const v2CredentialsFingerprint = "6a9c674f49e5520a44ffd752cffaed789e20df2522d4db945f4e8a9dcbdc26e7"

// TestGoldenV2Credentials resolves testdata/golden/v2-credentials.toml (the
// v2 golden document with two env variables and two credentials) and
// compares its preimage with one assembled by hand: the v2 golden preimage
// with the environment references, followed by the credentials.
func TestGoldenV2Credentials(t *testing.T) {
	cfg := resolveGolden(t, "v2-credentials.toml")
	rec, ok := cfg.FingerprintRecordV2()
	if !ok {
		t.Fatal("no v2 record")
	}
	pre := rec.Preimage()
	port443 := "\x01\xbb"
	handBuilt := "lazaret-configuration-fingerprint-v2\x00" +
		fr("dev") + fr("/nonexistent/lazaret-golden/data") + fr("/nonexistent/lazaret-golden/run/lazaret") +
		fr("docker.io/library/debian:bookworm") + "\x01" +
		list(fr("/home/agent")) +
		list(fr("GH")+fr("GH_TOKEN"), fr("API_KEY")+fr("API_KEY")) + list() +
		list() +
		list(pfx(10, 0, 0, 0, 8), pfx(172, 16, 0, 0, 12), pfx(192, 168, 0, 0, 16), pfx(198, 51, 100, 0, 24)) +
		list(tgt(198, 51, 100, 7, 443)) + list() + list() +
		"\x00" + list() +
		list(fr("*.example.org"), fr("api.example.com"), fr("registry.npmjs.org")) +
		list(fr("*.evil.example"), fr("telemetry.example.org")) +
		fr("\xc0\x00\x02\x35") +
		list(fr("api.example.com")+port443, fr("registry.npmjs.org")+port443) +
		// Credentials, sorted by encoding: GH's shorter env name first.
		list(
			fr("GH")+list(fr("api.example.com"), fr("registry.npmjs.org"))+"\x20\xfb"+fr("basic")+fr("")+fr(""),
			fr("API_KEY")+list(fr("api.example.com"))+port443+fr("header")+fr("x-api-key")+fr(""),
		)
	if string(pre) != handBuilt {
		t.Fatalf("preimage differs from the hand-built one:\n got %x\nwant %x", pre, handBuilt)
	}
	sum := sha256.Sum256([]byte(handBuilt))
	fp := cfg.Fingerprint()
	if got := hex.EncodeToString(fp[:]); got != hex.EncodeToString(sum[:]) || got != v2CredentialsFingerprint {
		t.Errorf("fingerprint %s, want %x and %s", got, sum, v2CredentialsFingerprint)
	}
	did := cfg.DomainID()
	checkGolden(t, "v2-credentials", map[string]string{
		"profile":              "dev",
		"workspace":            "/srv/project",
		"domain_id":            hex.EncodeToString(did[:]),
		"fingerprint_preimage": hex.EncodeToString(pre),
		"fingerprint":          hex.EncodeToString(fp[:]),
	}, []string{"profile", "workspace", "domain_id", "fingerprint_preimage", "fingerprint"})

	// The v2 golden document, which has no credentials, keeps its
	// fingerprint, and its preimage has no credentials section at all.
	plain := resolveGolden(t, "v2.toml")
	pfp := plain.Fingerprint()
	if hex.EncodeToString(pfp[:]) != v2GoldenFingerprint {
		t.Errorf("v2 golden fingerprint moved: %x", pfp)
	}
	prec, _ := plain.FingerprintRecordV2()
	prec.Credentials = []Credential{}
	if prec.Digest() != pfp {
		t.Error("an empty credentials list changes the preimage")
	}
}

// TestCredentialCAFingerprint: an upstream_ca enters the preimage as the
// SHA-256 of the file's content.
func TestCredentialCAFingerprint(t *testing.T) {
	f := newFixture(t)
	cfg, err := f.resolve(t, credDoc(okCred+"\nupstream_ca = \"@DIR@/ca/good.pem\""))
	if err != nil {
		t.Fatalf("resolve: %v%s", err, dumpProblems(problemsOf(t, err)))
	}
	ca, err := os.ReadFile(filepath.Join(f.dir, "ca", "good.pem"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(ca)
	tail := list(fr("API_KEY") + list(fr("api.example.com")) + "\x01\xbb" + fr("bearer") + fr("") + fr(string(sum[:])))
	rec, _ := cfg.FingerprintRecordV2()
	if pre := string(rec.Preimage()); !strings.HasSuffix(pre, tail) {
		t.Errorf("preimage does not end with the credentials:\n got %x\nwant suffix %x", pre, tail)
	}
}
