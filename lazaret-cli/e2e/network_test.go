//go:build e2e

package e2e

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"lazaret.dev/pkg/netlab"
)

// TestNetworkThroughCLI checks the enforced network as a user meets it:
// reachability from inside the sandbox, the policy status shows, and the
// same digest from net explain.
func TestNetworkThroughCLI(t *testing.T) {
	s := newSandbox(t)
	defer s.waitTeardown()
	defer s.stop()
	// The probes run side by side: each closed one waits out its timeout.
	probe := func(dst string) string {
		return "(if nc -w 3 " + dst + " 443 </dev/null | grep -q 'hello from'; then echo " + dst + "=open; else echo " + dst + "=closed; fi) &"
	}
	script := []string{
		probe(netlab.InternetPermitted.String()),
		probe(netlab.InternetDenied.String()),
		probe(netlab.HostLinkAddress.Addr().String()),
		"nslookup " + netlab.InternetName,
	}
	for _, a := range netlab.InternetPrivate {
		script = append(script, probe(a.String()))
	}
	script = append(script, "wait")
	out, errOut, code := s.cli(s.sessionArgs("exec", "60s", "sh", "-c", strings.Join(script, "\n"))...)
	if code != 0 {
		s.dumpLogs()
		t.Fatalf("exec: code %d\nstdout %s\nstderr %s", code, out, errOut)
	}
	want := []string{netlab.InternetPermitted.String() + "=open", netlab.InternetDenied.String() + "=closed",
		netlab.HostLinkAddress.Addr().String() + "=closed", netlab.InternetAnswer.String()}
	for _, a := range netlab.InternetPrivate {
		want = append(want, a.String()+"=closed")
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}

	var st struct {
		Domains []struct {
			Network *struct {
				PolicyDigest string   `json:"policy_digest"`
				IPv6         string   `json:"ipv6"`
				Allow        []string `json:"allow"`
				Deny         []string `json:"deny"`
				Resolvers    []string `json:"resolvers"`
			} `json:"network"`
		} `json:"domains"`
	}
	js, errOut, code := s.cli("status", "--json")
	if code != 0 {
		t.Fatalf("status: code %d: %s", code, errOut)
	}
	if err := json.Unmarshal([]byte(js), &st); err != nil {
		t.Fatalf("status --json printed %q: %v", js, err)
	}
	if len(st.Domains) != 1 || st.Domains[0].Network == nil {
		t.Fatalf("status shows no network policy for the running Domain:\n%s", js)
	}
	n := st.Domains[0].Network
	if n.IPv6 != "disabled" || strings.Join(n.Allow, " ") != "198.51.100.0/24" ||
		strings.Join(n.Deny, " ") != "10.0.0.0/8 172.16.0.0/12 192.168.0.0/16" ||
		strings.Join(n.Resolvers, " ") != netlab.InternetResolver.String() {
		t.Errorf("status network %+v", n)
	}
	text, _, _ := s.cli("status")
	if !strings.Contains(text, "network:     policy "+n.PolicyDigest) {
		t.Errorf("status text does not show the policy digest %s:\n%s", n.PolicyDigest, text)
	}
	explain, errOut, code := s.cli("net", "explain", "--profile", "dev", "--config", s.config, "--workspace", s.workspace, netlab.InternetDenied.String()+":443")
	if code != 1 { // 1: denied
		t.Fatalf("net explain: code %d, want 1 (denied): %s %s", code, explain, errOut)
	}
	if !strings.Contains(explain, "denied") || !strings.Contains(explain, "policy digest "+n.PolicyDigest) {
		t.Errorf("net explain %s:443 printed %q; want denied under digest %s", netlab.InternetDenied, explain, n.PolicyDigest)
	}
}

// TestReadinessFailureStopsStart: a readiness target the enforcement path
// does not treat as configured fails the start with an error naming it,
// and nothing runs afterwards: a permitted target nobody answers, and a
// DNS target whose resolver (allowed, listed) never answers.
func TestReadinessFailureStopsStart(t *testing.T) {
	tests := []struct {
		name, line, with, names string
	}{
		{"permitted target silent",
			`permitted = [{ address = "198.51.100.1", port = 443 }]`,
			`permitted = [{ address = "198.51.100.1", port = 443 }, { address = "198.51.100.37", port = 443 }]`,
			"198.51.100.37:443"},
		{"dns target silent",
			`dns = [{ resolver = "198.51.100.53", query = "example.com" }]`,
			`dns = [{ resolver = "198.51.100.53", query = "example.com" }, { resolver = "198.51.100.98", query = "example.com" }]`,
			`"example.com" via 198.51.100.98`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newSandbox(t)
			defer s.waitTeardown()
			b, err := os.ReadFile(s.config)
			if err != nil {
				t.Fatal(err)
			}
			cfg := strings.Replace(string(b), tc.line, tc.with, 1)
			if cfg == string(b) {
				t.Fatalf("the test configuration has no line %s to extend", tc.line)
			}
			if err := os.WriteFile(s.config, []byte(cfg), 0o600); err != nil {
				t.Fatal(err)
			}
			began := time.Now()
			out, errOut, code := s.exec("echo", "must-not-run")
			if code == 0 || strings.Contains(out, "must-not-run") {
				t.Fatalf("exec succeeded without network readiness: code %d stdout %q", code, out)
			}
			if !strings.Contains(errOut, tc.names) {
				t.Fatalf("the error does not name %s:\n%s", tc.names, errOut)
			}
			t.Logf("exec failed as it must after %v: %s", time.Since(began), strings.TrimSpace(errOut))
		})
	}
}
