package nftplan

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"

	"lazaret.dev/pkg/netpolicy"
)

// TableName is the name of both Lazaret tables (ip and ip6).
const TableName = "lazaret"

// Chain names.
const (
	ChainForward     = "forward"
	ChainInput       = "input"
	ChainOutput      = "output"
	ChainPostrouting = "postrouting"
	// ChainDeny is the regular chain every sandbox packet the policy
	// denies goes to: the one place where the deny verdict is reached.
	ChainDeny = "deny"
)

// Set names.
const (
	SetStructural = "structural"
	SetHost       = "host"
	SetResolver   = "resolver"
	SetAllowed    = "allowed"
	// SetDenied holds the addresses a Deny prefix is the longest match
	// of; only a policy with names has it, so that no pinned address can
	// reopen them.
	SetDenied = "denied"
	// SetPinned holds the addresses the pinning resolver learned from
	// allowed names, each with a timeout; the plan holds no element.
	SetPinned = "pinned"
)

// allowedLimit is the first address of 224.0.0.0/4; everything from here
// up is structural and dropped before @allowed is consulted.
var allowedLimit = netip.AddrFrom4([4]byte{224, 0, 0, 0})

// Config is what the planner needs besides the policy.
type Config struct {
	// SandboxInterface is the enforcement namespace's end of the veth pair
	// to the sandbox namespace.
	SandboxInterface string
	// UpstreamInterface is the interface toward the connectivity helper
	// (the slirp4netns tap). It need not exist when the plan is installed:
	// interfaces are matched by name.
	UpstreamInterface string
	// HostAddresses are the host's own addresses; IPv4 ones are dropped.
	// IPv6 ones need no rule because IPv6 is dropped entirely.
	HostAddresses []netip.Addr
	// PinningResolver is the enforcement end's address, where the pinning
	// resolver listens on port 53 for the sandbox. Required, and used,
	// only when the policy has names.
	PinningResolver netip.Addr
	// RelayFrom and RelayTo, when both set, are the sandbox's address and
	// the enforcement end's: the input chain then accepts the replies of
	// connections the enforcement namespace itself opened to the sandbox
	// (the port relay, docs/NETWORK.md "Port publishing"), and nothing
	// else more than without them.
	RelayFrom, RelayTo netip.Addr
}

// Op is one planned nftables operation. The set of kinds is closed:
// AddTable, AddChain, AddSet and AddRule.
type Op interface {
	// Describe names the operation for logs and errors.
	Describe() string
	isOp()
}

// AddTable creates a table; it fails if the table exists.
type AddTable struct {
	Family nftables.TableFamily
	Name   string
}

// AddChain creates a chain: a base chain attached to a hook, or, when
// Regular is set, a regular chain that only a goto or jump reaches and
// that has no type, hook, priority or policy.
type AddChain struct {
	Family   nftables.TableFamily
	Table    string
	Name     string
	Regular  bool
	Type     nftables.ChainType
	Hook     nftables.ChainHook
	Priority nftables.ChainPriority
	Policy   nftables.ChainPolicy
}

// AddSet creates a named set of IPv4 addresses with its elements. An
// interval set holds Ranges; a plain set holds single addresses, each a
// Range with First == Last.
type AddSet struct {
	Family   nftables.TableFamily
	Table    string
	Name     string
	ID       uint32
	Interval bool
	Ranges   []Range
	// Timeout marks a set filled at run time, each element with its own
	// timeout. It is never an interval set and the plan holds no element.
	Timeout bool
}

// AddRule appends a rule to a chain. Comment is stored as the rule's user
// data, as `nft` stores comments.
type AddRule struct {
	Family  nftables.TableFamily
	Table   string
	Chain   string
	Comment string
	Exprs   []expr.Any
}

func (AddTable) isOp() {}
func (AddChain) isOp() {}
func (AddSet) isOp()   {}
func (AddRule) isOp()  {}

