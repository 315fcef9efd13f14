package cli

import (
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"lazaret.dev/pkg/control"
	"lazaret.dev/pkg/ids"
	"lazaret.dev/pkg/netpath"
	"lazaret.dev/pkg/netpolicy"
	"lazaret.dev/pkg/netsidecar"
)

const explainConfig = `schema = "lazaret-trusted-host-config-v1"

[network]
default_allow = ["0.0.0.0/0"]
default_deny = ["203.0.113.128/25"]

[profiles.dev]
image = "localhost/agent:1"
allow_egress = ["203.0.113.0/24", "10.1.2.3/32"]
deny_egress = []

[profiles.dev.readiness]
denied = [{ address = "203.0.113.200", port = 443 }]
permitted = [{ address = "203.0.113.10", port = 443 }]
dns = [{ resolver = "192.0.2.53", query = "example.com" }]
`

func explainHost(t *testing.T) *host {
	t.Helper()
	h := newHost(t)
	if err := os.MkdirAll(filepath.Dir(h.file), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(h.file, []byte(explainConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	return h
}

func TestNetExplain(t *testing.T) {
	h := explainHost(t)
	mp := netip.MustParsePrefix
	pol, err := netpolicy.Derive(
		[]netip.Prefix{mp("0.0.0.0/0"), mp("203.0.113.0/24"), mp("10.1.2.3/32")},
		append([]netip.Prefix{mp("203.0.113.128/25")}, netpolicy.RFC1918...),
		[]netip.Addr{netip.MustParseAddr("192.0.2.53")})
	if err != nil {
		t.Fatal(err)
	}
	digest, err := pol.Digest()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		code int
		line string
	}{
		{"longest prefix allow", []string{"203.0.113.10"}, 0, "203.0.113.10:443/tcp: allowed by allow prefix 203.0.113.0/24 (longest match)"},
		{"deny inside allow", []string{"203.0.113.200:443"}, 1, "203.0.113.200:443/tcp: denied by deny prefix 203.0.113.128/25 (longest match)"},
		{"internet", []string{"8.8.8.8:80"}, 0, "8.8.8.8:80/tcp: allowed by allow prefix 0.0.0.0/0 (longest match)"},
		{"RFC 1918 deny", []string{"10.1.1.1:22"}, 1, "10.1.1.1:22/tcp: denied by deny prefix 10.0.0.0/8 (longest match)"},
		{"RFC 1918 192.168", []string{"192.168.1.1"}, 1, "192.168.1.1:443/tcp: denied by deny prefix 192.168.0.0/16 (longest match)"},
		{"allow inside RFC 1918", []string{"10.1.2.3:22"}, 0, "10.1.2.3:22/tcp: allowed by allow prefix 10.1.2.3/32 (longest match)"},
		{"cloud metadata", []string{"169.254.169.254:80"}, 1, "169.254.169.254:80/tcp: denied: 169.254.0.0/16 (link-local and cloud metadata) is always dropped"},
		{"loopback", []string{"127.0.0.1"}, 1, "127.0.0.1:443/tcp: denied: 127.0.0.0/8 (loopback) is always dropped"},
		{"connectivity helper gateway", []string{"10.0.2.2:80"}, 1, "10.0.2.2:80/tcp: denied: 10.0.2.2 is an address of this host and is always dropped"},
		{"DNS to resolver", []string{"--udp", "192.0.2.53:53"}, 0, "192.0.2.53:53/udp: allowed: DNS to configured resolver 192.0.2.53"},
		{"DNS to resolver over TCP", []string{"192.0.2.53:53"}, 0, "192.0.2.53:53/tcp: allowed: DNS to configured resolver 192.0.2.53"},
		{"DNS elsewhere, trailing flag", []string{"8.8.8.8:53", "--udp"}, 1, "8.8.8.8:53/udp: denied: DNS (port 53) goes only to the configured resolvers"},
		{"IPv6", []string{"[2001:db8::1]:443"}, 1, "[2001:db8::1]:443/tcp: denied: IPv6 is disabled"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"net", "explain", "--profile", "dev", "--workspace", h.ws}, tt.args...)
			stdout, stderr, err := runApp(t, args...)
			if got := exitCode(err); got != tt.code {
				t.Fatalf("exit %d, want %d (%v)\nstdout %s\nstderr %s", got, tt.code, err, stdout, stderr)
			}
			lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
			if len(lines) != 2 || lines[0] != tt.line {
				t.Fatalf("stdout:\n%s\nwant first line %q", stdout, tt.line)
			}
			if want := `profile "dev", policy digest ` + digest.String(); lines[1] != want {
				t.Errorf("second line %q, want %q", lines[1], want)
			}
		})
	}
}

