package nftplan

import (
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"lazaret.dev/pkg/netpolicy"
)

var update = flag.Bool("update", false, "rewrite golden files")

func mustPrefixes(t testing.TB, ss ...string) []netip.Prefix {
	t.Helper()
	out := make([]netip.Prefix, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParsePrefix(s)
	}
	return out
}

func withRFC1918(ps ...netip.Prefix) []netip.Prefix {
	return append(append([]netip.Prefix(nil), netpolicy.RFC1918...), ps...)
}

// examplePolicy is the decision-procedure example of docs/NETWORK.md.
func examplePolicy(t testing.TB) *netpolicy.DerivedNetworkPolicy {
	t.Helper()
	p, err := netpolicy.Derive(
		mustPrefixes(t, "0.0.0.0/0", "10.1.2.3/32", "203.0.113.0/24"),
		withRFC1918(mustPrefixes(t, "203.0.113.128/25")...),
		[]netip.Addr{netip.MustParseAddr("10.0.0.53")})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

var testConfig = Config{
	SandboxInterface:  "lz-sbx0",
	UpstreamInterface: "tap0",
	HostAddresses:     []netip.Addr{netip.MustParseAddr("198.18.0.1"), netip.MustParseAddr("2001:db8::1")},
}

func TestFlattenExample(t *testing.T) {
	got, err := Flatten(examplePolicy(t).PrefixRules, allowedLimit)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"0.0.0.0-9.255.255.255",
		"10.1.2.3",
		"11.0.0.0-172.15.255.255",
		"172.32.0.0-192.167.255.255",
		"192.169.0.0-203.0.113.127",
		"203.0.114.0-223.255.255.255",
	}
	var gotS []string
	for _, r := range got {
		gotS = append(gotS, r.String())
	}
	if strings.Join(gotS, " ") != strings.Join(want, " ") {
		t.Fatalf("Flatten:\n got %v\nwant %v", gotS, want)
	}
}

