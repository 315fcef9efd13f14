package sidecar_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"lazaret.dev/pkg/netlab"
	"lazaret.dev/pkg/netpath"
	"lazaret.dev/pkg/netpolicy"
	"lazaret.dev/pkg/netsidecar"
	"lazaret.dev/pkg/pinresolver"
)

// namesPolicy is the lab policy with names: every name under the test
// resolvers' dynamic zone is allowed except one, and 192.0.2.53 is the
// upstream.
func namesPolicy(t *testing.T) *netpolicy.DerivedNetworkPolicy {
	t.Helper()
	base := netlab.Policy(t)
	var allow, deny []netip.Prefix
	for _, r := range base.PrefixRules {
		if r.Action == netpolicy.Allow {
			allow = append(allow, r.Network)
		} else {
			deny = append(deny, r.Network)
		}
	}
	pol, err := netpolicy.DeriveV2(allow, deny, []netip.Addr{a("192.0.2.53")},
		[]string{"*." + netlab.DynamicSuffix}, []string{"198-19-7-11.ttl60." + netlab.DynamicSuffix}, a("192.0.2.53"))
	if err != nil {
		t.Fatal(err)
	}
	return pol
}

func dyn(label string) string { return label + "." + netlab.DynamicSuffix }

// TestSidecarPinsNames runs the sidecar with a policy with names in real
// namespaces: readiness proves the host target and the refusal; then,
// from the sandbox, an address is unreachable until its name is resolved
// through the pinning resolver, a name outside the allowlist and a
// denied name are refused, an answer with a private address (rebinding)
// pins nothing, a zero TTL pin ends after the floor, and the name log
// records the refusals.
func TestSidecarPinsNames(t *testing.T) {
	if !netlab.Enter(t) {
		return
	}
	internet := inet(t)
	named := []netip.Addr{a("198.19.7.10"), a("198.19.7.11"), a("198.19.7.12"), a("198.19.7.13"), a("198.19.7.14")}
	netlab.AddHosts(t, internet, named...)
	for _, h := range named {
		netlab.ServeTCP(t, internet, netip.AddrPortFrom(h, 80))
	}
	start, enc := newStart(t, namesPolicy(t), "up0", []netip.Addr{a("198.18.0.1")})
	start.Targets.Hosts = []netpolicy.HostTarget{{Name: dyn("198-19-7-10.ttl60"), Port: 80}}
	logPath := filepath.Join(t.TempDir(), "names.log")
	// In a user namespace of its own, as when the coordinator runs
	// unprivileged: binding port 53 needs its root there, not the host's.
	r := launchWithNames(t, true, enc, start, logPath)
	inst, sbx := installed(t, r)
	enf, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", r.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	netlab.Link(t, enf, "up0", p("198.18.0.1/30"), internet, "wan0", p("198.18.0.2/30"))
	netlab.Route(t, enf, netip.Prefix{}, a("198.18.0.2"))
	enf.Close()
	helper := selfIdentity(t, os.Getpid())
	if err := r.ch.Send(&netsidecar.HelperStarted{ConnectivityHelper: helper}); err != nil {
		t.Fatal(err)
	}
	ev := ready(t, r, inst, helper)
	names := ev.Probe.Names
	if names == nil || len(names.Hosts) != 1 || names.Hosts[0].Reached != a("198.19.7.10") || !names.Refusal.Refused {
		t.Fatalf("name proofs %+v", names)
	}

	gw := netpath.DefaultLink.Addr().Next()
	cfg := netpath.ProbeConfig{DNSTimeout: time.Second, DNSAttempts: 2}
	resolve := func(name string) []netip.Addr {
		t.Helper()
		got, err := netpath.Resolve(context.Background(), sbx, gw, name, cfg)
		if err != nil {
			t.Fatalf("resolving %s: %v", name, err)
		}
		return got
	}
	dial := func(addr string, timeout time.Duration) netpath.Outcome {
		return netlab.Dial(t, sbx, netip.MustParseAddrPort(addr), timeout)
	}

	t.Run("pinned only after resolution", func(t *testing.T) {
		if got := dial("198.19.7.12:80", 500*time.Millisecond); got != netpath.TimedOut {
			t.Fatalf("before resolution: %v", got)
		}
		if got := resolve(dyn("198-19-7-12.ttl60")); len(got) != 1 || got[0] != a("198.19.7.12") {
			t.Fatalf("resolved %v", got)
		}
		if got := dial("198.19.7.12:80", time.Second); got != netpath.Connected {
			t.Fatalf("after resolution: %v", got)
		}
	})
	t.Run("cname chain", func(t *testing.T) {
		if got := resolve(dyn("cname.198-19-7-13.ttl60")); len(got) != 1 || got[0] != a("198.19.7.13") {
			t.Fatalf("resolved %v", got)
		}
		if got := dial("198.19.7.13:80", time.Second); got != netpath.Connected {
			t.Fatalf("after resolution: %v", got)
		}
	})
	t.Run("dns over tcp", func(t *testing.T) {
		// The input chain admits TCP to port 53 of the enforcement end too;
		// a stub resolver falls back to it after a truncated answer.
		var c net.Conn
		if err := netpath.InNetNS(sbx, func() error {
			var err error
			c, err = net.DialTimeout("tcp4", netip.AddrPortFrom(gw, 53).String(), time.Second)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		id, q, err := netpath.EncodeQuery(dyn("198-19-7-13.ttl60"))
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(3 * time.Second))
		if _, err := c.Write(append([]byte{byte(len(q) >> 8), byte(len(q))}, q...)); err != nil {
			t.Fatal(err)
		}
		var l [2]byte
		if _, err := io.ReadFull(c, l[:]); err != nil {
			t.Fatal(err)
		}
		msg := make([]byte, int(l[0])<<8|int(l[1]))
		if _, err := io.ReadFull(c, msg); err != nil {
			t.Fatal(err)
		}
		got, match, err := netpath.DecodeAnswer(msg, id, dyn("198-19-7-13.ttl60"))
		if err != nil || !match || len(got) != 1 || got[0] != a("198.19.7.13") {
			t.Fatalf("over TCP: %v %v %v", got, match, err)
		}
	})
	t.Run("other ports of the enforcement end stay closed", func(t *testing.T) {
		if got := dial(netip.AddrPortFrom(gw, 54).String(), 500*time.Millisecond); got != netpath.TimedOut {
			t.Fatalf("10.255.255.1:54: %v", got)
		}
	})
	t.Run("unlisted name refused", func(t *testing.T) {
		if got := resolve("svc.lab.test"); len(got) != 0 {
			t.Fatalf("unlisted name resolved to %v", got)
		}
	})
	t.Run("deny_hosts wins", func(t *testing.T) {
		if got := resolve(dyn("198-19-7-11.ttl60")); len(got) != 0 {
			t.Fatalf("denied name resolved to %v", got)
		}
		if got := dial("198.19.7.11:80", 500*time.Millisecond); got != netpath.TimedOut {
			t.Fatalf("denied name's address: %v", got)
		}
	})
	t.Run("rebinding refused", func(t *testing.T) {
		if got := resolve(dyn("10-9-9-9.ttl60")); len(got) != 0 {
			t.Fatalf("private answer passed: %v", got)
		}
		if got := dial("10.9.9.9:80", 500*time.Millisecond); got != netpath.TimedOut {
			t.Fatalf("private address: %v", got)
		}
	})
	t.Run("ttl expiry", func(t *testing.T) {
		// TTL 0 is pinned for the floor, then the kernel drops it.
		if got := resolve(dyn("198-19-7-14.ttl0")); len(got) != 1 {
			t.Fatalf("resolved %v", got)
		}
		if got := dial("198.19.7.14:80", time.Second); got != netpath.Connected {
			t.Fatalf("while pinned: %v", got)
		}
		time.Sleep(pinresolver.DefaultMinTTL + netsidecar.PinGrace + 1500*time.Millisecond)
		if got := dial("198.19.7.14:80", 500*time.Millisecond); got != netpath.TimedOut {
			t.Fatalf("after the pin's floor: %v", got)
		}
	})
	// The refusals are in the name log, the names as the sandbox sent them.
	sum, err := netsidecar.ReadNameLog(logPath, time.Now(), 100)
	if err != nil {
		t.Fatal(err)
	}
	var refused []string
	for _, rec := range sum.Refusals {
		refused = append(refused, rec.Kind+" "+rec.Name)
	}
	for _, want := range []string{"refused svc.lab.test", "refused " + dyn("198-19-7-11.ttl60"), "rebinding " + dyn("10-9-9-9.ttl60"),
		"refused " + netpolicy.RefusalProbeName} {
		if !strings.Contains(strings.Join(refused, "\n"), want) {
			t.Errorf("name log lacks %q; refusals:\n%s", want, strings.Join(refused, "\n"))
		}
	}
	pinned := map[netip.Addr]bool{}
	for _, p := range sum.Pins {
		pinned[p.Address] = true
	}
	for _, want := range []string{"198.19.7.10", "198.19.7.12", "198.19.7.13"} {
		if !pinned[a(want)] {
			t.Errorf("name log shows no pin of %s: %+v", want, sum.Pins)
		}
	}
}
