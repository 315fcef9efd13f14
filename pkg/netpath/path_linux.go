package netpath

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"slices"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"lazaret.dev/pkg/hostid"
	"lazaret.dev/pkg/nftplan"
)

// Default names and addresses of the veth pair.
const (
	DefaultSandboxInterface = "lz-sbx0"
	DefaultPeerInterface    = "eth0"
)

// DefaultLink is the veth pair's network: the enforcement end takes the
// first address, the sandbox end the second. It lies in 10.0.0.0/8, which
// every v1 policy denies, and the enforcement end's input chain drops
// everything from the sandbox, so neither address is a way out.
var DefaultLink = netip.MustParsePrefix("10.255.255.0/30")

// LinkMTU is the veth pair's MTU: the connectivity helper's (slirp4netns
// --mtu=65520), so that a segment crosses the enforcement namespace as
// large as the helper takes it. With the veth default of 1500 the sandbox
// sends over forty times as many packets through the ruleset and the
// helper for the same bytes.
const LinkMTU = 65520

// Config describes the enforcement path around a plan.
type Config struct {
	// SandboxInterface is the enforcement end of the veth pair; it must be
	// the plan's sandbox interface.
	SandboxInterface string
	// PeerInterface is the sandbox end's name inside the sandbox
	// namespace.
	PeerInterface string
	// Link is an IPv4 /30 for the veth pair.
	Link netip.Prefix
}

// WithDefaults fills unset fields.
func (c Config) WithDefaults() Config {
	if c.SandboxInterface == "" {
		c.SandboxInterface = DefaultSandboxInterface
	}
	if c.PeerInterface == "" {
		c.PeerInterface = DefaultPeerInterface
	}
	if !c.Link.IsValid() {
		c.Link = DefaultLink
	}
	return c
}

// Gateway is the enforcement end's address.
func (c Config) Gateway() netip.Addr { return c.Link.Masked().Addr().Next() }

// SandboxAddress is the sandbox end's address.
func (c Config) SandboxAddress() netip.Addr { return c.Gateway().Next() }

// Path is a built enforcement path. Close releases its descriptors; the
// sandbox namespace ends when no other process holds it.
type Path struct {
	Config      Config
	Plan        *nftplan.Plan
	Enforcement *os.File
	Sandbox     *os.File
	// EnforcementID and SandboxID are the nsfs identities of the two
	// namespaces.
	EnforcementID hostid.NamespaceIdentity
	SandboxID     hostid.NamespaceIdentity
}

// Close releases the sandbox namespace descriptor. The enforcement
// namespace descriptor belongs to the caller.
func (p *Path) Close() error { return p.Sandbox.Close() }

func handleAt(ns *os.File) (*netlink.Handle, error) {
	h, err := netlink.NewHandleAt(netns.NsHandle(int(ns.Fd())), unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("opening rtnetlink in %q: %w", ns.Name(), err)
	}
	return h, nil
}

