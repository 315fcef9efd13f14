package coordinator

import (
	"fmt"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"lazaret.dev/pkg/control"
	"lazaret.dev/pkg/netlab"
	"lazaret.dev/pkg/netpolicy"
	"lazaret.dev/pkg/netsidecar"
	"lazaret.dev/pkg/pinresolver"
)

// namesConfig is newEnv's configuration in schema v2: the same profile,
// plus every name in the test internet's dynamic zone allowed but one,
// the test internet's resolver as upstream, and a readiness host.
func namesConfig(e *env) string {
	return fmt.Sprintf(`schema = "lazaret-trusted-host-config-v2"
[storage]
data_root = %q
[profiles.%s]
image = %q
persistent_dirs = ["/home/agent"]
allow_egress = ["198.51.100.0/24", "198.51.100.70/32"]
deny_egress = ["198.51.100.64/26"]
allow_hosts = ["*.%s"]
deny_hosts = ["198-19-0-12.ttl60.%s"]
resolver = %q
[profiles.%s.env]
E2E_SECRET = "env:%s"
[profiles.%s.readiness]
denied = [{ address = "198.19.0.1", port = 443 }]
permitted = [{ address = "198.51.100.1", port = 443 }]
dns = [{ resolver = "198.51.100.53", query = "example.com" }]
hosts = [{ name = "198-19-0-10.ttl60.%s", port = 443 }]
`, e.storage, testProfile, testImage, netlab.DynamicSuffix, netlab.DynamicSuffix, netlab.InternetResolver,
		testProfile, secretHostVar, testProfile, netlab.DynamicSuffix)
}

