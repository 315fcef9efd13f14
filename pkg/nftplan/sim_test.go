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
	iif, oif string
	daddr    netip.Addr
	proto    uint8
	dport    uint16
	ctState  uint32
}

// simulator evaluates a plan's rules the way the kernel evaluates the
// expressions, using the set elements exactly as they are sent.
type simulator struct {
	t     testing.TB
	plan  *Plan
	sets  map[string][]nftables.SetElement
	inter map[string]bool
}

func newSimulator(t testing.TB, p *Plan) *simulator {
	t.Helper()
	s := &simulator{t: t, plan: p, sets: map[string][]nftables.SetElement{}, inter: map[string]bool{}}
	for name, o := range p.Sets() {
		s.sets[name] = SetElements(o)
		s.inter[name] = o.Interval
	}
	return s
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

// verdict returns the verdict of the chain for pkt: the first rule whose
// matches all hold, else the chain policy.
func (s *simulator) verdict(family nftables.TableFamily, chain string, pkt packet) expr.VerdictKind {
	s.t.Helper()
rules:
	for _, r := range s.plan.Rules(family, chain) {
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
				switch {
				case e.Base == expr.PayloadBaseNetworkHeader && e.Offset == 16 && e.Len == 4:
					a := pkt.daddr.As4()
					copy(reg, a[:])
				case e.Base == expr.PayloadBaseTransportHeader && e.Offset == 2 && e.Len == 2:
					if pkt.proto != unix.IPPROTO_TCP && pkt.proto != unix.IPPROTO_UDP {
						s.t.Fatalf("transport port read for protocol %d", pkt.proto)
					}
					binary.BigEndian.PutUint16(reg, pkt.dport)
				default:
					s.t.Fatalf("payload %+v not simulated", e)
				}
			case *expr.Ct:
				if e.Key != expr.CtKeySTATE {
					s.t.Fatalf("ct key %d not simulated", e.Key)
				}
				clear(reg)
				binary.NativeEndian.PutUint32(reg, pkt.ctState)
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
			case *expr.Verdict:
				return e.Kind
			default:
				s.t.Fatalf("expression %T not simulated", e)
			}
		}
		s.t.Fatalf("rule %q ends without a verdict", r.Comment)
	}
	for _, op := range s.plan.Ops {
		if c, ok := op.(AddChain); ok && c.Family == family && c.Name == chain {
			if c.Policy == nftables.ChainPolicyAccept {
				return expr.VerdictAccept
			}
			return expr.VerdictDrop
		}
	}
	s.t.Fatalf("chain %s not planned", chain)
	return 0
}
