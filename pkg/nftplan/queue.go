package nftplan

import (
	"fmt"
	"net/netip"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
)

// Check re-checks one operation before it is queued: it must be one of the
// four kinds, name the lazaret table of family ip or ip6, and use only
// the expression kinds and verdicts the planner emits (accept, drop, goto
// the deny chain). Counters and rejects belong to readiness probe rules
// only, which CheckProbeRule admits.
func Check(op Op) error {
	var fam nftables.TableFamily
	var table string
	switch o := op.(type) {
	case AddTable:
		fam, table = o.Family, o.Name
	case AddChain:
		fam, table = o.Family, o.Table
		if o.Regular && (o.Type != "" || o.Hook != 0 || o.Priority != 0 || o.Policy != 0) {
			return fmt.Errorf("%s: a regular chain has no type, hook, priority or policy: %w", o.Describe(), ErrUnknownOp)
		}
	case AddSet:
		fam, table = o.Family, o.Table
		if fam != nftables.TableFamilyIPv4 {
			return fmt.Errorf("%s: %w", o.Describe(), ErrNotIPv4)
		}
		if o.Timeout && (o.Interval || len(o.Ranges) > 0) {
			return fmt.Errorf("%s: a timeout set is filled at run time, never an interval set: %w", o.Describe(), ErrUnknownOp)
		}
		for _, r := range o.Ranges {
			if !r.First.Is4() || !r.Last.Is4() || r.Last.Less(r.First) || (!o.Interval && r.First != r.Last) {
				return fmt.Errorf("%s: element %v: %w", o.Describe(), r, ErrBadPrefix)
			}
		}
	case AddRule:
		fam, table = o.Family, o.Table
		for i, e := range o.Exprs {
			switch e := e.(type) {
			case *expr.Meta, *expr.Cmp, *expr.Payload, *expr.Lookup, *expr.Ct, *expr.Bitwise, *expr.Masq:
			case *expr.Verdict:
				switch e.Kind {
				case expr.VerdictAccept, expr.VerdictDrop:
				case expr.VerdictGoto:
					if e.Chain != ChainDeny {
						return fmt.Errorf("%s: expression %d: goto %q: %w", o.Describe(), i, e.Chain, ErrUnknownOp)
					}
				default:
					return fmt.Errorf("%s: expression %d: verdict %d: %w", o.Describe(), i, e.Kind, ErrUnknownOp)
				}
			default:
				return fmt.Errorf("%s: expression %d (%T): %w", o.Describe(), i, e, ErrUnknownOp)
			}
		}
	default:
		return fmt.Errorf("operation %T: %w", op, ErrUnknownOp)
	}
	if table != TableName || (fam != nftables.TableFamilyIPv4 && fam != nftables.TableFamilyIPv6) {
		return fmt.Errorf("%s: %w", op.Describe(), ErrForeignTable)
	}
	return nil
}

// SetElements returns the nftables elements of an AddSet: for an interval
// set, each range's first address and, unless the range reaches
// 255.255.255.255, the address after its last flagged as an interval end.
func SetElements(o AddSet) []nftables.SetElement {
	var out []nftables.SetElement
	for _, r := range o.Ranges {
		first := r.First.As4()
		out = append(out, nftables.SetElement{Key: first[:]})
		if o.Interval && r.Last != netip.AddrFrom4([4]byte{255, 255, 255, 255}) {
			end := r.Last.Next().As4()
			out = append(out, nftables.SetElement{Key: end[:], IntervalEnd: true})
		}
	}
	return out
}

// Queue checks every operation of p and writes them into c as messages of
// one batch, without sending: c.Flush sends the batch, which the kernel
// applies entirely or not at all. Tables are created exclusively, so a
// batch for a namespace that already has a lazaret table fails whole.
func (p *Plan) Queue(c *nftables.Conn) error {
	tables := map[nftables.TableFamily]*nftables.Table{}
	chains := map[string]*nftables.Chain{}
	sets := map[string]*nftables.Set{}
	regular := map[string]bool{}
	key := func(f nftables.TableFamily, name string) string { return familyName(f) + " " + name }
	for _, op := range p.Ops {
		if err := Check(op); err != nil {
			return fmt.Errorf("queueing nftables plan: %w", err)
		}
		switch o := op.(type) {
		case AddTable:
			tables[o.Family] = c.CreateTable(&nftables.Table{Family: o.Family, Name: o.Name})
		case AddChain:
			t, ok := tables[o.Family]
			if !ok {
				return fmt.Errorf("queueing nftables plan: %s: table not planned before it: %w", o.Describe(), ErrUnknownOp)
			}
			if o.Regular {
				chains[key(o.Family, o.Name)] = c.AddChain(&nftables.Chain{Name: o.Name, Table: t})
				regular[key(o.Family, o.Name)] = true
				continue
			}
			hook, prio, policy := o.Hook, o.Priority, o.Policy
			chains[key(o.Family, o.Name)] = c.AddChain(&nftables.Chain{
				Name: o.Name, Table: t, Type: o.Type, Hooknum: &hook, Priority: &prio, Policy: &policy,
			})
		case AddSet:
			t, ok := tables[o.Family]
			if !ok {
				return fmt.Errorf("queueing nftables plan: %s: table not planned before it: %w", o.Describe(), ErrUnknownOp)
			}
			s := &nftables.Set{Table: t, Name: o.Name, ID: o.ID, Interval: o.Interval, HasTimeout: o.Timeout, KeyType: nftables.TypeIPAddr}
			if err := c.AddSet(s, SetElements(o)); err != nil {
				return fmt.Errorf("queueing nftables plan: %s: %w", o.Describe(), err)
			}
			sets[o.Name] = s
		case AddRule:
			ch, ok := chains[key(o.Family, o.Chain)]
			if !ok {
				return fmt.Errorf("queueing nftables plan: %s: chain not planned before it: %w", o.Describe(), ErrUnknownOp)
			}
			for _, e := range o.Exprs {
				switch e := e.(type) {
				case *expr.Lookup:
					if s, ok := sets[e.SetName]; !ok || s.ID != e.SetID {
						return fmt.Errorf("queueing nftables plan: %s: set %q not planned before it: %w", o.Describe(), e.SetName, ErrUnknownOp)
					}
				case *expr.Verdict:
					if e.Kind == expr.VerdictGoto && !regular[key(o.Family, e.Chain)] {
						return fmt.Errorf("queueing nftables plan: %s: regular chain %q not planned before it: %w", o.Describe(), e.Chain, ErrUnknownOp)
					}
				}
			}
			c.AddRule(&nftables.Rule{Table: ch.Table, Chain: ch, Exprs: o.Exprs,
				UserData: userdata.AppendString(nil, userdata.TypeComment, o.Comment)})
		}
	}
	return nil
}