// Build turns the network namespace enforcement into an enforcement path
// for plan, in this order: IPv6 off in the namespace; the ruleset
// installed in one batch and read back; forwarding on; a new sandbox
// namespace with IPv6 off; the veth pair, its addresses, and the sandbox's
// default route through the enforcement end. Packets can cross only after
// the ruleset is in place. The upstream interface (the connectivity
// helper's) is attached later; see WaitUpstream.
func Build(log *slog.Logger, enforcement *os.File, plan *nftplan.Plan, cfg Config) (_ *Path, err error) {
	cfg = cfg.WithDefaults()
	if !cfg.Link.Addr().Is4() || cfg.Link.Bits() != 30 || cfg.Link != cfg.Link.Masked() {
		return nil, fmt.Errorf("building enforcement path: link %v: %w", cfg.Link, ErrBadLink)
	}
	if cfg.SandboxInterface != plan.Config.SandboxInterface {
		return nil, fmt.Errorf("building enforcement path: sandbox interface %q, plan has %q: %w",
			cfg.SandboxInterface, plan.Config.SandboxInterface, nftplan.ErrInterfaceName)
	}
	if err := nftplan.CheckInterfaceName(cfg.PeerInterface); err != nil {
		return nil, fmt.Errorf("building enforcement path: peer interface %q: %w", cfg.PeerInterface, err)
	}
	enfID, err := hostid.NamespaceOf(int(enforcement.Fd()))
	if err != nil {
		return nil, fmt.Errorf("building enforcement path: enforcement namespace: %w", err)
	}

	for _, key := range []string{"net/ipv6/conf/all/disable_ipv6", "net/ipv6/conf/default/disable_ipv6"} {
		if err := Sysctl(enforcement, key, "1"); err != nil {
			return nil, fmt.Errorf("building enforcement path: %w", err)
		}
	}
	log.Info("installing nftables ruleset", "namespace", enfID, "operations", len(plan.Ops), "allowed_ranges", len(plan.Allowed))
	if err := Install(enforcement, plan); err != nil {
		return nil, fmt.Errorf("building enforcement path: %w", err)
	}
	if err := VerifyRuleset(enforcement, plan); err != nil {
		return nil, fmt.Errorf("building enforcement path: %w", err)
	}
	if err := Sysctl(enforcement, "net/ipv4/ip_forward", "1"); err != nil {
		return nil, fmt.Errorf("building enforcement path: %w", err)
	}

	sandbox, err := NewNetNS()
	if err != nil {
		return nil, fmt.Errorf("building enforcement path: %w", err)
	}
	defer func() {
		if err != nil {
			sandbox.Close()
		}
	}()
	sbxID, err := hostid.NamespaceOf(int(sandbox.Fd()))
	if err != nil {
		return nil, fmt.Errorf("building enforcement path: sandbox namespace: %w", err)
	}
	for _, key := range []string{"net/ipv6/conf/all/disable_ipv6", "net/ipv6/conf/default/disable_ipv6"} {
		if err := Sysctl(sandbox, key, "1"); err != nil {
			return nil, fmt.Errorf("building enforcement path: sandbox: %w", err)
		}
	}

	eh, err := handleAt(enforcement)
	if err != nil {
		return nil, fmt.Errorf("building enforcement path: %w", err)
	}
	defer eh.Close()
	sh, err := handleAt(sandbox)
	if err != nil {
		return nil, fmt.Errorf("building enforcement path: %w", err)
	}
	defer sh.Close()

	for _, h := range []*netlink.Handle{eh, sh} {
		lo, err := h.LinkByName("lo")
		if err == nil {
			err = h.LinkSetUp(lo)
		}
		if err != nil {
			return nil, fmt.Errorf("building enforcement path: loopback: %w", err)
		}
	}
	veth := &netlink.Veth{
		LinkAttrs:     netlink.LinkAttrs{Name: cfg.SandboxInterface},
		PeerName:      cfg.PeerInterface,
		PeerNamespace: netlink.NsFd(int(sandbox.Fd())),
	}
	log.Info("creating veth pair", "enforcement_end", cfg.SandboxInterface, "sandbox_end", cfg.PeerInterface, "sandbox_namespace", sbxID)
	if err := eh.LinkAdd(veth); err != nil {
		return nil, fmt.Errorf("building enforcement path: veth %q: %w", cfg.SandboxInterface, err)
	}
	if err := configureEnd(eh, cfg.SandboxInterface, cfg.Gateway(), cfg.Link.Bits()); err != nil {
		return nil, fmt.Errorf("building enforcement path: %w", err)
	}
	if err := configureEnd(sh, cfg.PeerInterface, cfg.SandboxAddress(), cfg.Link.Bits()); err != nil {
		return nil, fmt.Errorf("building enforcement path: sandbox: %w", err)
	}
	peer, err := sh.LinkByName(cfg.PeerInterface)
	if err != nil {
		return nil, fmt.Errorf("building enforcement path: sandbox interface %q: %w", cfg.PeerInterface, err)
	}
	if err := sh.RouteAdd(&netlink.Route{LinkIndex: peer.Attrs().Index, Gw: net.IP(cfg.Gateway().AsSlice())}); err != nil {
		return nil, fmt.Errorf("building enforcement path: sandbox default route via %v: %w", cfg.Gateway(), err)
	}
	return &Path{Config: cfg, Plan: plan, Enforcement: enforcement, Sandbox: sandbox, EnforcementID: enfID, SandboxID: sbxID}, nil
}

