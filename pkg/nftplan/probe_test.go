package nftplan

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"lazaret.dev/pkg/netpolicy"
)

const tcpSYN, tcpACK, tcpRST = 0x02, 0x10, 0x04

var probeSource = netip.MustParseAddr("10.255.255.2")

func probeTo(i int, dst netip.Addr, port uint16) DeniedProbe {
	return DeniedProbe{Source: netip.AddrPortFrom(probeSource, uint16(20000+i)), Destination: netip.AddrPortFrom(dst, port)}
}

// synOf is the probe's first packet as the forward chain sees it.
func synOf(cfg Config, d DeniedProbe) packet {
	return packet{
		iif: cfg.SandboxInterface, oif: cfg.UpstreamInterface,
		saddr: d.Source.Addr(), daddr: d.Destination.Addr(), proto: unix.IPPROTO_TCP,
		sport: d.Source.Port(), dport: d.Destination.Port(), tcpFlags: tcpSYN, ctState: expr.CtStateBitNEW,
	}
}

func TestProbeRulesRejects(t *testing.T) {
	p, err := New(examplePolicy(t), testConfig)
	if err != nil {
		t.Fatal(err)
	}
	good := probeTo(0, netip.MustParseAddr("10.1.1.1"), 443)
	tests := []struct {
		name   string
		probes []DeniedProbe
		want   error
	}{
		{"ipv6 destination", []DeniedProbe{{Source: good.Source, Destination: netip.MustParseAddrPort("[2001:db8::1]:443")}}, ErrBadProbe},
		{"mapped source", []DeniedProbe{{Source: netip.MustParseAddrPort("[::ffff:10.255.255.2]:20000"), Destination: good.Destination}}, ErrBadProbe},
		{"zero source port", []DeniedProbe{{Source: netip.AddrPortFrom(probeSource, 0), Destination: good.Destination}}, ErrBadProbe},
		{"zero destination port", []DeniedProbe{{Source: good.Source, Destination: netip.AddrPortFrom(good.Destination.Addr(), 0)}}, ErrBadProbe},
		{"invalid", []DeniedProbe{{}}, ErrBadProbe},
		{"duplicate", []DeniedProbe{good, good}, ErrDuplicateProbe},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := p.ProbeRules(tc.probes); !errors.Is(err, tc.want) {
				t.Fatalf("ProbeRules error = %v, want %v", err, tc.want)
			}
		})
	}
}

// TestProbeOf: a planned probe rule reads back as its probe, whatever its
// counter holds; anything else in its place is not a probe rule, and
// CheckProbeRule refuses it.
func TestProbeOf(t *testing.T) {
	p, err := New(examplePolicy(t), testConfig)
	if err != nil {
		t.Fatal(err)
	}
	probe := probeTo(3, netip.MustParseAddr("203.0.113.200"), 443)
	rules, err := p.ProbeRules([]DeniedProbe{probe})
	if err != nil {
		t.Fatal(err)
	}
	r := rules[0]
	if r.Chain != ChainDeny || r.Table != TableName || r.Family != nftables.TableFamilyIPv4 {
		t.Fatalf("probe rule %s", r.Describe())
	}
	counted := append([]expr.Any(nil), r.Exprs...)
	counted[probeCounter] = &expr.Counter{Packets: 2, Bytes: 120}
	if d, n, ok := p.ProbeOf(counted); !ok || d != probe || n != 2 {
		t.Fatalf("ProbeOf = %v, %d, %v; want %v, 2, true", d, n, ok, probe)
	}
	if err := p.CheckProbeRule(r); err != nil {
		t.Fatal(err)
	}

	replace := func(i int, e expr.Any) []expr.Any {
		out := append([]expr.Any(nil), r.Exprs...)
		out[i] = e
		return out
	}
	other, _ := New(examplePolicy(t), Config{SandboxInterface: "lz-other", UpstreamInterface: "tap0"})
	otherRules, _ := other.ProbeRules([]DeniedProbe{probe})
	tests := []struct {
		name  string
		exprs []expr.Any
	}{
		{"accept instead of reset", replace(probeLen-1, accept())},
		{"drop instead of reset", replace(probeLen-1, drop())},
		{"icmp instead of reset", replace(probeLen-1, &expr.Reject{Type: unix.NFT_REJECT_ICMP_UNREACH, Code: 13})},
		{"no counter", replace(probeCounter, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{tcpSYN}})},
		{"any flags", replace(13, &expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 1, Mask: []byte{0xff}, Xor: []byte{0}})},
		{"not equal source", replace(probeSaddr, &expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: probeSource.AsSlice()})},
		{"another interface", otherRules[0].Exprs},
		{"a planned rule", p.Rules(nftables.TableFamilyIPv4, ChainDeny)[0].Exprs},
		{"short", r.Exprs[:probeLen-1]},
		{"long", append(append([]expr.Any(nil), r.Exprs...), accept())},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if d, _, ok := p.ProbeOf(tc.exprs); ok {
				t.Fatalf("ProbeOf recognized %v", d)
			}
			bad := r
			bad.Exprs = tc.exprs
			if err := p.CheckProbeRule(bad); !errors.Is(err, ErrUnknownOp) {
				t.Fatalf("CheckProbeRule = %v, want ErrUnknownOp", err)
			}
		})
	}
	for _, chain := range []string{ChainForward, ChainInput, ChainPostrouting} {
		moved := r
		moved.Chain = chain
		if err := p.CheckProbeRule(moved); !errors.Is(err, ErrForeignTable) {
			t.Fatalf("probe rule in chain %s: CheckProbeRule = %v, want ErrForeignTable", chain, err)
		}
	}
	// A planned rule never carries a counter or a reject.
	if err := Check(r); !errors.Is(err, ErrUnknownOp) {
		t.Fatalf("Check of a probe rule as a planned operation = %v, want ErrUnknownOp", err)
	}
}

