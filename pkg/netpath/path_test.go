package netpath_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"os"
	"testing"
	"time"

	"lazaret.dev/pkg/netlab"
	"lazaret.dev/pkg/netpath"
	"lazaret.dev/pkg/netpolicy"
	"lazaret.dev/pkg/nftplan"
	"lazaret.dev/pkg/testgate"
)

var (
	a = netip.MustParseAddr
	p = netip.MustParsePrefix
)

func ap(s string) netip.AddrPort { return netip.MustParseAddrPort(s) }

func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

var labTargets = netpolicy.Targets{
	Denied: []netpolicy.Destination{
		{Address: a("10.9.9.9"), Port: 80}, {Address: a("169.254.169.254"), Port: 80},
		{Address: a("172.16.0.1"), Port: 80}, {Address: a("192.168.1.1"), Port: 80},
		{Address: a("203.0.113.200"), Port: 80},
	},
	Permitted: []netpolicy.Destination{
		{Address: a("10.1.2.3"), Port: 80}, {Address: a("198.51.100.10"), Port: 80}, {Address: a("203.0.113.10"), Port: 80},
	},
	DNS: []netpolicy.DNSTarget{{Resolver: a("192.0.2.53"), Query: "svc.lab.test"}},
}

var labHosts = []netip.Addr{
	a("10.1.2.3"), a("10.9.9.9"), a("169.254.169.254"), a("172.16.0.1"), a("192.168.1.1"),
	a("192.0.2.53"), a("192.0.2.99"), a("198.51.100.10"), a("203.0.113.10"), a("203.0.113.200"),
}

func buildLab(t testing.TB) *netpath.Path {
	t.Helper()
	plan, err := nftplan.New(netlab.Policy(t), nftplan.Config{
		SandboxInterface: netpath.DefaultSandboxInterface, UpstreamInterface: "up0",
		HostAddresses: []netip.Addr{a("198.18.0.1")},
	})
	if err != nil {
		t.Fatal(err)
	}
	enf := netlab.NewNS(t)
	path, err := netpath.Build(discard(), enf, plan, netpath.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { path.Close() })

	inet := netlab.NewNS(t)
	netlab.AddHosts(t, inet, labHosts...)
	for _, h := range labHosts {
		netlab.ServeTCP(t, inet, netip.AddrPortFrom(h, 80))
	}
	for _, h := range []netip.Addr{a("192.0.2.99"), a("198.51.100.10")} {
		netlab.ServeTCP(t, inet, netip.AddrPortFrom(h, 53))
	}
	records := map[string][]netip.Addr{"svc.lab.test": {a("198.51.100.10")}}
	netlab.ServeDNS(t, inet, a("192.0.2.53"), records)
	netlab.ServeDNS(t, inet, a("192.0.2.99"), records)

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := path.WaitUpstream(ctx); !errors.Is(err, netpath.ErrUpstreamNotReady) {
		t.Fatalf("WaitUpstream before the upstream exists = %v, want ErrUpstreamNotReady", err)
	}
	netlab.Link(t, enf, "up0", p("198.18.0.1/30"), inet, "wan0", p("198.18.0.2/30"))
	netlab.Route(t, enf, netip.Prefix{}, a("198.18.0.2"))
	ctx2, cancel2 := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel2()
	if err := path.WaitUpstream(ctx2); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestPathEnforcesPolicy(t *testing.T) {
	if !netlab.Enter(t) {
		return
	}
	path := buildLab(t)

	routes, err := path.Routes()
	if err != nil {
		t.Fatal(err)
	}
	if len(routes) != 2 || routes[0] != p("0.0.0.0/0") || routes[1] != netpath.DefaultLink {
		t.Fatalf("sandbox routes %v, want [0.0.0.0/0 %v]", routes, netpath.DefaultLink)
	}
	for name, f := range map[string]*os.File{"enforcement": path.Enforcement, "sandbox": path.Sandbox} {
		v, err := netpath.ReadSysctl(f, "net/ipv6/conf/all/disable_ipv6")
		if err != nil || v != "1" {
			t.Fatalf("%s namespace disable_ipv6 = %q, %v; want 1", name, v, err)
		}
	}

	start := time.Now()
	obs, err := netpath.Probe(context.Background(), path.Sandbox, labTargets, netpath.DefaultProbeConfig)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("readiness probes took %v", time.Since(start))
	if err := obs.Check(); err != nil {
		t.Fatal(err)
	}
	if got := obs.DNS[0].ResolvedAddresses; len(got) != 1 || got[0] != a("198.51.100.10") {
		t.Fatalf("svc.lab.test resolved to %v", got)
	}

	tests := []struct {
		name string
		dst  string
		want netpath.Outcome
	}{
		{"permitted", "198.51.100.10:80", netpath.Connected},
		{"allow inside deny", "10.1.2.3:80", netpath.Connected},
		{"deny inside allow", "203.0.113.200:80", netpath.TimedOut},
		{"rfc1918 10", "10.9.9.9:80", netpath.TimedOut},
		{"rfc1918 172", "172.16.0.1:80", netpath.TimedOut},
		{"rfc1918 192", "192.168.1.1:80", netpath.TimedOut},
		{"metadata", "169.254.169.254:80", netpath.TimedOut},
		{"host address", "198.18.0.1:80", netpath.TimedOut},
		{"upstream peer", "198.18.0.2:80", netpath.TimedOut},
		{"gateway", "10.255.255.1:80", netpath.TimedOut},
		{"dns tcp to other resolver", "192.0.2.99:53", netpath.TimedOut},
		{"dns tcp to allowed host", "198.51.100.10:53", netpath.TimedOut},
		{"loopback of the sandbox itself", "127.0.0.1:80", netpath.Refused},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := netlab.Dial(t, path.Sandbox, ap(tc.dst), time.Second); got != tc.want {
				t.Fatalf("connect %s: %v, want %v", tc.dst, got, tc.want)
			}
		})
	}
	t.Run("dns to unlisted resolver", func(t *testing.T) {
		got, err := netpath.Resolve(context.Background(), path.Sandbox, a("192.0.2.99"), "svc.lab.test",
			netpath.ProbeConfig{DNSTimeout: 500 * time.Millisecond, DNSAttempts: 1})
		if err != nil || len(got) != 0 {
			t.Fatalf("resolving through 192.0.2.99: %v, %v; want nothing", got, err)
		}
	})
	t.Run("ipv6", func(t *testing.T) {
		if err := netlab.DialErr(path.Sandbox, "tcp6", "[2001:db8::1]:80", time.Second); err == nil {
			t.Fatal("IPv6 connect succeeded")
		}
	})
}