func configureEnd(h *netlink.Handle, name string, a netip.Addr, bits int) error {
	l, err := h.LinkByName(name)
	if err != nil {
		return fmt.Errorf("interface %q: %w", name, err)
	}
	ipnet := &net.IPNet{IP: net.IP(a.AsSlice()), Mask: net.CIDRMask(bits, 32)}
	if err := h.AddrAdd(l, &netlink.Addr{IPNet: ipnet}); err != nil {
		return fmt.Errorf("address %v on %q: %w", ipnet, name, err)
	}
	if err := h.LinkSetMTU(l, LinkMTU); err != nil {
		return fmt.Errorf("MTU %d on %q: %w", LinkMTU, name, err)
	}
	if err := h.LinkSetUp(l); err != nil {
		return fmt.Errorf("bringing %q up: %w", name, err)
	}
	return nil
}

// Routes returns the destinations of the sandbox namespace's IPv4 routes
// (main table), sorted and distinct, and checks that each leads through
// the enforcement namespace: it is either the veth link's own network or
// goes by the enforcement end's address over the veth, and the sandbox
// namespace has no interface besides loopback and its veth end. These are
// the readiness attestation's observed routes.
func (p *Path) Routes() ([]netip.Prefix, error) {
	h, err := handleAt(p.Sandbox)
	if err != nil {
		return nil, err
	}
	defer h.Close()
	links, err := h.LinkList()
	if err != nil {
		return nil, fmt.Errorf("listing sandbox interfaces: %w", err)
	}
	peerIndex := 0
	for _, l := range links {
		switch l.Attrs().Name {
		case "lo":
		case p.Config.PeerInterface:
			peerIndex = l.Attrs().Index
		default:
			return nil, fmt.Errorf("sandbox interface %q: %w", l.Attrs().Name, ErrRouteNotAttested)
		}
	}
	routes, err := h.RouteList(nil, unix.AF_INET)
	if err != nil {
		return nil, fmt.Errorf("listing sandbox routes: %w", err)
	}
	var out []netip.Prefix
	for _, r := range routes {
		dst := netip.PrefixFrom(netip.IPv4Unspecified(), 0)
		if r.Dst != nil {
			a, _ := netip.AddrFromSlice(r.Dst.IP.To4())
			ones, _ := r.Dst.Mask.Size()
			dst = netip.PrefixFrom(a, ones)
		}
		gw, _ := netip.AddrFromSlice(r.Gw.To4())
		viaGateway := gw == p.Config.Gateway()
		onLink := !gw.IsValid() && dst == p.Config.Link
		if r.LinkIndex != peerIndex || !(viaGateway || onLink) {
			return nil, fmt.Errorf("sandbox route %v via %v: %w", dst, gw, ErrRouteNotAttested)
		}
		out = append(out, dst)
	}
	slices.SortFunc(out, func(a, b netip.Prefix) int {
		if c := a.Addr().Compare(b.Addr()); c != 0 {
			return c
		}
		return a.Bits() - b.Bits()
	})
	return slices.Compact(out), nil
}

// WaitUpstream waits until the plan's upstream interface exists in the
// enforcement namespace, is up, and carries the default route: the
// connectivity helper has attached. It returns ErrUpstreamNotReady when
// ctx ends first.
func (p *Path) WaitUpstream(ctx context.Context) error {
	name := p.Plan.Config.UpstreamInterface
	h, err := handleAt(p.Enforcement)
	if err != nil {
		return err
	}
	defer h.Close()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		l, err := h.LinkByName(name)
		if err == nil && l.Attrs().Flags&net.FlagUp != 0 {
			routes, rerr := h.RouteList(l, unix.AF_INET)
			if rerr == nil && slices.ContainsFunc(routes, func(r netlink.Route) bool {
				return r.Dst == nil || r.Dst.IP.IsUnspecified()
			}) {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			detail := "no default route through it"
			var nf netlink.LinkNotFoundError
			if errors.As(err, &nf) {
				detail = "no such interface"
			}
			return fmt.Errorf("waiting for upstream interface %q: %s: %w", name, detail, ErrUpstreamNotReady)
		case <-tick.C:
		}
	}
}
