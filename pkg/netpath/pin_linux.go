package netpath

import (
	"fmt"
	"net/netip"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/google/nftables"

	"lazaret.dev/pkg/nftplan"
)

// Pinner adds addresses learned from allowed names to the plan's pinned
// set, each with a timeout the kernel enforces: when it runs out the
// address is gone from the set, and new connections to it are denied,
// whatever happens to the sidecar's own bookkeeping. Established
// connections are return traffic and live on.
//
// A kernel that re-adds an element replaces its timeout, even with a
// shorter one, so Pinner remembers when each address expires and never
// shortens a pin: two names sharing an address keep it for the longer of
// their lifetimes. Safe for concurrent use.
type Pinner struct {
	ns  *os.File
	set *nftables.Set
	now func() time.Time

	mu      sync.Mutex
	c       *nftables.Conn
	expires map[netip.Addr]time.Time
}

// NewPinner prepares pins into the pinned set of plan, installed in the
// network namespace ns. The plan must have one (its policy has names).
func NewPinner(ns *os.File, plan *nftplan.Plan) (*Pinner, error) {
	o, ok := plan.Sets()[nftplan.SetPinned]
	if !ok || !o.Timeout {
		return nil, fmt.Errorf("pinning addresses: the plan has no %q set (its policy has no names)", nftplan.SetPinned)
	}
	// One lasting netlink socket: opening a socket in another network
	// namespace for every batch costs more than the batch.
	c, err := nftables.New(nftables.WithNetNSFd(int(ns.Fd())), nftables.AsLasting())
	if err != nil {
		return nil, fmt.Errorf("opening nftables connection in %q: %w", ns.Name(), err)
	}
	t := &nftables.Table{Family: o.Family, Name: o.Table}
	return &Pinner{ns: ns, c: c, now: time.Now, expires: map[netip.Addr]time.Time{},
		set: &nftables.Set{Table: t, Name: o.Name, KeyType: nftables.TypeIPAddr, HasTimeout: true}}, nil
}

// Pin admits addrs for ttl from now (or longer, when an address is pinned
// for longer already), in one batch. The kernel has the elements when Pin
// returns. ttl is rounded up to a whole millisecond, the kernel's unit.
func (p *Pinner) Pin(addrs []netip.Addr, ttl time.Duration) error {
	if ttl <= 0 {
		return fmt.Errorf("pinning addresses: timeout %v is not positive", ttl)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	for a, exp := range p.expires {
		if !exp.After(now) {
			delete(p.expires, a)
		}
	}
	els := make([]nftables.SetElement, 0, len(addrs))
	for _, a := range addrs {
		if !a.Is4() {
			return fmt.Errorf("pinning address %v: %w", a, ErrNotIPv4)
		}
		exp := now.Add(ttl)
		if old, ok := p.expires[a]; ok && old.After(exp) {
			continue
		}
		d := exp.Sub(now).Round(time.Millisecond)
		if d < exp.Sub(now) {
			d += time.Millisecond
		}
		k := a.As4()
		els = append(els, nftables.SetElement{Key: k[:], Timeout: d})
		p.expires[a] = exp
	}
	if len(els) == 0 {
		return nil
	}
	if err := p.c.SetAddElements(p.set, els); err != nil {
		return fmt.Errorf("pinning addresses: %w", err)
	}
	if err := p.c.Flush(); err != nil {
		for _, a := range addrs {
			delete(p.expires, a)
		}
		return fmt.Errorf("pinning addresses in %q: %w", p.ns.Name(), err)
	}
	return nil
}

// Close releases the netlink socket. Pins stay until they expire or the
// namespace ends.
func (p *Pinner) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.c.CloseLasting()
}

// Pin is one pinned address and when its pin runs out.
type Pin struct {
	Address netip.Addr
	Expires time.Time
}

// Pins lists the addresses the kernel holds in the pinned set with the
// time each expires, sorted by address.
func (p *Pinner) Pins() ([]Pin, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s, err := p.c.GetSetByName(p.set.Table, p.set.Name)
	if err != nil {
		return nil, fmt.Errorf("reading the pinned set: %w", err)
	}
	els, err := p.c.GetSetElements(s)
	if err != nil {
		return nil, fmt.Errorf("reading the pinned set's elements: %w", err)
	}
	now := p.now()
	out := make([]Pin, 0, len(els))
	for _, e := range els {
		a, ok := netip.AddrFromSlice(e.Key)
		if !ok {
			continue
		}
		out = append(out, Pin{Address: a, Expires: now.Add(e.Expires)})
	}
	slices.SortFunc(out, func(a, b Pin) int { return a.Address.Compare(b.Address) })
	return out, nil
}