func TestProbeNamesFailingTarget(t *testing.T) {
	if !netlab.Enter(t) {
		return
	}
	path := buildLab(t)
	targets := netpolicy.Targets{
		Denied:    []netpolicy.Destination{{Address: a("198.51.100.10"), Port: 80}},
		Permitted: []netpolicy.Destination{{Address: a("203.0.113.10"), Port: 80}},
		DNS:       []netpolicy.DNSTarget{{Resolver: a("192.0.2.53"), Query: "svc.lab.test"}},
	}
	obs, err := netpath.Probe(context.Background(), path.Sandbox, targets, netpath.DefaultProbeConfig)
	if err != nil {
		t.Fatal(err)
	}
	err = obs.Check()
	var te *netpolicy.TargetError
	if !errors.As(err, &te) || te.Target != "198.51.100.10:80" || !errors.Is(err, netpath.ErrReachable) {
		t.Fatalf("Check = %v, want a denied-target error naming 198.51.100.10:80", err)
	}
	targets.Denied = nil
	targets.Permitted = []netpolicy.Destination{{Address: a("203.0.113.200"), Port: 80}}
	obs, err = netpath.Probe(context.Background(), path.Sandbox, targets, netpath.ProbeConfig{ConnectTimeout: 500 * time.Millisecond, DNSTimeout: time.Second, DNSAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := obs.Check(); !errors.Is(err, netpath.ErrUnreachable) || !errors.As(err, &te) || te.Target != "203.0.113.200:80" {
		t.Fatalf("Check = %v, want a permitted-target error naming 203.0.113.200:80", err)
	}
}

func TestEnforcementGoneFailsClosed(t *testing.T) {
	if !netlab.Enter(t) {
		return
	}
	path := buildLab(t)
	if got := netlab.Dial(t, path.Sandbox, ap("198.51.100.10:80"), time.Second); got != netpath.Connected {
		t.Fatalf("before: %v", got)
	}
	// The enforcement namespace has no process in it; its last descriptor
	// goes and so does the namespace, its veth end and its upstream.
	path.Enforcement.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := netlab.Dial(t, path.Sandbox, ap("198.51.100.10:80"), 300*time.Millisecond)
		if !got.Reachable() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the sandbox still reaches the internet after the enforcement namespace ended")
		}
	}
}

func TestInstallIsAtomic(t *testing.T) {
	if !netlab.Enter(t) {
		return
	}
	ns := netlab.NewNS(t)
	plan, err := nftplan.New(netlab.Policy(t), nftplan.Config{SandboxInterface: "lz-sbx0", UpstreamInterface: "up0"})
	if err != nil {
		t.Fatal(err)
	}
	// Overlapping intervals in the last set make the kernel refuse the
	// batch after it accepted the tables, chains and earlier sets.
	bad := *plan
	bad.Ops = append([]nftplan.Op(nil), plan.Ops...)
	for i, op := range bad.Ops {
		if s, ok := op.(nftplan.AddSet); ok && s.Name == nftplan.SetAllowed {
			s.Ranges = append([]nftplan.Range{{First: a("1.0.0.0"), Last: a("1.0.0.255")}, {First: a("1.0.0.128"), Last: a("1.0.1.0")}}, s.Ranges...)
			bad.Ops[i] = s
		}
	}
	if err := netpath.Install(ns, &bad); err == nil {
		t.Fatal("kernel accepted overlapping intervals")
	}
	if err := netpath.VerifyRuleset(ns, &nftplan.Plan{}); err != nil {
		t.Fatalf("a refused batch left state behind: %v", err)
	}
	if err := netpath.Install(ns, plan); err != nil {
		t.Fatal(err)
	}
	if err := netpath.VerifyRuleset(ns, plan); err != nil {
		t.Fatal(err)
	}
	if err := netpath.Install(ns, plan); err == nil {
		t.Fatal("second install into the same namespace succeeded")
	}
	if err := netpath.VerifyRuleset(ns, plan); err != nil {
		t.Fatalf("a refused second install changed the ruleset: %v", err)
	}
	other, _ := nftplan.New(netlab.Policy(t), nftplan.Config{SandboxInterface: "lz-sbx0", UpstreamInterface: "tap0"})
	if err := netpath.VerifyRuleset(ns, other); !errors.Is(err, netpath.ErrRulesetMismatch) {
		t.Fatalf("VerifyRuleset against another plan = %v, want ErrRulesetMismatch", err)
	}
}

