package nftplan

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/netip"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
	"golang.org/x/sys/unix"
)

// DeniedProbe is the readiness probe of one denied target: a TCP
// connection attempt from Source, the sandbox end's address and a port the
// prober binds, to Destination.
type DeniedProbe struct {
	Source      netip.AddrPort
	Destination netip.AddrPort
}

func (d DeniedProbe) String() string { return d.Source.String() + " > " + d.Destination.String() }

// tcpFlagsSYN is the mask of the flags a probe rule reads and the value it
// requires: SYN set, FIN, RST and ACK clear. A SYN-ACK, a reset or any
// later segment of the same four-tuple does not match.
const (
	tcpFlagsMask = 0x01 | 0x02 | 0x04 | 0x10 // FIN | SYN | RST | ACK
	tcpFlagsSYN  = 0x02
)

// probeExprs is the one shape of a probe rule: interface, protocol, the
// exact four-tuple, a SYN, then a counter and a reset.
func (p *Plan) probeExprs(d DeniedProbe) []expr.Any {
	src, dst := d.Source.Addr().As4(), d.Destination.Addr().As4()
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyIIFNAME, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: ifnameBytes(p.Config.SandboxInterface)},
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_TCP}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 12, Len: 4},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: src[:]},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 16, Len: 4},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: dst[:]},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 0, Len: 2},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binary.BigEndian.AppendUint16(nil, d.Source.Port())},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binary.BigEndian.AppendUint16(nil, d.Destination.Port())},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 13, Len: 1},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 1, Mask: []byte{tcpFlagsMask}, Xor: []byte{0}},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{tcpFlagsSYN}},
		&expr.Counter{},
		&expr.Reject{Type: unix.NFT_REJECT_TCP_RST},
	}
}

// Indices into probeExprs of the values that vary between probes, and of
// the counter.
const (
	probeSaddr   = 5
	probeDaddr   = 7
	probeSport   = 9
	probeDport   = 11
	probeCounter = 15
	probeLen     = 17
)

func checkProbe(d DeniedProbe) error {
	if !d.Source.Addr().Is4() || !d.Destination.Addr().Is4() || d.Source.Port() == 0 || d.Destination.Port() == 0 {
		return fmt.Errorf("readiness probe %v: %w", d, ErrBadProbe)
	}
	return nil
}

// ProbeRules plans one rule per probe for the head of the deny chain.
// Each matches exactly its probe's TCP SYN (arriving from the sandbox
// interface, from the probe's source address and port to its destination
// address and port), counts it and answers it with a TCP reset, so that
// the connect fails at once and the counter shows that the enforcement
// path refused it. Only a packet the policy denies reaches the deny chain,
// so a probe rule cannot match a packet the policy accepts; and it rejects
// only what the chain would have dropped. The probes must be distinct.
func (p *Plan) ProbeRules(probes []DeniedProbe) ([]AddRule, error) {
	seen := make(map[DeniedProbe]bool, len(probes))
	out := make([]AddRule, 0, len(probes))
	for _, d := range probes {
		if err := checkProbe(d); err != nil {
			return nil, fmt.Errorf("planning readiness probe rules: %w", err)
		}
		if seen[d] {
			return nil, fmt.Errorf("planning readiness probe rules: probe %v: %w", d, ErrDuplicateProbe)
		}
		seen[d] = true
		out = append(out, AddRule{Family: nftables.TableFamilyIPv4, Table: TableName, Chain: ChainDeny,
			Comment: "readiness probe " + d.String(), Exprs: p.probeExprs(d)})
	}
	return out, nil
}

// ProbeOf returns the probe whose rule exprs is, and the packets its
// counter holds. ok is false unless exprs is exactly a probe rule of this
// plan (expressions compared by netlink encoding, the counter's values
// aside), which lets an executor tell probe rules apart from the planned
// rules when it reads the deny chain back.
func (p *Plan) ProbeOf(exprs []expr.Any) (d DeniedProbe, packets uint64, ok bool) {
	if len(exprs) != probeLen {
		return DeniedProbe{}, 0, false
	}
	data := func(i, n int) ([]byte, bool) {
		c, ok := exprs[i].(*expr.Cmp)
		if !ok || len(c.Data) != n {
			return nil, false
		}
		return c.Data, true
	}
	saddr, ok1 := data(probeSaddr, 4)
	daddr, ok2 := data(probeDaddr, 4)
	sport, ok3 := data(probeSport, 2)
	dport, ok4 := data(probeDport, 2)
	counter, ok5 := exprs[probeCounter].(*expr.Counter)
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 {
		return DeniedProbe{}, 0, false
	}
	d = DeniedProbe{
		Source:      netip.AddrPortFrom(netip.AddrFrom4([4]byte(saddr)), binary.BigEndian.Uint16(sport)),
		Destination: netip.AddrPortFrom(netip.AddrFrom4([4]byte(daddr)), binary.BigEndian.Uint16(dport)),
	}
	if checkProbe(d) != nil {
		return DeniedProbe{}, 0, false
	}
	family := byte(nftables.TableFamilyIPv4)
	for i, w := range p.probeExprs(d) {
		if i == probeCounter {
			continue
		}
		gb, gerr := expr.Marshal(family, exprs[i])
		wb, werr := expr.Marshal(family, w)
		if gerr != nil || werr != nil || !bytes.Equal(gb, wb) {
			return DeniedProbe{}, 0, false
		}
	}
	return d, counter.Packets, true
}

// CheckProbeRule re-checks a rule before it is queued: it must be in the
// lazaret table's deny chain and be exactly the probe rule of this plan
// for the probe it names.
func (p *Plan) CheckProbeRule(r AddRule) error {
	if r.Family != nftables.TableFamilyIPv4 || r.Table != TableName || r.Chain != ChainDeny {
		return fmt.Errorf("%s: probe rules belong to ip %s %s: %w", r.Describe(), TableName, ChainDeny, ErrForeignTable)
	}
	if _, _, ok := p.ProbeOf(r.Exprs); !ok {
		return fmt.Errorf("%s: not a readiness probe rule of this plan: %w", r.Describe(), ErrUnknownOp)
	}
	return nil
}

// QueueProbes checks every rule with CheckProbeRule and writes them into c
// as insertions at the head of the deny chain, in one batch, without
// sending: c.Flush sends it, and the kernel applies all or none.
func (p *Plan) QueueProbes(c *nftables.Conn, rules []AddRule) error {
	table := &nftables.Table{Family: nftables.TableFamilyIPv4, Name: TableName}
	chain := &nftables.Chain{Table: table, Name: ChainDeny}
	for _, r := range rules {
		if err := p.CheckProbeRule(r); err != nil {
			return fmt.Errorf("queueing readiness probe rules: %w", err)
		}
		c.InsertRule(&nftables.Rule{Table: table, Chain: chain, Exprs: r.Exprs,
			UserData: userdata.AppendString(nil, userdata.TypeComment, r.Comment)})
	}
	return nil
}