// TestServeEndToEndNamesPinned starts a sandbox whose profile allows host
// names and attacks the pinning resolver from inside: an address a name
// resolves to is unreachable until the sandbox resolved it; a name outside
// the allowlist, a denied name, an answer with a private address
// (rebinding) and a direct query to another resolver get nothing; a pin
// ends with its TTL (raised to the floor); the refusals reach the name
// log, the names as the sandbox sent them.
func TestServeEndToEndNamesPinned(t *testing.T) {
	if !enterInternet(t) {
		return
	}
	e := newEnv(t)
	if err := os.WriteFile(e.cfgFile, []byte(namesConfig(e)), 0o600); err != nil {
		t.Fatal(err)
	}
	e.resolve(t)
	// Linger past the TTL subtest's wait, which holds no session.
	h := e.start(t, time.Minute)
	t.Logf("start report %q, start to ready %v", h.report, h.ready)
	c, session := e.client(t)
	dyn := func(label string) string { return label + "." + netlab.DynamicSuffix }
	reach := func(t *testing.T, dst string) (bool, string) {
		t.Helper()
		out, errs, x := execute(t, c, session(), "nc", "-w", "1", dst, "443")
		return code(x) == 0 && strings.HasPrefix(out, "hello from"), fmt.Sprintf("stdout %q stderr %q exit %+v", out, errs, x)
	}
	lookup := func(t *testing.T, name string, server ...string) string {
		t.Helper()
		out, _, _ := execute(t, c, session(), append([]string{"timeout", "5", "nslookup", name}, server...)...)
		return out
	}

	t.Run("resolv.conf names the pinning resolver only", func(t *testing.T) {
		out, _, _ := execute(t, c, session(), "cat", "/etc/resolv.conf")
		if !strings.Contains(out, "nameserver 10.255.255.1\n") || strings.Count(out, "nameserver") != 1 {
			t.Fatalf("resolv.conf: %q", out)
		}
	})
	t.Run("address unreachable until its name is resolved", func(t *testing.T) {
		if ok, detail := reach(t, "198.19.0.11"); ok {
			t.Fatalf("reached 198.19.0.11 before resolving a name for it: %s", detail)
		}
		if ok, detail := reach(t, dyn("198-19-0-11.ttl60")); !ok {
			t.Fatalf("allowed name unreachable: %s", detail)
		}
		if ok, detail := reach(t, "198.19.0.11"); !ok {
			t.Fatalf("pinned address unreachable: %s", detail)
		}
	})
	t.Run("readiness host pinned", func(t *testing.T) {
		if ok, detail := reach(t, "198.19.0.10"); !ok {
			t.Fatalf("the readiness host's address: %s", detail)
		}
	})
	t.Run("unlisted name refused", func(t *testing.T) {
		if out := lookup(t, "example.com"); strings.Contains(out, netlab.InternetAnswer.String()) {
			t.Fatalf("example.com resolved: %q", out)
		}
	})
	t.Run("deny_hosts wins", func(t *testing.T) {
		if ok, detail := reach(t, dyn("198-19-0-12.ttl60")); ok {
			t.Fatalf("denied name reachable: %s", detail)
		}
		if ok, detail := reach(t, "198.19.0.12"); ok {
			t.Fatalf("denied name's address reachable: %s", detail)
		}
	})
	t.Run("rebinding to a private address refused", func(t *testing.T) {
		private := netlab.InternetPrivate[0] // 10.1.2.3 answers on 443 in the test internet
		name := dyn(strings.ReplaceAll(private.String(), ".", "-") + ".ttl60")
		if out := lookup(t, name); strings.Contains(out, private.String()) {
			t.Fatalf("%s answered %v: %q", name, private, out)
		}
		if ok, detail := reach(t, private.String()); ok {
			t.Fatalf("private address reachable after a name answered it: %s", detail)
		}
	})
	t.Run("direct DNS to another resolver", func(t *testing.T) {
		other := netlab.InternetOtherResolver.String()
		if out := lookup(t, dyn("198-19-0-13.ttl60"), other); strings.Contains(out, "198.19.0.13") {
			t.Fatalf("another resolver answered: %q", out)
		}
		if ok, detail := reach(t, "198.19.0.13"); ok {
			t.Fatalf("an address learned elsewhere is reachable: %s", detail)
		}
	})
	t.Run("ttl expiry removes the address", func(t *testing.T) {
		if ok, detail := reach(t, dyn("198-19-0-13.ttl0")); !ok {
			t.Fatalf("zero-TTL name unreachable right after resolution: %s", detail)
		}
		time.Sleep(pinresolver.DefaultMinTTL + netsidecar.PinGrace + 2*time.Second)
		if ok, detail := reach(t, "198.19.0.13"); ok {
			t.Fatalf("reachable after its pin's floor ran out: %s", detail)
		}
	})
	t.Run("name log", func(t *testing.T) {
		evil := "x\x1b]0;owned\x07.example.org"
		execute(t, c, session(), "timeout", "5", "nslookup", evil)
		sum, err := netsidecar.ReadNameLog(control.NameLogPath(e.paths.Dir), time.Now(), 100)
		if err != nil {
			t.Fatal(err)
		}
		var refused []string
		for _, r := range sum.Refusals {
			refused = append(refused, r.Kind+" "+pinresolver.EscapeName(r.Name))
		}
		all := strings.Join(refused, "\n")
		for _, want := range []string{"refused example.com", "refused " + dyn("198-19-0-12.ttl60"), "rebinding " + dyn("10-1-2-3.ttl60"),
			"refused " + netpolicy.RefusalProbeName, `refused x\x1b\x5d0\x3bowned\x07.example.org`} {
			if !strings.Contains(all, want) {
				t.Errorf("name log lacks %q:\n%s", want, all)
			}
		}
		if strings.ContainsRune(all, 0x1b) {
			t.Errorf("an escaped refusal still holds an escape byte:\n%q", all)
		}
		pinned := map[netip.Addr]bool{}
		for _, p := range sum.Pins {
			pinned[p.Address] = true
		}
		if !pinned[netip.MustParseAddr("198.19.0.11")] || !pinned[netip.MustParseAddr("198.19.0.10")] {
			t.Errorf("pins %+v lack 198.19.0.10 and 198.19.0.11", sum.Pins)
		}
	})
}
