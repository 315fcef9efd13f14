package nftplan

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"slices"
	"testing"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// packet is what the interpreter can see of a forwarded IPv4 packet.
type packet struct {
	iif, oif     string
	saddr, daddr netip.Addr
	proto        uint8
	sport, dport uint16
	tcpFlags     uint8
	ctState      uint32
	ctReply      bool // the packet travels in its connection's reply direction
}

// outcome is what a chain did with a packet: the verdict, and whether a
// reject answered it (the verdict is then drop).
type outcome struct {
	verdict  expr.VerdictKind
	rejected bool
}

// simulator evaluates a plan's rules the way the kernel evaluates the
// expressions, using the set elements exactly as they are sent. Probe
// rules added with insertProbes sit at the head of the deny chain, and
// their counters count.
type simulator struct {
	t        testing.TB
	plan     *Plan
	sets     map[string][]nftables.SetElement
	inter    map[string]bool
	probes   []AddRule
	counters map[string]uint64
}

func newSimulator(t testing.TB, p *Plan) *simulator {
	t.Helper()
	s := &simulator{t: t, plan: p, sets: map[string][]nftables.SetElement{}, inter: map[string]bool{}, counters: map[string]uint64{}}
	for name, o := range p.Sets() {
		s.sets[name] = SetElements(o)
		s.inter[name] = o.Interval
	}
	return s
}

// insertProbes puts rules at the head of the deny chain, as QueueProbes
// does, after checking each as the executor would.
func (s *simulator) insertProbes(rules []AddRule) {
	s.t.Helper()
	for _, r := range rules {
		if err := s.plan.CheckProbeRule(r); err != nil {
			s.t.Fatal(err)
		}
	}
	// Each insertion goes to the head, so the last inserted comes first.
	for _, r := range rules {
		s.probes = append([]AddRule{r}, s.probes...)
	}
}

// removeProbes deletes every probe rule and clears the counters.
func (s *simulator) removeProbes() {
	s.probes = nil
	clear(s.counters)
}

func (s *simulator) rules(family nftables.TableFamily, chain string) []AddRule {
	planned := s.plan.Rules(family, chain)
	if family == nftables.TableFamilyIPv4 && chain == ChainDeny {
		return append(append([]AddRule(nil), s.probes...), planned...)
	}
	return planned
}

func (s *simulator) member(set string, key []byte) bool {
	els, ok := s.sets[set]
	if !ok {
		s.t.Fatalf("lookup of unknown set %q", set)
	}
	if !s.inter[set] {
		return slices.ContainsFunc(els, func(e nftables.SetElement) bool { return bytes.Equal(e.Key, key) })
	}
	// Interval sets: the nearest element at or below the key decides; a
	// start element means inside, an end element means past an interval.
	var best *nftables.SetElement
	for i := range els {
		if bytes.Compare(els[i].Key, key) <= 0 && (best == nil || bytes.Compare(els[i].Key, best.Key) >= 0) {
			best = &els[i]
		}
	}
	return best != nil && !best.IntervalEnd
}

// verdict returns the verdict of the base chain for pkt.
func (s *simulator) verdict(family nftables.TableFamily, chain string, pkt packet) expr.VerdictKind {
	s.t.Helper()
	return s.evaluate(family, chain, pkt).verdict
}

// evaluate runs the base chain for pkt: the first rule whose matches all
// hold gives the verdict; a goto runs the regular chain in its place and,
// when that chain ends without a verdict, the base chain's policy applies.
func (s *simulator) evaluate(family nftables.TableFamily, chain string, pkt packet) outcome {
	s.t.Helper()
	base, regular := s.chain(family, chain)
	if regular {
		s.t.Fatalf("chain %s is not a base chain", chain)
	}
	if out, ok := s.run(family, chain, pkt, 0); ok {
		return out
	}
	if base.Policy == nftables.ChainPolicyAccept {
		return outcome{verdict: expr.VerdictAccept}
	}
	return outcome{verdict: expr.VerdictDrop}
}

func (s *simulator) chain(family nftables.TableFamily, name string) (AddChain, bool) {
	for _, op := range s.plan.Ops {
		if c, ok := op.(AddChain); ok && c.Family == family && c.Name == name {
			return c, c.Regular
		}
	}
	s.t.Fatalf("chain %s not planned", name)
	return AddChain{}, false
}

