package netpath_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"os"
	"strings"
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
	return buildLabWith(t, netlab.Policy(t))
}

// buildLabWith builds the lab's enforcement path for pol, with the lab's
// hosts and pinnedHosts (hosts only a pin reaches) behind it.
func buildLabWith(t testing.TB, pol *netpolicy.DerivedNetworkPolicy, pinnedHosts ...netip.Addr) *netpath.Path {
	t.Helper()
	plan, err := nftplan.New(pol, nftplan.Config{
		SandboxInterface: netpath.DefaultSandboxInterface, UpstreamInterface: "up0",
		HostAddresses: []netip.Addr{a("198.18.0.1")}, PinningResolver: netpath.DefaultLink.Addr().Next(),
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
	hosts := append(append([]netip.Addr(nil), labHosts...), pinnedHosts...)
	netlab.AddHosts(t, inet, hosts...)
	for _, h := range hosts {
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
	obs, err := path.Probe(context.Background(), labTargets, netpath.DefaultProbeConfig)
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
	// Every denied target was refused by its own probe rule, whichever
	// step of the policy denied it (deny prefix, structural range).
	for i, dst := range labTargets.Denied {
		ev := obs.Evidence[dst]
		want := netip.AddrPortFrom(netpath.DefaultLink.Addr().Next().Next(), uint16(netpath.DeniedProbePortBase+i))
		if ev.Probe.Source != want || ev.Refusals != 1 || ev.Outcome != netpath.Refused || !ev.Unreachable() {
			t.Errorf("denied %v: evidence %+v, want one SYN from %v refused by its rule", dst, ev, want)
		}
	}
	// The probe rules are gone and the ruleset is the plan again.
	checkNoProbeRules(t, path)

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

// checkNoProbeRules fails unless the installed ruleset is exactly the
// plan, with no probe rule left in the deny chain.
func checkNoProbeRules(t *testing.T, path *netpath.Path) {
	t.Helper()
	if err := netpath.VerifyRuleset(path.Enforcement, path.Plan); err != nil {
		t.Fatalf("ruleset after probing: %v", err)
	}
	left, err := netpath.RemoveProbeRules(path.Enforcement, path.Plan)
	if err != nil || len(left) != 0 {
		t.Fatalf("probe rules left after probing: %v, %v", left, err)
	}
}

// TestProbeNamesFailingTarget: every way a target can contradict the
// policy fails the proof naming that target, and the probe rules are gone
// afterwards in every case. Probe does not apply Decider.CheckTargets (the
// sidecar does, before installing), so a denied target the policy allows
// stands here for an enforcement path that lets a denied SYN through.
func TestProbeNamesFailingTarget(t *testing.T) {
	if !netlab.Enter(t) {
		return
	}
	path := buildLab(t)
	dns := []netpolicy.DNSTarget{{Resolver: a("192.0.2.53"), Query: "svc.lab.test"}}
	permitted := []netpolicy.Destination{{Address: a("198.51.100.10"), Port: 80}}
	denied := []netpolicy.Destination{{Address: a("10.9.9.9"), Port: 80}}
	dst := func(s string) []netpolicy.Destination {
		d := ap(s)
		return []netpolicy.Destination{{Address: d.Addr(), Port: d.Port()}}
	}
	tests := []struct {
		name    string
		targets netpolicy.Targets
		kind    netpolicy.TargetKind
		target  string
		err     error
		detail  string
	}{
		// The SYN is accepted and a host completes the handshake.
		{"denied target answers", netpolicy.Targets{Denied: dst("198.51.100.10:80"), Permitted: permitted, DNS: dns},
			netpolicy.TargetDenied, "198.51.100.10:80", netpath.ErrReachable, "handshake completed"},
		// The SYN is accepted and the host resets it: the socket sees the
		// same ECONNREFUSED as a probe rule's reset, the counter does not.
		{"denied target resets", netpolicy.Targets{Denied: dst("198.51.100.10:81"), Permitted: permitted, DNS: dns},
			netpolicy.TargetDenied, "198.51.100.10:81", netpath.ErrReachable, "counted no SYN"},
		// The SYN is accepted and lost beyond the path: silence is not a
		// refusal.
		{"denied target silent", netpolicy.Targets{Denied: dst("198.51.100.37:80"), Permitted: permitted, DNS: dns},
			netpolicy.TargetDenied, "198.51.100.37:80", netpath.ErrNotRefused, "timed out"},
		{"denied target on loopback", netpolicy.Targets{Denied: dst("127.0.0.1:80"), Permitted: permitted, DNS: dns},
			netpolicy.TargetDenied, "127.0.0.1:80", netpath.ErrNotProbeable, "loopback"},
		{"denied target is the sandbox", netpolicy.Targets{Denied: dst("10.255.255.2:80"), Permitted: permitted, DNS: dns},
			netpolicy.TargetDenied, "10.255.255.2:80", netpath.ErrNotProbeable, "link"},
		// Allowed by a /32, but it is the sandbox's own address: the
		// namespace would reset the SYN itself.
		{"permitted target is the sandbox", netpolicy.Targets{Denied: denied, Permitted: dst("10.255.255.2:80"), DNS: dns},
			netpolicy.TargetPermitted, "10.255.255.2:80", netpath.ErrNotProbeable, "link"},
		{"permitted target denied by the path", netpolicy.Targets{Denied: denied, Permitted: dst("203.0.113.200:80"), DNS: dns},
			netpolicy.TargetPermitted, "203.0.113.200:80", netpath.ErrUnreachable, "timed out"},
		{"permitted target silent", netpolicy.Targets{Denied: denied, Permitted: dst("198.51.100.37:80"), DNS: dns},
			netpolicy.TargetPermitted, "198.51.100.37:80", netpath.ErrUnreachable, "timed out"},
		// The path drops DNS to an unlisted resolver: no answer comes.
		{"dns silent", netpolicy.Targets{Denied: denied, Permitted: permitted,
			DNS: []netpolicy.DNSTarget{{Resolver: a("192.0.2.99"), Query: "svc.lab.test"}}},
			netpolicy.TargetDNS, `"svc.lab.test" via 192.0.2.99`, netpath.ErrNotResolved, "no A record"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			began := time.Now()
			obs, err := path.Probe(context.Background(), tc.targets, netpath.DefaultProbeConfig)
			if err == nil {
				err = obs.Check()
			}
			t.Logf("failed after %v: %v", time.Since(began), err)
			var te *netpolicy.TargetError
			if !errors.As(err, &te) || te.Kind != tc.kind || te.Target != tc.target || !errors.Is(err, tc.err) ||
				!strings.Contains(te.Detail, tc.detail) {
				t.Fatalf("proof = %v; want a %s-target error naming %s: %v (%s)", err, tc.kind, tc.target, tc.err, tc.detail)
			}
			checkNoProbeRules(t, path)
		})
	}
}

// TestProbeRulesVisibleUntilRemoved: a probe rule left in the deny chain
// is a ruleset mismatch, and RemoveProbeRules takes exactly the probe
// rules out, with their counters.
func TestProbeRulesVisibleUntilRemoved(t *testing.T) {
	if !netlab.Enter(t) {
		return
	}
	path := buildLab(t)
	probe := nftplan.DeniedProbe{Source: ap("10.255.255.2:20000"), Destination: ap("10.9.9.9:80")}
	rules, err := path.Plan.ProbeRules([]nftplan.DeniedProbe{probe})
	if err != nil {
		t.Fatal(err)
	}
	if err := netpath.InstallProbeRules(path.Enforcement, path.Plan, rules); err != nil {
		t.Fatal(err)
	}
	var re *netpath.RulesetError
	if err := netpath.VerifyRuleset(path.Enforcement, path.Plan); !errors.As(err, &re) || !strings.Contains(re.What, nftplan.ChainDeny) {
		t.Fatalf("VerifyRuleset with a probe rule installed = %v, want a mismatch in chain %s", err, nftplan.ChainDeny)
	}
	// A SYN of another four-tuple is not the probe's: it is dropped, not
	// reset, and the rule does not count it.
	if got := netlab.Dial(t, path.Sandbox, ap("10.9.9.9:80"), 300*time.Millisecond); got != netpath.TimedOut {
		t.Fatalf("unprobed connect to a denied host: %v, want timed out", got)
	}
	counted, err := netpath.RemoveProbeRules(path.Enforcement, path.Plan)
	if err != nil || len(counted) != 1 || counted[probe] != 0 {
		t.Fatalf("RemoveProbeRules = %v, %v; want the one probe with nothing counted", counted, err)
	}
	checkNoProbeRules(t, path)
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
// targets refused by their probe rules, three permitted, one DNS query,
// the probe rules inserted, read back, deleted and the ruleset verified)
// against the lab internet. Namespaces are reached only through
// descriptors, so as root it runs without re-executing.
func BenchmarkReadinessProof(b *testing.B) {
	if !netlab.Inside() {
		testgate.Root(b)
	}
	b.ReportAllocs()
	path := buildLab(b)
	for b.Loop() {
		obs, err := path.Probe(context.Background(), labTargets, netpath.DefaultProbeConfig)
		if err != nil {
			b.Fatal(err)
		}
		if err := obs.Check(); err != nil {
			b.Fatal(err)
		}
	}
}