func TestRandomPoliciesInKernel(t *testing.T) {
	if !netlab.Enter(t) {
		return
	}
	rng := rand.New(rand.NewPCG(7, 8))
	for i := range 5 {
		var allow []netip.Prefix
		seen := map[netip.Prefix]bool{}
		for len(allow) < 200 {
			pr := netip.PrefixFrom(netip.AddrFrom4([4]byte{byte(rng.IntN(223) + 1), byte(rng.Uint32()), byte(rng.Uint32()), 0}), 8+rng.IntN(25)).Masked()
			if seen[pr] || pr.Overlaps(p("10.0.0.0/8")) || pr.Overlaps(p("172.16.0.0/12")) || pr.Overlaps(p("192.168.0.0/16")) {
				continue
			}
			seen[pr] = true
			allow = append(allow, pr)
		}
		pol, err := netpolicy.Derive(allow, netpolicy.RFC1918, []netip.Addr{a("192.0.2.53")})
		if err != nil {
			t.Fatal(err)
		}
		plan, err := nftplan.New(pol, nftplan.Config{SandboxInterface: "lz-sbx0", UpstreamInterface: "tap0"})
		if err != nil {
			t.Fatal(err)
		}
		ns := netlab.NewNS(t)
		if err := netpath.Install(ns, plan); err != nil {
			t.Fatalf("policy %d: %v", i, err)
		}
		if err := netpath.VerifyRuleset(ns, plan); err != nil {
			t.Fatalf("policy %d: %v", i, err)
		}
	}
}

func BenchmarkInstall1000(b *testing.B) {
	if !netlab.Inside() {
		testgate.Root(b)
	}
	b.ReportAllocs()
	rng := rand.New(rand.NewPCG(9, 10))
	var allow, deny []netip.Prefix
	seen := map[netip.Prefix]bool{}
	for len(allow)+len(deny) < 1000 {
		pr := netip.PrefixFrom(netip.AddrFrom4([4]byte{byte(rng.IntN(223) + 1), byte(rng.Uint32()), byte(rng.Uint32()), byte(rng.Uint32())}), 8+rng.IntN(25)).Masked()
		if seen[pr] || pr.Overlaps(p("10.0.0.0/8")) || pr.Overlaps(p("172.16.0.0/12")) || pr.Overlaps(p("192.168.0.0/16")) {
			continue
		}
		seen[pr] = true
		if rng.IntN(2) == 0 {
			allow = append(allow, pr)
		} else {
			deny = append(deny, pr)
		}
	}
	pol, err := netpolicy.Derive(allow, append(deny, netpolicy.RFC1918...), []netip.Addr{a("192.0.2.53")})
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		b.StopTimer()
		ns, err := netpath.NewNetNS()
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		plan, err := nftplan.New(pol, nftplan.Config{SandboxInterface: "lz-sbx0", UpstreamInterface: "tap0"})
		if err != nil {
			b.Fatal(err)
		}
		if err := netpath.Install(ns, plan); err != nil {
			b.Fatal(err)
		}
		if err := netpath.VerifyRuleset(ns, plan); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		ns.Close()
		b.StartTimer()
	}
}

// BenchmarkReadinessProof measures one full readiness proof (five denied
// targets waiting out a 500 ms connect timeout, three permitted, one DNS
// query) against the lab internet. Namespaces are reached only through
// descriptors, so as root it runs without re-executing.
func BenchmarkReadinessProof(b *testing.B) {
	if !netlab.Inside() {
		testgate.Root(b)
	}
	b.ReportAllocs()
	path := buildLab(b)
	cfg := netpath.ProbeConfig{ConnectTimeout: 500 * time.Millisecond, DNSTimeout: time.Second, DNSAttempts: 1}
	for b.Loop() {
		obs, err := netpath.Probe(context.Background(), path.Sandbox, labTargets, cfg)
		if err != nil {
			b.Fatal(err)
		}
		if err := obs.Check(); err != nil {
			b.Fatal(err)
		}
	}
}