func familyName(f nftables.TableFamily) string {
	switch f {
	case nftables.TableFamilyIPv4:
		return "ip"
	case nftables.TableFamilyIPv6:
		return "ip6"
	}
	return fmt.Sprintf("family(%d)", uint8(f))
}

func (o AddTable) Describe() string { return "add table " + familyName(o.Family) + " " + o.Name }
func (o AddChain) Describe() string {
	return "add chain " + familyName(o.Family) + " " + o.Table + " " + o.Name
}
func (o AddSet) Describe() string {
	return fmt.Sprintf("add set %s %s %s (%d elements)", familyName(o.Family), o.Table, o.Name, len(o.Ranges))
}
func (o AddRule) Describe() string {
	return fmt.Sprintf("add rule %s %s %s (%s)", familyName(o.Family), o.Table, o.Chain, o.Comment)
}

// Plan is the complete ruleset for one policy on one host.
type Plan struct {
	Config Config
	// Allowed is the content of @allowed: the flattened longest-prefix
	// allow ranges below 224.0.0.0.
	Allowed []Range
	Ops     []Op
}

// Rules returns the AddRule operations of one chain in order.
func (p *Plan) Rules(family nftables.TableFamily, chain string) []AddRule {
	var out []AddRule
	for _, op := range p.Ops {
		if r, ok := op.(AddRule); ok && r.Family == family && r.Chain == chain {
			out = append(out, r)
		}
	}
	return out
}

// HasNames reports whether the plan has the pinned set of a policy with
// names.
func (p *Plan) HasNames() bool {
	_, ok := p.Sets()[SetPinned]
	return ok
}

// Sets returns the AddSet operations by name.
func (p *Plan) Sets() map[string]AddSet {
	out := make(map[string]AddSet)
	for _, op := range p.Ops {
		if s, ok := op.(AddSet); ok {
			out[s.Name] = s
		}
	}
	return out
}

// CheckInterfaceName reports whether name is a plain interface name.
func CheckInterfaceName(name string) error {
	if len(name) == 0 || len(name) >= unix.IFNAMSIZ {
		return ErrInterfaceName
	}
	for _, c := range []byte(name) {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.'
		if !ok {
			return ErrInterfaceName
		}
	}
	if name == "." || name == ".." {
		return ErrInterfaceName
	}
	return nil
}