func captureProbes(t testing.TB, p *Plan, rules []AddRule) []string {
	t.Helper()
	var lines []string
	c, err := nftables.New(nftables.WithTestDial(func(req []netlink.Message) ([]netlink.Message, error) {
		for _, m := range req {
			lines = append(lines, fmt.Sprintf("%04x %04x %x", uint16(m.Header.Type), uint16(m.Header.Flags), m.Data))
		}
		return req, nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.QueueProbes(c, rules); err != nil {
		t.Fatal(err)
	}
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	return lines
}

// TestGoldenProbeRules: the netlink batch of two probe rules, as nft would
// list them:
//
//	iifname "lz-sbx0" meta l4proto tcp ip saddr 10.255.255.2 ip daddr 10.1.1.1
//	  tcp sport 20000 tcp dport 443 tcp flags & (fin|syn|rst|ack) == syn
//	  counter reject with tcp reset comment "readiness probe ..."
func TestGoldenProbeRules(t *testing.T) {
	p, err := New(examplePolicy(t), testConfig)
	if err != nil {
		t.Fatal(err)
	}
	rules, err := p.ProbeRules([]DeniedProbe{probeTo(0, netip.MustParseAddr("10.1.1.1"), 443), probeTo(1, netip.MustParseAddr("169.254.169.254"), 80)})
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(captureProbes(t, p, rules), "\n") + "\n"
	path := filepath.Join("testdata", "probe_rules.golden")
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
		t.Fatalf("probe batch differs from %s (run with -update after checking):\n%s", path, got)
	}
	lines := strings.Split(strings.TrimSpace(got), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], fmt.Sprintf("%04x", unix.NFNL_MSG_BATCH_BEGIN)) ||
		!strings.HasPrefix(lines[3], fmt.Sprintf("%04x", unix.NFNL_MSG_BATCH_END)) {
		t.Fatalf("probe batch is not begin, two insertions, end:\n%s", got)
	}
	// An insertion at the head (NLM_F_CREATE without NLM_F_APPEND) of a
	// new rule.
	for _, l := range lines[1:3] {
		f := strings.Fields(l)
		if f[0] != fmt.Sprintf("%04x", unix.NFNL_SUBSYS_NFTABLES<<8|unix.NFT_MSG_NEWRULE) || f[1] != "040d" {
			t.Fatalf("probe rule message %s %s, want a NEWRULE insertion (flags 040d)", f[0], f[1])
		}
	}
}

// TestProbeRulesOnlyMeetDeniedPackets is the safety argument checked: for
// random policies, with a probe rule for every sampled destination
// (allowed or not), a probe's own SYN is reset and counted exactly when
// the policy denies it, and every other packet gets the verdict it gets
// without probe rules. A probe rule can neither open nor close anything.
func TestProbeRulesOnlyMeetDeniedPackets(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	checked := 0
	for round := range 12 {
		pol, hosts := randomPolicy(t, rng, 1+rng.IntN(30))
		cfg := testConfig
		cfg.HostAddresses = hosts
		plan, err := New(pol, cfg)
		if err != nil {
			t.Fatal(err)
		}
		dec, err := netpolicy.NewDecider(pol, hosts)
		if err != nil {
			t.Fatal(err)
		}
		addrs := probeAddrs(rng, pol, hosts)
		var probes []DeniedProbe
		for i, a := range addrs {
			port := []uint16{53, 443, uint16(rng.IntN(65535) + 1)}[rng.IntN(3)]
			probes = append(probes, probeTo(i, a, port))
		}
		rules, err := plan.ProbeRules(probes)
		if err != nil {
			t.Fatal(err)
		}
		without := newSimulator(t, plan)
		with := newSimulator(t, plan)
		with.insertProbes(rules)

		for _, d := range probes {
			denied := !dec.Decide(d.Destination.Addr(), d.Destination.Port(), netpolicy.ProtocolTCP).Allowed
			syn := synOf(cfg, d)
			got := with.evaluate(nftables.TableFamilyIPv4, ChainForward, syn)
			if denied != got.rejected || (!denied && got.verdict != expr.VerdictAccept) {
				t.Fatalf("round %d: probe %v (denied %v): %+v", round, d, denied, got)
			}
			want := uint64(0)
			if denied {
				want = 1
			}
			if n := with.counters["readiness probe "+d.String()]; n != want {
				t.Fatalf("round %d: probe %v (denied %v): counter %d, want %d", round, d, denied, n, want)
			}
			clear(with.counters)

			// Packets that are not the probe's SYN: same verdict as
			// without probe rules, never reset, never counted.
			variants := []packet{syn, syn, syn, syn, syn, syn}
			variants[0].tcpFlags = tcpSYN | tcpACK
			variants[1].tcpFlags = tcpACK
			variants[2].tcpFlags = tcpRST
			variants[3].sport++
			variants[4].saddr = variants[4].saddr.Next()
			variants[5].proto = unix.IPPROTO_UDP
			for _, v := range variants {
				got, base := with.evaluate(nftables.TableFamilyIPv4, ChainForward, v), without.evaluate(nftables.TableFamilyIPv4, ChainForward, v)
				if got != base || got.rejected || len(with.counters) != 0 {
					t.Fatalf("round %d: probe %v, packet %+v: %+v with probe rules, %+v without (counters %v)", round, d, v, got, base, with.counters)
				}
				checked++
			}
			// From another interface (upstream, return traffic): the
			// forward chain decides as before.
			for _, v := range []packet{{iif: cfg.UpstreamInterface, oif: cfg.SandboxInterface, saddr: syn.saddr, daddr: syn.daddr, proto: syn.proto,
				sport: syn.sport, dport: syn.dport, tcpFlags: tcpSYN, ctState: expr.CtStateBitNEW}} {
				if got, base := with.evaluate(nftables.TableFamilyIPv4, ChainForward, v), without.evaluate(nftables.TableFamilyIPv4, ChainForward, v); got != base {
					t.Fatalf("round %d: probe %v from upstream: %+v with probe rules, %+v without", round, d, got, base)
				}
			}
			checked++
		}
		with.removeProbes()
	}
	t.Logf("%d packets checked", checked)
}

// TestProbeRuleInInputChain: a denied target at the enforcement end's own
// address reaches the deny chain through the input chain, and its probe
// rule resets and counts it there too.
func TestProbeRuleInInputChain(t *testing.T) {
	p, err := New(examplePolicy(t), testConfig)
	if err != nil {
		t.Fatal(err)
	}
	d := probeTo(0, netip.MustParseAddr("10.255.255.1"), 22)
	rules, err := p.ProbeRules([]DeniedProbe{d})
	if err != nil {
		t.Fatal(err)
	}
	sim := newSimulator(t, p)
	sim.insertProbes(rules)
	pkt := synOf(testConfig, d)
	pkt.oif = ""
	if got := sim.evaluate(nftables.TableFamilyIPv4, ChainInput, pkt); !got.rejected || sim.counters["readiness probe "+d.String()] != 1 {
		t.Fatalf("input chain: %+v, counters %v", got, sim.counters)
	}
	sim.removeProbes()
	if got := sim.evaluate(nftables.TableFamilyIPv4, ChainInput, pkt); got.rejected || got.verdict != expr.VerdictDrop {
		t.Fatalf("input chain without probe rules: %+v, want a silent drop", got)
	}
}
