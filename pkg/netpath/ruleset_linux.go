package netpath

import (
	"bytes"
	"cmp"
	"fmt"
	"os"
	"slices"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"

	"lazaret.dev/pkg/nftplan"
)

func nftConn(ns *os.File) (*nftables.Conn, error) {
	c, err := nftables.New(nftables.WithNetNSFd(int(ns.Fd())))
	if err != nil {
		return nil, fmt.Errorf("opening nftables connection in %q: %w", ns.Name(), err)
	}
	return c, nil
}

// Install sends every operation of plan to the network namespace ns as one
// nftables batch. The kernel applies a batch entirely or not at all, and
// the plan creates its tables exclusively, so a namespace that already has
// a lazaret table is left untouched and Install fails.
func Install(ns *os.File, plan *nftplan.Plan) error {
	c, err := nftConn(ns)
	if err != nil {
		return err
	}
	if err := plan.Queue(c); err != nil {
		return err
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("installing nftables ruleset in %q: %w", ns.Name(), err)
	}
	return nil
}

type chainKey struct {
	family  nftables.TableFamily
	table   string
	name    string
	typ     nftables.ChainType
	hook    nftables.ChainHook
	prio    nftables.ChainPriority
	policy  nftables.ChainPolicy
	hasHook bool
}

func (k chainKey) String() string {
	if !k.hasHook {
		return fmt.Sprintf("%d %s %s regular type %q", k.family, k.table, k.name, k.typ)
	}
	return fmt.Sprintf("%d %s %s type %s hook %d priority %d policy %d", k.family, k.table, k.name, k.typ, k.hook, k.prio, k.policy)
}

// VerifyRuleset reads the ruleset of ns back and compares it with plan:
// exactly the planned tables, chains with their hooks and policies, sets
// with their elements, and rules with their expressions, in order.
func VerifyRuleset(ns *os.File, plan *nftplan.Plan) error {
	c, err := nftConn(ns)
	if err != nil {
		return err
	}
	var wantTables []string
	var wantChains []chainKey
	for _, op := range plan.Ops {
		switch o := op.(type) {
		case nftplan.AddTable:
			wantTables = append(wantTables, fmt.Sprintf("%d %s", o.Family, o.Name))
		case nftplan.AddChain:
			if o.Regular {
				wantChains = append(wantChains, chainKey{family: o.Family, table: o.Table, name: o.Name})
				continue
			}
			wantChains = append(wantChains, chainKey{o.Family, o.Table, o.Name, o.Type, o.Hook, o.Priority, o.Policy, true})
		}
	}
	tables, err := c.ListTables()
	if err != nil {
		return fmt.Errorf("listing nftables tables: %w", err)
	}
	var gotTables []string
	byFamily := map[nftables.TableFamily]*nftables.Table{}
	for _, t := range tables {
		gotTables = append(gotTables, fmt.Sprintf("%d %s", t.Family, t.Name))
		if t.Name == nftplan.TableName {
			byFamily[t.Family] = t
		}
	}
	slices.Sort(gotTables)
	slices.Sort(wantTables)
	if !slices.Equal(gotTables, wantTables) {
		return &RulesetError{What: "tables", Detail: fmt.Sprintf("have %v, planned %v", gotTables, wantTables)}
	}

	chains, err := c.ListChains()
	if err != nil {
		return fmt.Errorf("listing nftables chains: %w", err)
	}
	var gotChains []chainKey
	chainObj := map[string]*nftables.Chain{}
	for _, ch := range chains {
		k := chainKey{family: ch.Table.Family, table: ch.Table.Name, name: ch.Name, typ: ch.Type}
		if ch.Hooknum != nil && ch.Priority != nil && ch.Policy != nil {
			k.hook, k.prio, k.policy, k.hasHook = *ch.Hooknum, *ch.Priority, *ch.Policy, true
		}
		gotChains = append(gotChains, k)
		chainObj[fmt.Sprintf("%d %s", k.family, k.name)] = ch
	}
	byString := func(a, b chainKey) int { return cmp.Compare(a.String(), b.String()) }
	slices.SortFunc(gotChains, byString)
	slices.SortFunc(wantChains, byString)
	if !slices.Equal(gotChains, wantChains) {
		return &RulesetError{What: "chains", Detail: fmt.Sprintf("have %v, planned %v", gotChains, wantChains)}
	}

	for _, op := range plan.Ops {
		s, ok := op.(nftplan.AddSet)
		if !ok {
			continue
		}
		if err := verifySet(c, byFamily[s.Family], s); err != nil {
			return err
		}
	}
	for _, ck := range wantChains {
		ch := chainObj[fmt.Sprintf("%d %s", ck.family, ck.name)]
		want := plan.Rules(ck.family, ck.name)
		got, err := c.GetRules(ch.Table, ch)
		if err != nil {
			return fmt.Errorf("listing nftables rules of chain %q: %w", ck.name, err)
		}
		if len(got) != len(want) {
			return &RulesetError{What: "chain " + ck.name, Detail: fmt.Sprintf("%d rules, planned %d", len(got), len(want))}
		}
		for i := range want {
			if err := sameExprs(byte(ck.family), got[i].Exprs, want[i].Exprs); err != nil {
				return &RulesetError{What: fmt.Sprintf("chain %s rule %d (%s)", ck.name, i, want[i].Comment), Detail: err.Error()}
			}
		}
	}
	return nil
}