// New plans the ruleset for p. The policy must be valid and have IPv6
// disabled, as v1 requires.
func New(p *netpolicy.DerivedNetworkPolicy, cfg Config) (*Plan, error) {
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("planning nftables ruleset: %w", err)
	}
	for _, af := range p.AddressFamilies {
		if af.Family == netpolicy.IPv6 && af.Disposition != netpolicy.Disabled {
			return nil, fmt.Errorf("planning nftables ruleset: address_families: IPv6 must be disabled in v1")
		}
	}
	if err := CheckInterfaceName(cfg.SandboxInterface); err != nil {
		return nil, fmt.Errorf("planning nftables ruleset: sandbox interface %q: %w", cfg.SandboxInterface, err)
	}
	if err := CheckInterfaceName(cfg.UpstreamInterface); err != nil {
		return nil, fmt.Errorf("planning nftables ruleset: upstream interface %q: %w", cfg.UpstreamInterface, err)
	}
	if cfg.SandboxInterface == cfg.UpstreamInterface {
		return nil, fmt.Errorf("planning nftables ruleset: interface %q: %w", cfg.SandboxInterface, ErrSameInterface)
	}
	allowed, err := Flatten(p.PrefixRules, allowedLimit)
	if err != nil {
		return nil, fmt.Errorf("planning nftables ruleset: %w", err)
	}
	var denied []Range
	if p.HasNames() {
		if denied, err = FlattenDenied(p.PrefixRules, allowedLimit); err != nil {
			return nil, fmt.Errorf("planning nftables ruleset: %w", err)
		}
		if a := cfg.PinningResolver; !a.Is4() || a.IsUnspecified() {
			return nil, fmt.Errorf("planning nftables ruleset: pinning resolver %v: %w", a, ErrNotIPv4)
		}
	}
	relay := cfg.RelayFrom.IsValid() || cfg.RelayTo.IsValid()
	if relay {
		for _, a := range []netip.Addr{cfg.RelayFrom, cfg.RelayTo} {
			if !a.Is4() || a.IsUnspecified() {
				return nil, fmt.Errorf("planning nftables ruleset: relay address %v: %w", a, ErrNotIPv4)
			}
		}
	}

	var hosts []netip.Addr
	for i, a := range cfg.HostAddresses {
		if !a.IsValid() {
			return nil, fmt.Errorf("planning nftables ruleset: host_addresses[%d]: %w", i, ErrNotIPv4)
		}
		if a = a.Unmap(); a.Is4() {
			hosts = append(hosts, a)
		}
	}
	slices.SortFunc(hosts, netip.Addr.Compare)
	hosts = slices.Compact(hosts)
	var resolvers []netip.Addr
	for _, r := range p.Resolvers {
		if r.Family == netpolicy.IPv4 {
			resolvers = append(resolvers, r.Address)
		}
	}

	var structural []netip.Prefix
	for _, s := range netpolicy.Structural {
		structural = append(structural, s.Prefix)
	}

	v4, v6 := nftables.TableFamilyIPv4, nftables.TableFamilyIPv6
	plan := &Plan{Config: cfg, Allowed: allowed}
	add := func(op Op) { plan.Ops = append(plan.Ops, op) }

	add(AddTable{Family: v4, Name: TableName})
	add(AddChain{Family: v4, Table: TableName, Name: ChainForward, Type: nftables.ChainTypeFilter,
		Hook: *nftables.ChainHookForward, Priority: *nftables.ChainPriorityFilter, Policy: nftables.ChainPolicyDrop})
	add(AddChain{Family: v4, Table: TableName, Name: ChainInput, Type: nftables.ChainTypeFilter,
		Hook: *nftables.ChainHookInput, Priority: *nftables.ChainPriorityFilter, Policy: nftables.ChainPolicyDrop})
	add(AddChain{Family: v4, Table: TableName, Name: ChainPostrouting, Type: nftables.ChainTypeNAT,
		Hook: *nftables.ChainHookPostrouting, Priority: *nftables.ChainPriorityNATSource, Policy: nftables.ChainPolicyAccept})
	add(AddChain{Family: v4, Table: TableName, Name: ChainDeny, Regular: true})
	add(AddSet{Family: v4, Table: TableName, Name: SetStructural, ID: 1, Interval: true, Ranges: spansToRanges(mergePrefixes(structural))})
	add(AddSet{Family: v4, Table: TableName, Name: SetHost, ID: 2, Ranges: singles(hosts)})
	add(AddSet{Family: v4, Table: TableName, Name: SetResolver, ID: 3, Ranges: singles(resolvers)})
	add(AddSet{Family: v4, Table: TableName, Name: SetAllowed, ID: 4, Interval: true, Ranges: allowed})
	if p.HasNames() {
		add(AddSet{Family: v4, Table: TableName, Name: SetDenied, ID: 5, Interval: true, Ranges: denied})
		add(AddSet{Family: v4, Table: TableName, Name: SetPinned, ID: 6, Timeout: true})
	}

	fwd := func(comment string, ex ...expr.Any) {
		add(AddRule{Family: v4, Table: TableName, Chain: ChainForward, Comment: comment, Exprs: ex})
	}
	fwd("return traffic", append(ctEstablished(), accept())...)
	fwd("only from the sandbox", ifname(expr.MetaKeyIIFNAME, cfg.SandboxInterface, false, drop())...)
	fwd("only to the upstream", ifname(expr.MetaKeyOIFNAME, cfg.UpstreamInterface, false, gotoDeny())...)
	fwd("structural ranges", lookupDaddr(SetStructural, 1, gotoDeny())...)
	fwd("host addresses", lookupDaddr(SetHost, 2, gotoDeny())...)
	for _, proto := range []byte{unix.IPPROTO_TCP, unix.IPPROTO_UDP} {
		fwd("dns to resolvers", append(dnsMatch(proto), lookupDaddr(SetResolver, 3, accept())...)...)
	}
	for _, proto := range []byte{unix.IPPROTO_TCP, unix.IPPROTO_UDP} {
		fwd("dns elsewhere", append(dnsMatch(proto), gotoDeny())...)
	}
	fwd("longest prefix allow", lookupDaddr(SetAllowed, 4, accept())...)
	if p.HasNames() {
		// Denies win: an address a Deny prefix covers is refused before
		// the pinned set is consulted, whatever the resolver pinned.
		fwd("longest prefix deny", lookupDaddr(SetDenied, 5, gotoDeny())...)
		fwd("pinned by name", lookupDaddr(SetPinned, 6, accept())...)
	}
	fwd("default deny", gotoDeny())

	in := func(comment string, ex ...expr.Any) {
		add(AddRule{Family: v4, Table: TableName, Chain: ChainInput, Comment: comment, Exprs: ex})
	}
	if p.HasNames() {
		for _, proto := range []byte{unix.IPPROTO_TCP, unix.IPPROTO_UDP} {
			ex := append(ifnameIs(expr.MetaKeyIIFNAME, cfg.SandboxInterface), dnsMatch(proto)...)
			in("dns to the pinning resolver", append(ex, daddrIs(cfg.PinningResolver, accept())...)...)
		}
		// The credential broker listens on the enforcement end, where
		// the pinning resolver sends the sandbox for brokered names.
		for _, port := range p.BrokeredPorts() {
			ex := append(ifnameIs(expr.MetaKeyIIFNAME, cfg.SandboxInterface), tcpDportIs(port)...)
			in(fmt.Sprintf("tcp to the credential broker port %d", port), append(ex, daddrIs(cfg.PinningResolver, accept())...)...)
		}
	}
	if relay {
		// A reply-direction packet belongs to a connection whose first
		// packet this namespace sent: the relay's connect to the
		// sandbox. The addresses keep the sandbox from answering, with
		// a forged source, any other connection this namespace opened
		// (the pinning resolver's upstream queries).
		ex := append(ifnameIs(expr.MetaKeyIIFNAME, cfg.SandboxInterface), saddrIs(cfg.RelayFrom)...)
		ex = append(ex, daddrIs(cfg.RelayTo, nil)[:2]...)
		ex = append(ex, ctReply()...)
		in("replies to the port relay", append(append(ex, ctEstablished()...), accept())...)
	}
	in("nothing from the sandbox", ifname(expr.MetaKeyIIFNAME, cfg.SandboxInterface, true, gotoDeny())...)
	in("loopback", ifname(expr.MetaKeyIIFNAME, "lo", true, accept())...)
	in("return traffic", append(ctEstablished(), accept())...)

	add(AddRule{Family: v4, Table: TableName, Chain: ChainDeny, Comment: "denied by the policy", Exprs: []expr.Any{drop()}})

	add(AddRule{Family: v4, Table: TableName, Chain: ChainPostrouting, Comment: "masquerade upstream",
		Exprs: ifname(expr.MetaKeyOIFNAME, cfg.UpstreamInterface, true, &expr.Masq{})})

	add(AddTable{Family: v6, Name: TableName})
	for _, c := range []struct {
		name string
		hook nftables.ChainHook
	}{
		{ChainInput, *nftables.ChainHookInput},
		{ChainForward, *nftables.ChainHookForward},
		{ChainOutput, *nftables.ChainHookOutput},
	} {
		add(AddChain{Family: v6, Table: TableName, Name: c.name, Type: nftables.ChainTypeFilter,
			Hook: c.hook, Priority: *nftables.ChainPriorityFilter, Policy: nftables.ChainPolicyDrop})
	}
	return plan, nil
}