func TestNetExplainErrors(t *testing.T) {
	h := explainHost(t)
	two := twoProfiles(t, h)
	tests := []struct {
		name string
		args []string
		want *regexp.Regexp
	}{
		{"neither address nor host name", []string{"--profile", "dev", "not_a_host"}, regexp.MustCompile(`address "not_a_host": not an IP address with an optional port`)},
		{"port out of range", []string{"--profile", "dev", "192.0.2.1:99999"}, regexp.MustCompile(`port "99999" is not a number from 1 to 65535`)},
		{"port zero", []string{"--profile", "dev", "192.0.2.1:0"}, regexp.MustCompile(`port 0 is not a destination port`)},
		{"no address", []string{"--profile", "dev"}, regexp.MustCompile(`want exactly one ADDRESS\[:PORT\], got 0`)},
		{"two addresses", []string{"--profile", "dev", "192.0.2.1", "192.0.2.2"}, regexp.MustCompile(`got 2 arguments`)},
		{"several profiles", []string{"--config", two, "192.0.2.1"}, regexp.MustCompile(`^lazaret-cli: --profile is required: the configuration \S+/two.toml defines claude, dev\n$`)},
		{"unknown trailing flag", []string{"--profile", "dev", "192.0.2.1", "--tcp"}, regexp.MustCompile(`flag --tcp: no such flag`)},
		{"unknown profile", []string{"--profile", "nope", "192.0.2.1"}, regexp.MustCompile(`nope`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"net", "explain", "--workspace", h.ws}, tt.args...)
			stdout, stderr, err := runApp(t, args...)
			if exitCode(err) != netExitError {
				t.Fatalf("exit %d, want %d (%v)\nstderr %s", exitCode(err), netExitError, err, stderr)
			}
			if stdout != "" || !tt.want.MatchString(stderr) {
				t.Fatalf("stdout %q, stderr %q; want stderr matching %v", stdout, stderr, tt.want)
			}
		})
	}
}

func TestParseExplainTarget(t *testing.T) {
	tests := []struct {
		in   string
		addr string
		port uint16
		ok   bool
	}{
		{"192.0.2.1", "192.0.2.1", 443, true},
		{"192.0.2.1:53", "192.0.2.1", 53, true},
		{"[2001:db8::1]:80", "2001:db8::1", 80, true},
		{"2001:db8::1", "2001:db8::1", 443, true},
		{"192.0.2.1:", "", 0, false},
		{"192.0.2.256", "", 0, false},
		{"", "", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			a, p, err := ParseExplainTarget(tt.in)
			if (err == nil) != tt.ok {
				t.Fatalf("err = %v, want ok=%v", err, tt.ok)
			}
			if tt.ok && (a.String() != tt.addr || p != tt.port) {
				t.Fatalf("got %v %d, want %s %d", a, p, tt.addr, tt.port)
			}
		})
	}
}

func FuzzParseExplainTarget(f *testing.F) {
	for _, s := range []string{"192.0.2.1", "192.0.2.1:53", "[::1]:80", "a:b:c", "1.2.3.4:0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, p, err := ParseExplainTarget(s)
		if err == nil && (!a.IsValid() || p == 0) {
			t.Fatalf("%q: accepted %v port %d", s, a, p)
		}
	})
}

const namesConfig = `schema = "lazaret-trusted-host-config-v2"

[profiles.dev]
image = "localhost/agent:1"
allow_hosts = ["api.example.com", "*.example.net"]
deny_hosts = ["tracker.example.net"]
resolver = "198.51.100.53"

[profiles.dev.env]
KEY = "env:LZ_NET_TEST_KEY"

[[profiles.dev.credentials]]
env = "KEY"
hosts = ["brokered.example.net"]
scheme = "bearer"

[profiles.dev.readiness]
denied = [{ address = "203.0.113.200", port = 443 }]
hosts = [{ name = "api.example.com", port = 443 }]
`

