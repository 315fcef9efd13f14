package config

import (
	"bytes"
	"encoding/gob"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"lazaret.dev/pkg/layout"
)

func TestResolveSuccess(t *testing.T) {
	f := newFixture(t)
	doc := testDoc(`env = { TOKEN = "env:API_TOKEN" }
deny_egress = ["203.0.113.77/24", "203.0.113.0/24"]`,
		vol("@DIR@/src/dir", "/home/agent/src", "directory", `access = "read-only"`)+
			vol("@DIR@/src/file", "/home/agent/file", "file", "")+
			vol("{profile_dir}/cache/npm", "/home/agent/cache", "directory", "create = true")+
			escal(true, "executable = \"@DIR@/bin/toollink\"\nargs = [\"status\"]\nallow_extra_args = true"))
	cfg, err := f.resolve(t, doc)
	if err != nil {
		t.Fatalf("resolve: %v%s", err, dumpProblems(problemsOf(t, err)))
	}
	if cfg.Profile() != "dev" || cfg.Workspace() != f.ws {
		t.Fatalf("profile/workspace = %q/%q", cfg.Profile(), cfg.Workspace())
	}
	if want := filepath.Join(f.data, "lazaret"); cfg.StorageRoot() != want {
		t.Errorf("storage root %q, want %q", cfg.StorageRoot(), want)
	}
	if want := filepath.Join(f.run, "lazaret"); cfg.RuntimeRoot() != want {
		t.Errorf("runtime root %q, want %q", cfg.RuntimeRoot(), want)
	}
	if !cfg.IsolateGitignored() {
		t.Error("isolate_gitignored does not default to true")
	}
	if got := fmt.Sprint(cfg.EffectiveAllow()); got != "[192.0.2.0/24]" {
		t.Errorf("effective allow %s", got)
	}
	if got := fmt.Sprint(cfg.EffectiveDeny()); got != "[10.0.0.0/8 172.16.0.0/12 192.168.0.0/16 203.0.113.0/24]" {
		t.Errorf("effective deny %s", got)
	}
	if v, ok := cfg.EnvironmentValue("TOKEN"); !ok || v != f.env["API_TOKEN"] {
		t.Errorf("environment value not resolved")
	}
	vols := cfg.Volumes()
	if len(vols) != 3 {
		t.Fatalf("%d volumes", len(vols))
	}
	if vols[0].Record.Access != ReadOnly || vols[1].Record.Access != ReadWrite {
		t.Errorf("access = %v, %v", vols[0].Record.Access, vols[1].Record.Access)
	}
	pending := cfg.PendingCreates()
	wantLabel := filepath.Join(f.data, "lazaret", "profiles", "dev", "cache", "npm")
	if len(pending) != 1 || pending[0].CanonicalHostSource != wantLabel {
		t.Fatalf("pending = %+v, want %q", pending, wantLabel)
	}
	if _, err := os.Lstat(filepath.Join(f.data)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("resolution created the storage root: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(f.run, "lazaret")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("resolution created the runtime root: %v", err)
	}
	// The pending plan is anchored at the deepest existing ancestor.
	if p := vols[2].Plan; !p.Pending() || p.Suffix() != "data/lazaret/profiles/dev/cache/npm" {
		t.Errorf("pending plan suffix %q pending=%v", p.Suffix(), p.Pending())
	}
	if p := vols[0].Plan; p.Pending() || p.Suffix() != "dir" || p.AncestorIdentity().MountID == 0 {
		t.Errorf("plan = suffix %q pending %v id %+v", p.Suffix(), p.Pending(), p.AncestorIdentity())
	}
	file, err := vols[1].Plan.Reopen()
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	file.Close()
	rules := cfg.AutoApprovalRules()
	if len(rules) != 1 || rules[0].CanonicalExecutable != filepath.Join(f.dir, "bin", "tool") {
		t.Fatalf("rules = %+v", rules)
	}
	if cfg.DomainID() != DomainIDV1("dev", f.ws) {
		t.Error("domain ID mismatch")
	}
	rec := cfg.FingerprintRecord()
	if cfg.Fingerprint() != rec.Digest() {
		t.Error("fingerprint is not the digest of the record")
	}
	if err := cfg.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := vols[1].Plan.Reopen(); !errors.Is(err, ErrPlanClosed) {
		t.Errorf("reopen after Close: %v", err)
	}
	if err := cfg.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestReopenDetectsReplacement(t *testing.T) {
	f := newFixture(t)
	cfg, err := f.resolve(t, testDoc("", vol("@DIR@/src/file", "/home/agent/f", "file", "")))
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(f.dir, "src", "file")
	// Write the replacement while the original exists so it cannot reuse
	// the inode, then rename it over the source.
	if err := os.WriteFile(p+".new", []byte("other"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(p+".new", p); err != nil {
		t.Fatal(err)
	}
	if _, err := cfg.Volumes()[0].Plan.Reopen(); !errors.Is(err, ErrIdentity) {
		t.Fatalf("reopen of a replaced source: %v, want ErrIdentity", err)
	}
}

func TestFingerprintIgnoresPresentation(t *testing.T) {
	f := newFixture(t)
	a := testDoc("isolate_gitignored = true\n# comment\n", vol("@DIR@/src/dir", "/home/agent/a", "directory", `access = "read-write"`)+vol("@DIR@/src/file", "/home/agent/b", "file", ""))
	b := strings.Replace(testDoc("", vol("@DIR@/src/file", "/home/agent/b", "file", "")+vol("@DIR@/src/dir", "/home/agent/a", "directory", "")), `allow_egress = ["192.0.2.0/24"]`, `allow_egress = ["192.0.2.9/24", "192.0.2.0/24"]`, 1) +
		"\n[profiles.other]\nimage = \"docker.io/library/alpine:3\"\n"
	ca, err := f.resolve(t, a)
	if err != nil {
		t.Fatal(err)
	}
	cb, err := f.resolve(t, b)
	if err != nil {
		t.Fatal(err)
	}
	if ca.Fingerprint() != cb.Fingerprint() {
		t.Fatal("fingerprint depends on order, defaults, comments or other profiles")
	}
	cc, err := f.resolve(t, strings.Replace(a, "isolate_gitignored = true", "isolate_gitignored = false", 1))
	if err != nil {
		t.Fatal(err)
	}
	if cc.Fingerprint() == ca.Fingerprint() {
		t.Fatal("fingerprint ignores isolate_gitignored")
	}
}

func TestProblemPositionsAndCollection(t *testing.T) {
	f := newFixture(t)
	doc := `schema = "lazaret-trusted-host-config-v1"
[profiles.dev]
image = "docker.io/library/debian:bookworm"
persistent_dirs = ["/home/agent", "relative"]
allow_egress = ["192.0.2.0/24"]

[[profiles.dev.volumes]]
host = "@DIR@/src/dir"
container = "/home/agent/a"
kind = "directory"

[[profiles.dev.volumes]]
  host = "etc/passwd"
  container = "/home/agent/b"
  kind = "file"
` + readinessTail
	_, err := f.resolve(t, doc)
	ps := problemsOf(t, err)
	want := []string{
		"config.toml:4:35: profiles.dev.persistent_dirs[1]: must be an absolute sandbox path",
		"config.toml:13:3: profiles.dev.volumes[1].host: must be absolute or begin with ~/ or {profile_dir}/",
	}
	var got []string
	for _, p := range ps {
		got = append(got, p.String())
	}
	if !slices.Equal(got, want) {
		t.Fatalf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestInlineArrayPositions(t *testing.T) {
	f := newFixture(t)
	doc := testDoc(`volumes = [
  { host = "@DIR@/src/dir", container = "/home/agent/a", kind = "directory" },
  { host = "@DIR@/src/dir", container = "/home/agent/b", kind = "socket" },
]`, "")
	_, err := f.resolve(t, doc)
	ps := problemsOf(t, err)
	if len(ps) != 1 || ps[0].Field != "profiles.dev.volumes[1].kind" || ps[0].Line != 9 {
		t.Fatalf("got%s", dumpProblems(ps))
	}
}

func TestResolveRequiresLayoutAndWorkspace(t *testing.T) {
	f := newFixture(t)
	opts := f.options("dev")
	opts.Layout = &layout.SandboxLayoutV1{}
	if _, err := Resolve([]byte(testDoc("", "")), opts); !errors.Is(err, ErrLayout) {
		t.Errorf("zero layout: %v", err)
	}
	opts = f.options("dev")
	opts.Workspace = "relative"
	if _, err := Resolve([]byte(testDoc("", "")), opts); !errors.Is(err, ErrWorkspace) {
		t.Errorf("relative workspace: %v", err)
	}
}

func TestResolvedConfigurationIsNotSerializable(t *testing.T) {
	f := newFixture(t)
	cfg, err := f.resolve(t, testDoc(`env = { TOKEN = "env:API_TOKEN" }`, ""))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := json.Marshal(cfg); !errors.Is(err, ErrNotSerializable) {
		t.Errorf("json.Marshal: %v", err)
	}
	if _, err := cfg.MarshalText(); !errors.Is(err, ErrNotSerializable) {
		t.Errorf("MarshalText: %v", err)
	}
	if _, err := cfg.MarshalBinary(); !errors.Is(err, ErrNotSerializable) {
		t.Errorf("MarshalBinary: %v", err)
	}
	if err := gob.NewEncoder(&bytes.Buffer{}).Encode(cfg); !errors.Is(err, ErrNotSerializable) {
		t.Errorf("gob: %v", err)
	}
	secret := f.env["API_TOKEN"]
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x"} {
		if out := fmt.Sprintf(verb, cfg); strings.Contains(out, secret) || strings.Contains(out, fmt.Sprintf("%x", secret)) {
			t.Errorf("%s prints the environment value: %s", verb, out)
		}
	}
	if out := cfg.GoString() + cfg.String(); strings.Contains(out, secret) {
		t.Errorf("String/GoString print the environment value")
	}
}

func TestMatches(t *testing.T) {
	exact := AutoApprovalRule{CanonicalExecutable: "/usr/bin/git", Args: []string{"status"}}
	prefix := AutoApprovalRule{CanonicalExecutable: "/usr/bin/git", Args: []string{"log", "--oneline"}, AllowExtraArgs: true}
	none := AutoApprovalRule{CanonicalExecutable: "/usr/bin/true"}
	tests := []struct {
		name string
		rule AutoApprovalRule
		argv []string
		want bool
	}{
		{"exact", exact, []string{"/usr/bin/git", "status"}, true},
		{"exact extra", exact, []string{"/usr/bin/git", "status", "-s"}, false},
		{"exact missing", exact, []string{"/usr/bin/git"}, false},
		{"exact other executable", exact, []string{"git", "status"}, false},
		{"exact other path", exact, []string{"/bin/git", "status"}, false},
		{"empty argv", exact, nil, false},
		{"prefix alone", prefix, []string{"/usr/bin/git", "log", "--oneline"}, true},
		{"prefix extra", prefix, []string{"/usr/bin/git", "log", "--oneline", "-5"}, true},
		{"prefix short", prefix, []string{"/usr/bin/git", "log"}, false},
		{"prefix reordered", prefix, []string{"/usr/bin/git", "--oneline", "log"}, false},
		{"no args", none, []string{"/usr/bin/true"}, true},
		{"no args extra", none, []string{"/usr/bin/true", "x"}, false},
		{"nul argument", exact, []string{"/usr/bin/git", "status\x00"}, false},
		{"invalid utf-8", prefix, []string{"/usr/bin/git", "log", "--oneline", "\xff"}, false},
		{"prefix rule without args never matches", AutoApprovalRule{CanonicalExecutable: "/x", AllowExtraArgs: true}, []string{"/x"}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.rule.Matches(tc.argv); got != tc.want {
				t.Fatalf("Matches(%q) = %v, want %v", tc.argv, got, tc.want)
			}
		})
	}
}

func TestDecide(t *testing.T) {
	allow := []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("10.1.0.0/16")}
	deny := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("10.1.2.0/24")}
	for addr, want := range map[string]bool{"8.8.8.8": true, "10.9.9.9": false, "10.1.9.9": true, "10.1.2.3": false} {
		if d := decide(allow, deny, netip.MustParseAddr(addr)); d.Allowed != want {
			t.Errorf("decide(%s) = %+v, want allowed=%v", addr, d, want)
		}
	}
	if d := decide(nil, deny, netip.MustParseAddr("8.8.8.8")); d.Allowed || d.Prefix.IsValid() {
		t.Errorf("no match must deny: %+v", d)
	}
}

func TestMountPointSourceRefused(t *testing.T) {
	// /proc is a mount point on every Linux host that runs these tests.
	f := newFixture(t)
	_, err := f.resolve(t, testDoc("", vol("/proc", "/home/agent/p", "directory", "")))
	ps := problemsOf(t, err)
	if len(ps) != 1 || ps[0].Rule != RuleSource || !strings.Contains(ps[0].Message, "mount") {
		t.Fatalf("got%s", dumpProblems(ps))
	}
}

func TestReadFileRefusesUntrustedFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadFile(p, os.Getuid()); err != nil {
		t.Fatalf("private file refused: %v", err)
	}
	if err := os.Chmod(p, 0o666); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadFile(p, os.Getuid()); err == nil {
		t.Fatal("world-writable configuration accepted")
	}
	if _, err := ReadFile(filepath.Join(dir, "missing"), os.Getuid()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
}