func singles(addrs []netip.Addr) []Range {
	out := make([]Range, len(addrs))
	for i, a := range addrs {
		out[i] = Range{First: a, Last: a}
	}
	return out
}

func spansToRanges(spans []span) []Range {
	out := make([]Range, len(spans))
	for i, s := range spans {
		out[i] = Range{First: addr(uint32(s.lo)), Last: addr(uint32(s.hi - 1))}
	}
	return out
}

func accept() expr.Any { return &expr.Verdict{Kind: expr.VerdictAccept} }
func drop() expr.Any   { return &expr.Verdict{Kind: expr.VerdictDrop} }

// gotoDeny sends a packet the policy denies to the deny chain. A goto,
// not a jump: when the deny chain ends without a verdict, the calling
// base chain's policy (drop) applies, not the rest of the calling chain.
func gotoDeny() expr.Any { return &expr.Verdict{Kind: expr.VerdictGoto, Chain: ChainDeny} }

// ctEstablished matches ct state established,related. The state is a
// host-endian bit mask.
func ctEstablished() []expr.Any {
	mask := binary.NativeEndian.AppendUint32(nil, expr.CtStateBitESTABLISHED|expr.CtStateBitRELATED)
	return []expr.Any{
		&expr.Ct{Register: 1, Key: expr.CtKeySTATE},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: mask, Xor: make([]byte, 4)},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: make([]byte, 4)},
	}
}