// run evaluates the rules of one chain; ok is false when no rule gave a
// verdict.
func (s *simulator) run(family nftables.TableFamily, chain string, pkt packet, depth int) (outcome, bool) {
	s.t.Helper()
	if depth > 4 {
		s.t.Fatalf("goto chain too deep at %s", chain)
	}
rules:
	for _, r := range s.rules(family, chain) {
		reg := make([]byte, 16)
		for _, e := range r.Exprs {
			switch e := e.(type) {
			case *expr.Meta:
				clear(reg)
				switch e.Key {
				case expr.MetaKeyIIFNAME:
					copy(reg, pkt.iif)
				case expr.MetaKeyOIFNAME:
					copy(reg, pkt.oif)
				case expr.MetaKeyL4PROTO:
					reg[0] = pkt.proto
				default:
					s.t.Fatalf("meta key %d not simulated", e.Key)
				}
			case *expr.Payload:
				clear(reg)
				transport := func() {
					if pkt.proto != unix.IPPROTO_TCP && pkt.proto != unix.IPPROTO_UDP {
						s.t.Fatalf("transport header read for protocol %d", pkt.proto)
					}
				}
				switch {
				case e.Base == expr.PayloadBaseNetworkHeader && e.Offset == 12 && e.Len == 4:
					a := pkt.saddr.As4()
					copy(reg, a[:])
				case e.Base == expr.PayloadBaseNetworkHeader && e.Offset == 16 && e.Len == 4:
					a := pkt.daddr.As4()
					copy(reg, a[:])
				case e.Base == expr.PayloadBaseTransportHeader && e.Offset == 0 && e.Len == 2:
					transport()
					binary.BigEndian.PutUint16(reg, pkt.sport)
				case e.Base == expr.PayloadBaseTransportHeader && e.Offset == 2 && e.Len == 2:
					transport()
					binary.BigEndian.PutUint16(reg, pkt.dport)
				case e.Base == expr.PayloadBaseTransportHeader && e.Offset == 13 && e.Len == 1:
					if pkt.proto != unix.IPPROTO_TCP {
						s.t.Fatalf("TCP flags read for protocol %d", pkt.proto)
					}
					reg[0] = pkt.tcpFlags
				default:
					s.t.Fatalf("payload %+v not simulated", e)
				}
			case *expr.Ct:
				clear(reg)
				switch e.Key {
				case expr.CtKeySTATE:
					binary.NativeEndian.PutUint32(reg, pkt.ctState)
				case expr.CtKeyDIRECTION:
					if pkt.ctReply {
						reg[0] = 1
					}
				default:
					s.t.Fatalf("ct key %d not simulated", e.Key)
				}
			case *expr.Bitwise:
				for i := uint32(0); i < e.Len; i++ {
					reg[i] = reg[i]&e.Mask[i] ^ e.Xor[i]
				}
			case *expr.Cmp:
				c := bytes.Compare(reg[:len(e.Data)], e.Data)
				ok := map[expr.CmpOp]bool{expr.CmpOpEq: c == 0, expr.CmpOpNeq: c != 0}[e.Op]
				if !ok {
					continue rules
				}
			case *expr.Lookup:
				if s.member(e.SetName, reg[:4]) == e.Invert {
					continue rules
				}
			case *expr.Counter:
				s.counters[r.Comment]++
			case *expr.Reject:
				if e.Type != unix.NFT_REJECT_TCP_RST || pkt.proto != unix.IPPROTO_TCP {
					s.t.Fatalf("reject %+v of protocol %d not simulated", e, pkt.proto)
				}
				return outcome{verdict: expr.VerdictDrop, rejected: true}, true
			case *expr.Verdict:
				switch e.Kind {
				case expr.VerdictAccept, expr.VerdictDrop:
					return outcome{verdict: e.Kind}, true
				case expr.VerdictGoto:
					if _, regular := s.chain(family, e.Chain); !regular {
						s.t.Fatalf("goto base chain %s", e.Chain)
					}
					return s.run(family, e.Chain, pkt, depth+1)
				default:
					s.t.Fatalf("verdict %v not simulated", e.Kind)
				}
			default:
				s.t.Fatalf("expression %T not simulated", e)
			}
		}
		s.t.Fatalf("rule %q ends without a verdict", r.Comment)
	}
	return outcome{}, false
}