// TestNetNames: net explain decides host names and reports an address a
// name has pinned in the running Domain; net log lists the refusals,
// every name escaped.
func TestNetNames(t *testing.T) {
	h := newHost(t)
	t.Setenv("LZ_NET_TEST_KEY", "tk-0123456789abcdefghij")
	if err := os.MkdirAll(filepath.Dir(h.file), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(h.file, []byte(namesConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	out, _, err := runApp(t, "config", "check", "--profile", "dev", "--workspace", h.ws, "--json")
	if err != nil {
		t.Fatalf("config check: %v\n%s", err, out)
	}
	var rep struct {
		RuntimeRoot string `json:"runtime_root"`
		DomainID    string `json:"domain_id"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	var id ids.DomainID
	if err := ids.ParseHex(id[:], rep.DomainID, "domain ID"); err != nil {
		t.Fatal(err)
	}
	dir := control.DomainPaths(rep.RuntimeRoot, id).Dir
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	f, err := control.OpenNameLog(dir)
	if err != nil {
		t.Fatal(err)
	}
	log := netsidecar.NewNameLog(f, 0, nil)
	now := time.Now()
	for _, r := range []netsidecar.NameLogRecord{
		{Time: now, Kind: "pinned", Name: "cdn.example.net", Rule: "*.example.net", Addresses: []netip.Addr{netip.MustParseAddr("198.19.0.9")}, TTLMillis: 60000},
		{Time: now, Kind: "refused", Name: "x\x1b[2J\n.evil.test", Reason: "name not allowed"},
		{Time: now, Kind: "rebinding", Name: "rebind.example.net", Addresses: []netip.Addr{netip.MustParseAddr("10.0.0.1")}, Reason: "denied by deny prefix 10.0.0.0/8"},
		{Time: now, Kind: netsidecar.BrokerRefused, Name: "brokered.example.net", Port: 443, Method: "GE\x1bT", Credentials: []string{"KEY"}, Status: 403, Reason: "placeholder of KEY in header Cookie"},
		{Time: now, Kind: netsidecar.BrokerBrokered, Name: "brokered.example.net", Port: 443, Method: "POST", Credentials: []string{"KEY"}, Status: 200},
	} {
		if err := log.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	f.Close()

	run := func(args ...string) (string, int) {
		t.Helper()
		stdout, stderr, err := runApp(t, append(append([]string{"net"}, args...), "--profile", "dev", "--workspace", h.ws)...)
		if strings.ContainsRune(stdout+stderr, 0x1b) {
			t.Fatalf("output carries an escape byte: %q", stdout+stderr)
		}
		return stdout + stderr, exitCode(err)
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"explain", "api.example.com"}, 0, "api.example.com: allowed by host pattern api.example.com"},
		{[]string{"explain", "API.Example.com"}, 0, "allowed by host pattern api.example.com"},
		{[]string{"explain", "cdn.example.net"}, 0, "pinned now: 198.19.0.9 for"},
		{[]string{"explain", "tracker.example.net"}, 1, "refused by deny_hosts pattern tracker.example.net"},
		{[]string{"explain", "example.org"}, 1, "refused: no allow_hosts pattern matches"},
		{[]string{"explain", "198.19.0.9"}, 0, "but allowed now: the running sandbox has it pinned"},
		{[]string{"explain", "198.19.0.8"}, 1, "denied: no prefix matches"},
		{[]string{"explain", "10.255.255.1:53", "--udp"}, 0, "allowed: DNS to the pinning resolver"},
		{[]string{"explain", "10.255.255.1:22"}, 1, "denied by deny prefix 10.0.0.0/8"},
		{[]string{"log"}, 0, `refused x\x1b\x5b2\x4a\x0a.evil.test`},
		{[]string{"log"}, 0, "rebinding rebind.example.net -> 10.0.0.1: denied by deny prefix 10.0.0.0/8"},
		{[]string{"log", "--all"}, 0, "pinned cdn.example.net -> 198.19.0.9 for 1m0s"},
		{[]string{"explain", "brokered.example.net"}, 0, "brokered: the pinning resolver answers it with the credential broker's address (10.255.255.1), which takes TCP port 443"},
		{[]string{"log"}, 0, `broker-refused brokered.example.net:443 GE\x1bT credentials KEY status 403: placeholder of KEY in header Cookie`},
		{[]string{"log", "--all"}, 0, "broker-brokered brokered.example.net:443 POST credentials KEY status 200"},
	} {
		out, code := run(tc.args...)
		if code != tc.code || !strings.Contains(out, tc.want) {
			t.Errorf("net %s: exit %d, output:\n%s\nwant exit %d and %q", strings.Join(tc.args, " "), code, out, tc.code, tc.want)
		}
	}
}

func TestPinningResolverAddress(t *testing.T) {
	if want := netpath.DefaultLink.Addr().Next(); pinningResolver != want {
		t.Fatalf("net explain's pinning resolver %v, the enforcement end is %v", pinningResolver, want)
	}
}