// ifnameBytes pads an interface name to IFNAMSIZ, as the kernel stores it,
// so that the comparison is exact.
func ifnameBytes(name string) []byte {
	b := make([]byte, unix.IFNAMSIZ)
	copy(b, name)
	return b
}

// ifnameIs matches an interface name exactly.
func ifnameIs(key expr.MetaKey, name string) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: key, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: ifnameBytes(name)},
	}
}

func ifname(key expr.MetaKey, name string, equal bool, verdict expr.Any) []expr.Any {
	op := expr.CmpOpNeq
	if equal {
		op = expr.CmpOpEq
	}
	return []expr.Any{
		&expr.Meta{Key: key, Register: 1},
		&expr.Cmp{Op: op, Register: 1, Data: ifnameBytes(name)},
		verdict,
	}
}

func lookupDaddr(set string, id uint32, verdict expr.Any) []expr.Any {
	return []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 16, Len: 4},
		&expr.Lookup{SourceRegister: 1, SetName: set, SetID: id},
		verdict,
	}
}

func dnsMatch(proto byte) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{proto}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binary.BigEndian.AppendUint16(nil, netpolicy.DNSPort)},
	}
}

// tcpDportIs matches TCP to one destination port.
func tcpDportIs(port uint16) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_TCP}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binary.BigEndian.AppendUint16(nil, port)},
	}
}

// daddrIs matches one IPv4 destination address.
// saddrIs matches the IPv4 source address a.
func saddrIs(a netip.Addr) []expr.Any {
	b := a.As4()
	return []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 12, Len: 4},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: b[:]},
	}
}

// ctDirReply is IP_CT_DIR_REPLY, the one-byte value of `ct direction`.
const ctDirReply = 1

// ctReply matches a packet in the reply direction of its connection.
func ctReply() []expr.Any {
	return []expr.Any{
		&expr.Ct{Register: 1, Key: expr.CtKeyDIRECTION},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{ctDirReply}},
	}
}

func daddrIs(a netip.Addr, verdict expr.Any) []expr.Any {
	b := a.As4()
	return []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 16, Len: 4},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: b[:]},
		verdict,
	}
}
