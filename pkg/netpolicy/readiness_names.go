package netpolicy

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strconv"

	"lazaret.dev/pkg/postcard"
)

// RefusalProbeName is the name the readiness proof asks the pinning
// resolver for and must see refused: it lies under the reserved top-level
// domain .invalid (RFC 2606), so no real name is ever refused in its
// place. A policy whose host names would allow it cannot be proven and is
// refused by CheckTargets.
const RefusalProbeName = "refusal-probe.lazaret.invalid"

// MaxHostTargets bounds the readiness hosts.
const MaxHostTargets = 32

// HostTarget is a readiness target reached by name: the name must resolve
// through the pinning resolver, and a TCP handshake to one of its
// addresses on Port must complete or be refused by a host behind the path.
type HostTarget struct {
	Name string
	Port uint16
}

func (t HostTarget) String() string { return t.Name + ":" + strconv.Itoa(int(t.Port)) }

func compareHostTarget(a, b HostTarget) int {
	if c := cmp.Compare(a.Name, b.Name); c != 0 {
		return c
	}
	return cmp.Compare(a.Port, b.Port)
}

// HostObservation records what the readiness proof saw of one host
// target: the addresses the pinning resolver answered (sorted, distinct,
// IPv4; each one pinned when answered), and the address whose handshake
// succeeded, or the zero address when none did.
type HostObservation struct {
	Name              string
	Port              uint16
	ResolvedAddresses []netip.Addr
	Reached           netip.Addr
}

func (o HostObservation) target() HostTarget { return HostTarget{Name: o.Name, Port: o.Port} }

// RefusalObservation records whether the pinning resolver refused a name
// outside the allowlist (RCODE REFUSED, no address).
type RefusalObservation struct {
	Name    string
	Refused bool
}

// NameObservations are the proofs of egress by name in a probe.
type NameObservations struct {
	Hosts   []HostObservation
	Refusal RefusalObservation
}

func (n *NameObservations) validate() error {
	if len(n.Hosts) == 0 {
		return fieldErr("names.hosts", nil, ErrTargetNotProbed)
	}
	for i, o := range n.Hosts {
		if err := CheckHostName(o.Name); err != nil {
			return fieldErr(at("names.hosts", i)+".name", strconv.Quote(o.Name), err)
		}
		if o.Port == 0 {
			return fieldErr(at("names.hosts", i)+".port", o.Port, ErrZeroPort)
		}
		if i > 0 {
			if err := orderErr(compareHostTarget(n.Hosts[i-1].target(), o.target())); err != nil {
				return fieldErr(at("names.hosts", i), o.target(), err)
			}
		}
		for j, a := range o.ResolvedAddresses {
			if !a.Is4() {
				return fieldErr(fmt.Sprintf("names.hosts[%d].resolved_addresses[%d]", i, j), a, ErrNotIPv4)
			}
			if j > 0 {
				if err := orderErr(o.ResolvedAddresses[j-1].Compare(a)); err != nil {
					return fieldErr(fmt.Sprintf("names.hosts[%d].resolved_addresses[%d]", i, j), a, err)
				}
			}
		}
		if o.Reached.IsValid() && !slices.Contains(o.ResolvedAddresses, o.Reached) {
			return fieldErr(at("names.hosts", i)+".reached", o.Reached, ErrTargetNotConfigured)
		}
	}
	if err := CheckHostName(n.Refusal.Name); err != nil {
		return fieldErr("names.refusal.name", strconv.Quote(n.Refusal.Name), err)
	}
	return nil
}

// judge reports the first proof that failed.
func (n *NameObservations) judge() error {
	for _, o := range n.Hosts {
		if len(o.ResolvedAddresses) == 0 {
			return &TargetError{Kind: TargetHost, Target: o.target().String(), Err: ErrTargetUnresolved}
		}
		if !o.Reached.IsValid() {
			return &TargetError{Kind: TargetHost, Target: o.target().String(), Err: ErrTargetUnreachable}
		}
	}
	if !n.Refusal.Refused {
		return &TargetError{Kind: TargetRefusal, Target: n.Refusal.Name, Err: ErrNameNotRefused}
	}
	return nil
}