func verifySet(c *nftables.Conn, t *nftables.Table, want nftplan.AddSet) error {
	s, err := c.GetSetByName(t, want.Name)
	if err != nil {
		return fmt.Errorf("reading nftables set %q: %w", want.Name, err)
	}
	if s.Interval != want.Interval || s.HasTimeout != want.Timeout || s.KeyType.Name != nftables.TypeIPAddr.Name {
		return &RulesetError{What: "set " + want.Name, Detail: fmt.Sprintf("interval %v timeout %v key %s, planned interval %v timeout %v key %s",
			s.Interval, s.HasTimeout, s.KeyType.Name, want.Interval, want.Timeout, nftables.TypeIPAddr.Name)}
	}
	els, err := c.GetSetElements(s)
	if err != nil {
		return fmt.Errorf("reading elements of nftables set %q: %w", want.Name, err)
	}
	if want.Timeout {
		// The pinning resolver fills this set at run time; what the
		// plan fixes is that each element is one address that expires.
		for _, e := range els {
			if len(e.Key) != 4 || e.IntervalEnd || e.Timeout <= 0 {
				return &RulesetError{What: "set " + want.Name, Detail: fmt.Sprintf("element %x is not one address with a timeout", e.Key)}
			}
		}
		return nil
	}
	norm := func(es []nftables.SetElement) []string {
		out := make([]string, 0, len(es))
		for _, e := range es {
			out = append(out, fmt.Sprintf("%x/%v", e.Key, e.IntervalEnd))
		}
		slices.Sort(out)
		return out
	}
	got, planned := norm(els), norm(nftplan.SetElements(want))
	if !slices.Equal(got, planned) {
		return &RulesetError{What: "set " + want.Name, Detail: fmt.Sprintf("%d elements differ from the %d planned", len(got), len(planned))}
	}
	return nil
}

// sameExprs compares expressions by their netlink encoding. A lookup is
// compared by set name, source register and inversion: the kernel reports
// the set by name only.
func sameExprs(family byte, got, want []expr.Any) error {
	if len(got) != len(want) {
		return fmt.Errorf("%d expressions, planned %d", len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if wl, ok := w.(*expr.Lookup); ok {
			gl, ok := g.(*expr.Lookup)
			if !ok || gl.SetName != wl.SetName || gl.SourceRegister != wl.SourceRegister || gl.Invert != wl.Invert {
				return fmt.Errorf("expression %d: %T %+v, planned lookup %+v", i, g, g, wl)
			}
			continue
		}
		gb, gerr := expr.Marshal(family, g)
		wb, werr := expr.Marshal(family, w)
		if gerr != nil || werr != nil || !bytes.Equal(gb, wb) {
			return fmt.Errorf("expression %d: %T %+v, planned %T %+v", i, g, g, w, w)
		}
	}
	return nil
}

// TableNames lists the nftables tables of the network namespace ns as
// "<family> <name>", for leak checks: a namespace Lazaret does not own
// never holds a table named nftplan.TableName.
func TableNames(ns *os.File) ([]string, error) {
	c, err := nftConn(ns)
	if err != nil {
		return nil, err
	}
	tables, err := c.ListTables()
	if err != nil {
		return nil, fmt.Errorf("listing nftables tables in %q: %w", ns.Name(), err)
	}
	var out []string
	for _, t := range tables {
		out = append(out, fmt.Sprintf("%d %s", t.Family, t.Name))
	}
	slices.Sort(out)
	return out, nil
}

// InstallProbeRules inserts the readiness probe rules at the head of the
// deny chain of ns as one batch (all or none); plan.QueueProbes re-checks
// each one first. RemoveProbeRules takes them out again.
func InstallProbeRules(ns *os.File, plan *nftplan.Plan, rules []nftplan.AddRule) error {
	if len(rules) == 0 {
		return nil
	}
	c, err := nftConn(ns)
	if err != nil {
		return err
	}
	if err := plan.QueueProbes(c, rules); err != nil {
		return err
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("inserting %d readiness probe rules in %q: %w", len(rules), ns.Name(), err)
	}
	return nil
}

// RemoveProbeRules reads the deny chain of ns back, returns the packets
// counted by every probe rule in it (those that plan.ProbeOf recognizes),
// and deletes those rules by handle in one batch. Any other rule is left
// alone, for VerifyRuleset to report.
func RemoveProbeRules(ns *os.File, plan *nftplan.Plan) (map[nftplan.DeniedProbe]uint64, error) {
	c, err := nftConn(ns)
	if err != nil {
		return nil, err
	}
	table := &nftables.Table{Family: nftables.TableFamilyIPv4, Name: nftplan.TableName}
	chain := &nftables.Chain{Table: table, Name: nftplan.ChainDeny}
	rules, err := c.GetRules(table, chain)
	if err != nil {
		return nil, fmt.Errorf("listing nftables rules of chain %q: %w", nftplan.ChainDeny, err)
	}
	counted := map[nftplan.DeniedProbe]uint64{}
	for _, r := range rules {
		d, packets, ok := plan.ProbeOf(r.Exprs)
		if !ok {
			continue
		}
		counted[d] = packets
		if err := c.DelRule(&nftables.Rule{Table: table, Chain: chain, Handle: r.Handle}); err != nil {
			return nil, fmt.Errorf("deleting readiness probe rule %v: %w", d, err)
		}
	}
	if len(counted) == 0 {
		return counted, nil
	}
	if err := c.Flush(); err != nil {
		return nil, fmt.Errorf("deleting %d readiness probe rules in %q: %w", len(counted), ns.Name(), err)
	}
	return counted, nil
}
