package cli

import (
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"lazaret.dev/pkg/netpolicy"
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
	tests := []struct {
		name string
		args []string
		want *regexp.Regexp
	}{
		{"host name", []string{"--profile", "dev", "example.com"}, regexp.MustCompile(`address "example.com": not an IP address with an optional port .*resolve a name first`)},
		{"port out of range", []string{"--profile", "dev", "192.0.2.1:99999"}, regexp.MustCompile(`port "99999" is not a number from 1 to 65535`)},
		{"port zero", []string{"--profile", "dev", "192.0.2.1:0"}, regexp.MustCompile(`port 0 is not a destination port`)},
		{"no address", []string{"--profile", "dev"}, regexp.MustCompile(`want exactly one ADDRESS\[:PORT\], got 0`)},
		{"two addresses", []string{"--profile", "dev", "192.0.2.1", "192.0.2.2"}, regexp.MustCompile(`got 2 arguments`)},
		{"no profile", []string{"192.0.2.1"}, regexp.MustCompile(`--profile NAME is required`)},
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