func TestFlattenRejects(t *testing.T) {
	tests := []struct {
		name  string
		rules []netpolicy.PrefixRule
		limit netip.Addr
		want  error
	}{
		{"host bits", []netpolicy.PrefixRule{{Network: netip.MustParsePrefix("10.0.0.1/8")}}, allowedLimit, ErrBadPrefix},
		{"ipv6 network in v4 rule", []netpolicy.PrefixRule{{Network: netip.MustParsePrefix("2001:db8::/32")}}, allowedLimit, ErrBadPrefix},
		{"duplicate", []netpolicy.PrefixRule{
			{Network: netip.MustParsePrefix("10.0.0.0/8")},
			{Network: netip.MustParsePrefix("10.0.0.0/8"), Action: netpolicy.Deny}}, allowedLimit, ErrDuplicatePrefix},
		{"ipv6 limit", nil, netip.MustParseAddr("::1"), ErrNotIPv4},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Flatten(tc.rules, tc.limit); !errors.Is(err, tc.want) {
				t.Fatalf("Flatten error = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestNewRejects(t *testing.T) {
	p := examplePolicy(t)
	v6 := examplePolicy(t)
	v6.AddressFamilies[1].Disposition = netpolicy.Enabled
	tests := []struct {
		name   string
		policy *netpolicy.DerivedNetworkPolicy
		cfg    Config
		want   error
		substr string
	}{
		{"invalid policy", v6, testConfig, nil, "planning nftables ruleset"},
		{"empty sandbox interface", p, Config{UpstreamInterface: "tap0"}, ErrInterfaceName, "sandbox interface"},
		{"long upstream", p, Config{SandboxInterface: "a", UpstreamInterface: "abcdefghijklmnop"}, ErrInterfaceName, "upstream interface"},
		{"slash", p, Config{SandboxInterface: "a/b", UpstreamInterface: "tap0"}, ErrInterfaceName, "sandbox interface"},
		{"same", p, Config{SandboxInterface: "tap0", UpstreamInterface: "tap0"}, ErrSameInterface, "tap0"},
		{"invalid host", p, Config{SandboxInterface: "a", UpstreamInterface: "b", HostAddresses: []netip.Addr{{}}}, ErrNotIPv4, "host_addresses[0]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.policy, tc.cfg)
			if err == nil {
				t.Fatal("New succeeded")
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("New error = %v, want %v", err, tc.want)
			}
			if !strings.Contains(err.Error(), tc.substr) {
				t.Fatalf("New error %q does not name %q", err, tc.substr)
			}
		})
	}
}

func TestCheckRejects(t *testing.T) {
	tests := []struct {
		name string
		op   Op
		want error
	}{
		{"foreign table", AddTable{Family: nftables.TableFamilyIPv4, Name: "filter"}, ErrForeignTable},
		{"inet family", AddTable{Family: nftables.TableFamilyINet, Name: TableName}, ErrForeignTable},
		{"ipv6 set", AddSet{Family: nftables.TableFamilyIPv6, Table: TableName, Name: "x"}, ErrNotIPv4},
		{"range in plain set", AddSet{Family: nftables.TableFamilyIPv4, Table: TableName, Name: "x",
			Ranges: []Range{{netip.MustParseAddr("1.0.0.0"), netip.MustParseAddr("1.0.0.1")}}}, ErrBadPrefix},
		{"reversed range", AddSet{Family: nftables.TableFamilyIPv4, Table: TableName, Name: "x", Interval: true,
			Ranges: []Range{{netip.MustParseAddr("1.0.0.1"), netip.MustParseAddr("1.0.0.0")}}}, ErrBadPrefix},
		{"unplanned expression", AddRule{Family: nftables.TableFamilyIPv4, Table: TableName, Chain: ChainForward,
			Exprs: []expr.Any{&expr.Immediate{Register: 1}}}, ErrUnknownOp},
		{"counter in a planned rule", AddRule{Family: nftables.TableFamilyIPv4, Table: TableName, Chain: ChainDeny,
			Exprs: []expr.Any{&expr.Counter{}, drop()}}, ErrUnknownOp},
		{"reject in a planned rule", AddRule{Family: nftables.TableFamilyIPv4, Table: TableName, Chain: ChainDeny,
			Exprs: []expr.Any{&expr.Reject{Type: unix.NFT_REJECT_TCP_RST}}}, ErrUnknownOp},
		{"goto another chain", AddRule{Family: nftables.TableFamilyIPv4, Table: TableName, Chain: ChainForward,
			Exprs: []expr.Any{&expr.Verdict{Kind: expr.VerdictGoto, Chain: ChainInput}}}, ErrUnknownOp},
		{"jump", AddRule{Family: nftables.TableFamilyIPv4, Table: TableName, Chain: ChainForward,
			Exprs: []expr.Any{&expr.Verdict{Kind: expr.VerdictJump, Chain: ChainDeny}}}, ErrUnknownOp},
		{"return", AddRule{Family: nftables.TableFamilyIPv4, Table: TableName, Chain: ChainDeny,
			Exprs: []expr.Any{&expr.Verdict{Kind: expr.VerdictReturn}}}, ErrUnknownOp},
		{"regular chain with a hook", AddChain{Family: nftables.TableFamilyIPv4, Table: TableName, Name: ChainDeny, Regular: true,
			Type: nftables.ChainTypeFilter, Hook: *nftables.ChainHookForward}, ErrUnknownOp},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := Check(tc.op); !errors.Is(err, tc.want) {
				t.Fatalf("Check error = %v, want %v", err, tc.want)
			}
		})
	}
}