// coverage requires exactly the configured hosts and the refusal probe's
// name.
func (n *NameObservations) coverage(hosts []HostTarget) error {
	for _, h := range hosts {
		if _, ok := slices.BinarySearchFunc(n.Hosts, h, func(o HostObservation, k HostTarget) int {
			return compareHostTarget(o.target(), k)
		}); !ok {
			return &TargetError{Kind: TargetHost, Target: h.String(), Err: ErrTargetNotProbed}
		}
	}
	for _, o := range n.Hosts {
		if !slices.Contains(hosts, o.target()) {
			return &TargetError{Kind: TargetHost, Target: o.target().String(), Err: ErrTargetNotConfigured}
		}
	}
	if n.Refusal.Name != RefusalProbeName {
		return &TargetError{Kind: TargetRefusal, Target: n.Refusal.Name, Err: ErrTargetNotConfigured}
	}
	return nil
}

// marshal writes the hosts (name, port as a u16 varint, the resolved
// addresses, then the reached address as an option), then the refusal
// (name, bool).
func (n *NameObservations) marshal(e *postcard.Encoder) {
	e.SeqLen(len(n.Hosts))
	for _, o := range n.Hosts {
		e.String(o.Name)
		e.U16(o.Port)
		e.SeqLen(len(o.ResolvedAddresses))
		for _, a := range o.ResolvedAddresses {
			writeIPv4(e, a)
		}
		e.Bool(o.Reached.IsValid()) // the option's tag
		if o.Reached.IsValid() {
			writeIPv4(e, o.Reached)
		}
	}
	e.String(n.Refusal.Name)
	e.Bool(n.Refusal.Refused)
}

func (n *NameObservations) unmarshal(d *postcard.Decoder) {
	n.Hosts = make([]HostObservation, d.SeqLen(4))
	for i := range n.Hosts {
		o := &n.Hosts[i]
		o.Name = d.String()
		o.Port = d.U16()
		o.ResolvedAddresses = make([]netip.Addr, d.SeqLen(4))
		for j := range o.ResolvedAddresses {
			o.ResolvedAddresses[j] = readIPv4(d)
		}
		if d.Option() {
			o.Reached = readIPv4(d)
		}
		if d.Err() != nil {
			return
		}
	}
	n.Refusal.Name = d.String()
	n.Refusal.Refused = d.Bool()
}

// checkHostTargets is CheckTargets for names: each host must be allowed by
// the name rules, and the refusal probe's name must not be.
func checkHostTargets(p *DerivedNetworkPolicy, hosts []HostTarget) error {
	if !p.HasNames() {
		if len(hosts) > 0 {
			return &TargetError{Kind: TargetHost, Target: hosts[0].String(), Err: ErrNameRefusedByPolicy,
				Detail: "the policy admits no host names"}
		}
		return nil
	}
	if len(hosts) == 0 || len(hosts) > MaxHostTargets {
		return fieldErr("hosts", len(hosts), fmt.Errorf("%w: a policy with names needs 1 to %d readiness hosts", ErrTargetNotProbed, MaxHostTargets))
	}
	for _, h := range hosts {
		if h.Port == 0 {
			return &TargetError{Kind: TargetHost, Target: h.String(), Err: ErrZeroPort}
		}
		if d := p.DecideName(h.Name); !d.Allowed {
			return &TargetError{Kind: TargetHost, Target: h.String(), Detail: d.String(), Err: ErrNameRefusedByPolicy}
		}
	}
	if d := p.DecideName(RefusalProbeName); d.Allowed {
		return &TargetError{Kind: TargetRefusal, Target: RefusalProbeName, Detail: d.String(), Err: ErrTargetAllowed}
	}
	return nil
}