// capture queues p and returns every message of the batch as one line:
// header type, flags, then the payload in hex. Sequence numbers and the
// netlink header are left out.
func capture(t testing.TB, p *Plan) []string {
	t.Helper()
	var lines []string
	c, err := nftables.New(nftables.WithTestDial(func(req []netlink.Message) ([]netlink.Message, error) {
		for _, m := range req {
			lines = append(lines, fmt.Sprintf("%04x %04x %s", uint16(m.Header.Type), uint16(m.Header.Flags), hex.EncodeToString(m.Data)))
		}
		return req, nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Queue(c); err != nil {
		t.Fatal(err)
	}
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	return lines
}

func TestGoldenNetlink(t *testing.T) {
	p, err := New(examplePolicy(t), testConfig)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(capture(t, p), "\n") + "\n"
	path := filepath.Join("testdata", "example_ruleset.golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Fatalf("netlink batch differs from %s (run with -update after checking):\n%s", path, got)
	}
	// The batch is one transaction: begin, the operations, end.
	lines := strings.Split(strings.TrimSpace(got), "\n")
	begin := fmt.Sprintf("%04x", unix.NFNL_MSG_BATCH_BEGIN)
	end := fmt.Sprintf("%04x", unix.NFNL_MSG_BATCH_END)
	if !strings.HasPrefix(lines[0], begin) || !strings.HasPrefix(lines[len(lines)-1], end) {
		t.Fatalf("batch not framed by begin/end: first %q last %q", lines[0], lines[len(lines)-1])
	}
}

func TestGoldenIsDeterministic(t *testing.T) {
	a, _ := New(examplePolicy(t), testConfig)
	b, _ := New(examplePolicy(t), testConfig)
	if x, y := capture(t, a), capture(t, b); strings.Join(x, "\n") != strings.Join(y, "\n") {
		t.Fatal("two plans of the same policy produce different batches")
	}
}

func TestExampleDecisions(t *testing.T) {
	p, err := New(examplePolicy(t), testConfig)
	if err != nil {
		t.Fatal(err)
	}
	sim := newSimulator(t, p)
	tcp, udp := uint8(unix.IPPROTO_TCP), uint8(unix.IPPROTO_UDP)
	tests := []struct {
		name string
		pkt  packet
		want expr.VerdictKind
	}{
		{"internet", packet{daddr: netip.MustParseAddr("8.8.8.8"), proto: tcp, dport: 443}, expr.VerdictAccept},
		{"rfc1918", packet{daddr: netip.MustParseAddr("10.1.1.1"), proto: tcp, dport: 443}, expr.VerdictDrop},
		{"allow inside deny", packet{daddr: netip.MustParseAddr("10.1.2.3"), proto: tcp, dport: 22}, expr.VerdictAccept},
		{"deny inside allow", packet{daddr: netip.MustParseAddr("203.0.113.200"), proto: tcp, dport: 443}, expr.VerdictDrop},
		{"dns to resolver", packet{daddr: netip.MustParseAddr("10.0.0.53"), proto: udp, dport: 53}, expr.VerdictAccept},
		{"dns elsewhere", packet{daddr: netip.MustParseAddr("8.8.8.8"), proto: udp, dport: 53}, expr.VerdictDrop},
		{"metadata", packet{daddr: netip.MustParseAddr("169.254.169.254"), proto: tcp, dport: 80}, expr.VerdictDrop},
		{"host address", packet{daddr: netip.MustParseAddr("198.18.0.1"), proto: tcp, dport: 80}, expr.VerdictDrop},
		{"broadcast", packet{daddr: netip.MustParseAddr("255.255.255.255"), proto: udp, dport: 67}, expr.VerdictDrop},
		{"from upstream", packet{iif: "tap0", oif: "lz-sbx0", daddr: netip.MustParseAddr("8.8.8.8"), proto: tcp, dport: 443}, expr.VerdictDrop},
		{"to other interface", packet{oif: "eth0", daddr: netip.MustParseAddr("8.8.8.8"), proto: tcp, dport: 443}, expr.VerdictDrop},
		{"return traffic", packet{iif: "tap0", oif: "lz-sbx0", daddr: netip.MustParseAddr("10.255.255.2"), proto: tcp, dport: 40000, ctState: expr.CtStateBitESTABLISHED}, expr.VerdictAccept},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pkt := tc.pkt
			if pkt.iif == "" {
				pkt.iif = "lz-sbx0"
			}
			if pkt.oif == "" {
				pkt.oif = "tap0"
			}
			if pkt.ctState == 0 {
				pkt.ctState = expr.CtStateBitNEW
			}
			if got := sim.verdict(nftables.TableFamilyIPv4, ChainForward, pkt); got != tc.want {
				t.Fatalf("verdict = %v, want %v", got, tc.want)
			}
		})
	}
	if got := sim.verdict(nftables.TableFamilyIPv4, ChainInput, packet{iif: "lz-sbx0", ctState: expr.CtStateBitESTABLISHED}); got != expr.VerdictDrop {
		t.Fatalf("input from sandbox = %v, want drop", got)
	}
	// Every deny of sandbox traffic goes through the deny chain; traffic
	// from elsewhere is dropped where it is met.
	for _, r := range append(p.Rules(nftables.TableFamilyIPv4, ChainForward), p.Rules(nftables.TableFamilyIPv4, ChainInput)...) {
		v := r.Exprs[len(r.Exprs)-1].(*expr.Verdict)
		if v.Kind == expr.VerdictDrop && r.Comment != "only from the sandbox" {
			t.Errorf("rule %q drops in place instead of going to the deny chain", r.Comment)
		}
	}
	if deny := p.Rules(nftables.TableFamilyIPv4, ChainDeny); len(deny) != 1 || len(deny[0].Exprs) != 1 {
		t.Errorf("deny chain %+v, want one rule: drop", deny)
	}
	for _, ch := range []string{ChainInput, ChainForward, ChainOutput} {
		if got := sim.verdict(nftables.TableFamilyIPv6, ch, packet{ctState: expr.CtStateBitESTABLISHED}); got != expr.VerdictDrop {
			t.Fatalf("ip6 %s = %v, want drop", ch, got)
		}
	}
}

// randomPolicy derives a valid policy with n random prefixes, many of them
// nested, and a few resolvers.
func randomPolicy(t testing.TB, rng *rand.Rand, n int) (*netpolicy.DerivedNetworkPolicy, []netip.Addr) {
	t.Helper()
	seen := map[netip.Prefix]bool{}
	for _, p := range netpolicy.RFC1918 {
		seen[p] = true
	}
	var allow []netip.Prefix
	deny := append([]netip.Prefix(nil), netpolicy.RFC1918...)
	var pool []netip.Prefix
	for len(allow)+len(deny) < n+len(netpolicy.RFC1918) {
		var a netip.Addr
		if len(pool) > 0 && rng.IntN(2) == 0 {
			// Nest inside an earlier prefix so that longest match matters.
			base := pool[rng.IntN(len(pool))]
			v := u32(base.Addr()) | rng.Uint32()>>uint(base.Bits())
			if base.Bits() == 0 {
				v = rng.Uint32()
			}
			a = addr(v)
		} else {
			a = addr(rng.Uint32())
		}
		bits := rng.IntN(33)
		if rng.IntN(8) == 0 {
			bits = rng.IntN(4)
		}
		p := netip.PrefixFrom(a, bits).Masked()
		if seen[p] {
			continue
		}
		seen[p] = true
		pool = append(pool, p)
		if rng.IntN(2) == 0 {
			allow = append(allow, p)
		} else {
			deny = append(deny, p)
		}
	}
	var resolvers []netip.Addr
	for len(resolvers) < 1+rng.IntN(3) {
		a := addr(rng.Uint32())
		structural := false
		for _, s := range netpolicy.Structural {
			structural = structural || s.Prefix.Contains(a)
		}
		if !structural {
			resolvers = append(resolvers, a)
		}
	}
	p, err := netpolicy.Derive(allow, deny, resolvers)
	if err != nil {
		t.Fatalf("deriving random policy: %v", err)
	}
	var hosts []netip.Addr
	for range rng.IntN(3) {
		hosts = append(hosts, addr(rng.Uint32()))
	}
	return p, hosts
}

// probeAddrs picks destinations that stress the boundaries: each prefix's
// first and last address and their neighbours, resolvers, hosts, and
// random addresses.
func probeAddrs(rng *rand.Rand, p *netpolicy.DerivedNetworkPolicy, hosts []netip.Addr) []netip.Addr {
	var out []netip.Addr
	for _, r := range p.PrefixRules {
		s := prefixSpan(r.Network)
		for _, v := range []uint64{s.lo - 1, s.lo, s.lo + 1, s.hi - 2, s.hi - 1, s.hi} {
			if v < 1<<32 {
				out = append(out, addr(uint32(v)))
			}
		}
	}
	for _, r := range p.Resolvers {
		out = append(out, r.Address, r.Address.Next())
	}
	out = append(out, hosts...)
	for range 200 {
		out = append(out, addr(rng.Uint32()))
	}
	for _, s := range netpolicy.Structural {
		out = append(out, s.Prefix.Addr(), addr(u32(s.Prefix.Addr())-1))
	}
	return out
}

// TestMatchesDecider is the cross-check: for random policies and
// destinations, the planned forward chain accepts exactly what
// netpolicy.Decider allows.
func TestMatchesDecider(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	protos := []struct {
		nft uint8
		pol netpolicy.Protocol
	}{{unix.IPPROTO_TCP, netpolicy.ProtocolTCP}, {unix.IPPROTO_UDP, netpolicy.ProtocolUDP}, {unix.IPPROTO_ICMP, netpolicy.ProtocolICMP}}
	checked := 0
	for round := range 60 {
		pol, hosts := randomPolicy(t, rng, 1+rng.IntN(40))
		cfg := testConfig
		cfg.HostAddresses = hosts
		plan, err := New(pol, cfg)
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		dec, err := netpolicy.NewDecider(pol, hosts)
		if err != nil {
			t.Fatal(err)
		}
		sim := newSimulator(t, plan)
		for _, a := range probeAddrs(rng, pol, hosts) {
			for _, pr := range protos {
				for _, port := range []uint16{53, 443, uint16(rng.IntN(65535) + 1)} {
					if pr.nft == unix.IPPROTO_ICMP {
						port = 0
					}
					want := dec.Decide(a, port, pr.pol)
					got := sim.verdict(nftables.TableFamilyIPv4, ChainForward, packet{
						iif: cfg.SandboxInterface, oif: cfg.UpstreamInterface, daddr: a,
						proto: pr.nft, dport: port, ctState: expr.CtStateBitNEW,
					})
					if (got == expr.VerdictAccept) != want.Allowed {
						t.Fatalf("round %d: %v:%d/%v: ruleset %v, decider %v\npolicy rules %v", round, a, port, pr.pol, got, want, pol.PrefixRules)
					}
					checked++
				}
			}
		}
	}
	t.Logf("%d decisions agree", checked)
}

func TestSetElementsOpenEnd(t *testing.T) {
	o := AddSet{Interval: true, Ranges: []Range{
		{netip.MustParseAddr("0.0.0.0"), netip.MustParseAddr("0.255.255.255")},
		{netip.MustParseAddr("224.0.0.0"), netip.MustParseAddr("255.255.255.255")},
	}}
	els := SetElements(o)
	var got []string
	for _, e := range els {
		got = append(got, fmt.Sprintf("%v/%v", netip.AddrFrom4([4]byte(e.Key)), e.IntervalEnd))
	}
	want := "0.0.0.0/false 1.0.0.0/true 224.0.0.0/false"
	if strings.Join(got, " ") != want {
		t.Fatalf("elements %v, want %s", got, want)
	}
}

func FuzzFlatten(f *testing.F) {
	f.Add([]byte{10, 0, 0, 0, 8, 1, 10, 1, 2, 3, 32, 0})
	f.Add([]byte{0, 0, 0, 0, 0, 0, 203, 0, 113, 128, 25, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		var rules []netpolicy.PrefixRule
		for ; len(b) >= 6; b = b[6:] {
			p := netip.PrefixFrom(netip.AddrFrom4([4]byte(b[:4])), int(b[4]%33)).Masked()
			rules = append(rules, netpolicy.PrefixRule{Network: p, Action: netpolicy.PolicyAction(b[5] & 1)})
		}
		ranges, err := Flatten(rules, allowedLimit)
		if err != nil {
			if !errors.Is(err, ErrDuplicatePrefix) {
				t.Fatal(err)
			}
			return
		}
		// Every boundary address agrees with a linear longest-prefix scan.
		for i, r := range ranges {
			if r.Last.Less(r.First) || !r.Last.Less(allowedLimit) {
				t.Fatalf("range %d %v out of order or beyond the limit", i, r)
			}
			if i > 0 && !ranges[i-1].Last.Next().Less(r.First) {
				t.Fatalf("ranges %v and %v touch or overlap", ranges[i-1], r)
			}
		}
		inSet := func(a netip.Addr) bool {
			for _, r := range ranges {
				if r.Contains(a) {
					return true
				}
			}
			return false
		}
		linear := func(a netip.Addr) bool {
			best, allowed := -1, false
			for _, r := range rules {
				if r.Network.Contains(a) && r.Network.Bits() > best {
					best, allowed = r.Network.Bits(), r.Action == netpolicy.Allow
				}
			}
			return allowed
		}
		for _, r := range rules {
			s := prefixSpan(r.Network)
			for _, v := range []uint64{s.lo - 1, s.lo, s.hi - 1, s.hi} {
				if v >= uint64(u32(allowedLimit)) {
					continue
				}
				a := addr(uint32(v))
				if inSet(a) != linear(a) {
					t.Fatalf("%v: set %v, linear %v", a, inSet(a), linear(a))
				}
			}
		}
	})
}

func BenchmarkPlan1000(b *testing.B) {
	b.ReportAllocs()
	rng := rand.New(rand.NewPCG(3, 4))
	pol, _ := randomPolicy(b, rng, 1000)
	for b.Loop() {
		if _, err := New(pol, testConfig); err != nil {
			b.Fatal(err)
		}
	}
}

// TestPinnedCannotReopenDenied is the cross-check for a policy with names,
// in the worst case: the pinned set holds every destination probed,
// denied ones included, as a resolver that pinned without checking would
// leave it. The forward chain must still accept exactly what the decider
// allows, plus pinned addresses that no Deny prefix, structural range or
// host address covers, and never DNS to a pinned address.
func TestPinnedCannotReopenDenied(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	protos := []struct {
		nft uint8
		pol netpolicy.Protocol
	}{{unix.IPPROTO_TCP, netpolicy.ProtocolTCP}, {unix.IPPROTO_UDP, netpolicy.ProtocolUDP}, {unix.IPPROTO_ICMP, netpolicy.ProtocolICMP}}
	checked, pinnedOnly := 0, 0
	for round := range 40 {
		pol, hosts := randomPolicy(t, rng, 1+rng.IntN(40))
		pol.SchemaID = netpolicy.PolicySchemaIDV2
		pol.NameRules = []netpolicy.NameRule{{Pattern: "api.example.com", Action: netpolicy.Allow}}
		pol.NameUpstream = netip.MustParseAddr("198.51.100.53")
		cfg := testConfig
		cfg.HostAddresses = hosts
		cfg.PinningResolver = netip.MustParseAddr("10.255.255.1")
		plan, err := New(pol, cfg)
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		dec, err := netpolicy.NewDecider(pol, hosts)
		if err != nil {
			t.Fatal(err)
		}
		sim := newSimulator(t, plan)
		dests := probeAddrs(rng, pol, hosts)
		for _, a := range dests {
			if a.Is4() {
				k := a.As4()
				sim.sets[SetPinned] = append(sim.sets[SetPinned], nftables.SetElement{Key: k[:]})
			}
		}
		for _, a := range dests {
			_, admitted := dec.AdmitLearned(a)
			for _, pr := range protos {
				for _, port := range []uint16{53, 443, uint16(rng.IntN(65535) + 1)} {
					if pr.nft == unix.IPPROTO_ICMP {
						port = 0
					}
					want := dec.Decide(a, port, pr.pol)
					dns := port == 53 && pr.nft != unix.IPPROTO_ICMP
					allowed := want.Allowed || (admitted && !dns)
					got := sim.verdict(nftables.TableFamilyIPv4, ChainForward, packet{
						iif: cfg.SandboxInterface, oif: cfg.UpstreamInterface, daddr: a,
						proto: pr.nft, dport: port, ctState: expr.CtStateBitNEW,
					})
					if (got == expr.VerdictAccept) != allowed {
						t.Fatalf("round %d: %v:%d/%v pinned: ruleset %v, want allowed=%v (decider %v)\npolicy rules %v", round, a, port, pr.pol, got, allowed, want, pol.PrefixRules)
					}
					if allowed && !want.Allowed {
						pinnedOnly++
					}
					checked++
				}
			}
		}
	}
	if pinnedOnly == 0 {
		t.Fatal("no destination was admitted by its pin alone; the test proves nothing")
	}
	t.Logf("%d decisions agree, %d admitted by a pin alone", checked, pinnedOnly)
}

// TestPinningResolverInput: with names, the input chain accepts DNS from
// the sandbox to the pinning resolver's address only, and still denies
// every other packet from the sandbox.
// inputCase is a packet from the sandbox to daddr and the input chain's
// verdict on it.
type inputCase struct {
	daddr string
	proto uint8
	dport uint16
	want  expr.VerdictKind
}

// checkInput runs each case's NEW packet from the sandbox through plan's
// input chain.
func checkInput(t *testing.T, plan *Plan, cfg Config, cases []inputCase) {
	t.Helper()
	sim := newSimulator(t, plan)
	for _, tc := range cases {
		got := sim.verdict(nftables.TableFamilyIPv4, ChainInput, packet{
			iif: cfg.SandboxInterface, saddr: netip.MustParseAddr("10.255.255.2"), daddr: netip.MustParseAddr(tc.daddr),
			proto: tc.proto, dport: tc.dport, ctState: expr.CtStateBitNEW,
		})
		if got != tc.want {
			t.Errorf("input %s %d/%d: %v, want %v", tc.daddr, tc.dport, tc.proto, got, tc.want)
		}
	}
}

func TestPinningResolverInput(t *testing.T) {
	pol := examplePolicy(t)
	pol.SchemaID = netpolicy.PolicySchemaIDV2
	pol.NameRules = []netpolicy.NameRule{{Pattern: "api.example.com", Action: netpolicy.Allow}}
	pol.NameUpstream = netip.MustParseAddr("198.51.100.53")
	cfg := testConfig
	cfg.PinningResolver = netip.MustParseAddr("10.255.255.1")
	if _, err := New(pol, testConfig); err == nil {
		t.Fatal("a policy with names planned without a pinning resolver address")
	}
	plan, err := New(pol, cfg)
	if err != nil {
		t.Fatal(err)
	}
	checkInput(t, plan, cfg, []inputCase{
		{"10.255.255.1", unix.IPPROTO_UDP, 53, expr.VerdictAccept},
		{"10.255.255.1", unix.IPPROTO_TCP, 53, expr.VerdictAccept},
		{"10.255.255.1", unix.IPPROTO_TCP, 22, expr.VerdictDrop},
		{"10.255.255.1", unix.IPPROTO_UDP, 54, expr.VerdictDrop},
		{"10.0.2.100", unix.IPPROTO_UDP, 53, expr.VerdictDrop},
	})
	v1, err := New(examplePolicy(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got := newSimulator(t, v1).verdict(nftables.TableFamilyIPv4, ChainInput, packet{
		iif: cfg.SandboxInterface, daddr: netip.MustParseAddr("10.255.255.1"), proto: unix.IPPROTO_UDP, dport: 53, ctState: expr.CtStateBitNEW,
	}); got != expr.VerdictDrop {
		t.Errorf("v1 input chain accepts DNS to the enforcement end: %v", got)
	}
}

// TestBrokerInput: a policy with brokered destinations admits TCP from
// the sandbox to the enforcement end on exactly the brokered ports; UDP
// on those ports, other ports and other addresses stay denied.
func TestBrokerInput(t *testing.T) {
	pol := examplePolicy(t)
	pol.SchemaID = netpolicy.PolicySchemaIDV2
	pol.NameRules = []netpolicy.NameRule{{Pattern: "api.example.com", Action: netpolicy.Allow}}
	pol.NameUpstream = netip.MustParseAddr("198.51.100.53")
	pol, err := pol.WithBrokered([]netpolicy.BrokeredDestination{{Host: "api.example.com", Port: 443}, {Host: "api.example.com", Port: 8443}})
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig
	cfg.PinningResolver = netip.MustParseAddr("10.255.255.1")
	plan, err := New(pol, cfg)
	if err != nil {
		t.Fatal(err)
	}
	checkInput(t, plan, cfg, []inputCase{
		{"10.255.255.1", unix.IPPROTO_TCP, 443, expr.VerdictAccept},
		{"10.255.255.1", unix.IPPROTO_TCP, 8443, expr.VerdictAccept},
		{"10.255.255.1", unix.IPPROTO_UDP, 443, expr.VerdictDrop},
		{"10.255.255.1", unix.IPPROTO_TCP, 444, expr.VerdictDrop},
		{"10.255.255.1", unix.IPPROTO_TCP, 80, expr.VerdictDrop},
		{"10.0.2.100", unix.IPPROTO_TCP, 443, expr.VerdictDrop},
		// DNS to the pinning resolver still passes.
		{"10.255.255.1", unix.IPPROTO_UDP, 53, expr.VerdictAccept},
	})
}

// TestRelayInput: with the relay addresses, the input chain accepts from
// the sandbox exactly the established replies of connections the
// enforcement namespace opened to it, from the sandbox's address to the
// enforcement end; every other packet from the sandbox is still denied,
// and the forward chain is the same as without them.
func TestRelayInput(t *testing.T) {
	sbx, end := netip.MustParseAddr("10.255.255.2"), netip.MustParseAddr("10.255.255.1")
	cfg := testConfig
	cfg.RelayFrom, cfg.RelayTo = sbx, end
	plan, err := New(examplePolicy(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	bad := cfg
	bad.RelayTo = netip.Addr{}
	if _, err := New(examplePolicy(t), bad); err == nil {
		t.Fatal("a relay without the enforcement end's address was planned")
	}
	sim := newSimulator(t, plan)
	est := expr.CtStateBitESTABLISHED
	for _, tc := range []struct {
		name         string
		iif          string
		saddr, daddr netip.Addr
		state        uint32
		reply        bool
		want         expr.VerdictKind
	}{
		{"relay reply", cfg.SandboxInterface, sbx, end, est, true, expr.VerdictAccept},
		{"sandbox-opened connection", cfg.SandboxInterface, sbx, end, est, false, expr.VerdictDrop},
		{"new from the sandbox", cfg.SandboxInterface, sbx, end, expr.CtStateBitNEW, false, expr.VerdictDrop},
		{"related reply", cfg.SandboxInterface, sbx, end, expr.CtStateBitRELATED, true, expr.VerdictAccept},
		{"forged source", cfg.SandboxInterface, netip.MustParseAddr("198.51.100.53"), end, est, true, expr.VerdictDrop},
		{"to the upstream end", cfg.SandboxInterface, sbx, netip.MustParseAddr("10.0.2.100"), est, true, expr.VerdictDrop},
		{"upstream reply", cfg.UpstreamInterface, netip.MustParseAddr("198.51.100.53"), netip.MustParseAddr("10.0.2.100"), est, true, expr.VerdictAccept},
		{"new from upstream", cfg.UpstreamInterface, netip.MustParseAddr("10.0.2.2"), netip.MustParseAddr("10.0.2.100"), expr.CtStateBitNEW, false, expr.VerdictDrop},
	} {
		got := sim.verdict(nftables.TableFamilyIPv4, ChainInput, packet{
			iif: tc.iif, saddr: tc.saddr, daddr: tc.daddr, proto: unix.IPPROTO_TCP, sport: 5173, dport: 40000,
			ctState: tc.state, ctReply: tc.reply,
		})
		if got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	without, err := New(examplePolicy(t), testConfig)
	if err != nil {
		t.Fatal(err)
	}
	a, b := plan.Rules(nftables.TableFamilyIPv4, ChainForward), without.Rules(nftables.TableFamilyIPv4, ChainForward)
	if !reflect.DeepEqual(a, b) {
		t.Error("the relay changed the forward chain")
	}
	// Nothing from upstream reaches the sandbox, relay or not.
	for _, reply := range []bool{false, true} {
		if got := sim.verdict(nftables.TableFamilyIPv4, ChainForward, packet{
			iif: cfg.UpstreamInterface, oif: cfg.SandboxInterface, saddr: netip.MustParseAddr("10.0.2.2"), daddr: sbx,
			proto: unix.IPPROTO_TCP, sport: 40000, dport: 5173, ctState: expr.CtStateBitNEW, ctReply: reply,
		}); got != expr.VerdictDrop {
			t.Errorf("forward from upstream to the sandbox (reply %v): %v", reply, got)
		}
	}
}
