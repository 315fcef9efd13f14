package kube

import (
	"fmt"
	"net/netip"
	"slices"

	"lazaret.dev/pkg/netpolicy"
)

// A NetworkPolicy admits a packet when any egress rule admits it: the
// destination lies in one of the rule's peers (an ipBlock's cidr and none
// of its except blocks) and its protocol and port match one of the rule's
// ports. Lazaret's decision procedure (netpolicy.Decider) is ordered
// instead: structural ranges drop, DNS goes only to the resolvers, then
// the longest matching prefix rule decides and the default denies.
//
// EgressRules turns the one into the other exactly for TCP and UDP to
// ports 1 to 65535:
//
//   - Every allow rule becomes one ipBlock: its network, except every rule
//     network nested in it with no rule between the two (whatever its
//     action: a nested allow rule is its own block, a nested deny rule is
//     a hole) and every structural range inside it. An address in the
//     block and in none of the exceptions has this rule as its longest
//     match, so the block holds exactly the addresses the rule decides.
//     An allow rule inside a structural range has no block.
//   - Those blocks are admitted on every port but 53; DNS (TCP and UDP
//     port 53) is admitted to each resolver's /32 only, as the decider
//     allows DNS to a resolver whatever the prefix rules say and to
//     nothing else.
//
// What a NetworkPolicy cannot say: a rule with ports admits no ICMP, and a
// rule without ports would admit port 53 everywhere its blocks reach; the
// rendering keeps DNS exact and admits no ICMP (the local path carries
// only TCP and UDP past the sandbox's own namespace, through slirp4netns,
// so nothing that worked locally is lost). The host's own addresses,
// which the decider drops per host, are not known to a cluster: a
// node's addresses are normally in RFC 1918, which every policy denies.

// dnsPort is netpolicy.DNSPort as a NetworkPolicy port.
const dnsPort = int32(netpolicy.DNSPort)

// Protocols the rendering admits.
const (
	protoTCP = "TCP"
	protoUDP = "UDP"
)

// AllowedBlocks are the ipBlocks of the policy's allowed addresses (see
// EgressRules), sorted by network.
func AllowedBlocks(p *netpolicy.DerivedNetworkPolicy) ([]IPBlock, error) {
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("converting the network policy: %w", err)
	}
	var nets []netip.Prefix
	allow := map[netip.Prefix]bool{}
	for _, r := range p.PrefixRules {
		if r.Family != netpolicy.IPv4 {
			continue
		}
		nets = append(nets, r.Network)
		allow[r.Network] = r.Action == netpolicy.Allow
	}
	for _, d := range p.DefaultActions {
		zero := netip.PrefixFrom(netip.IPv4Unspecified(), 0)
		if d.Family == netpolicy.IPv4 && d.Action == netpolicy.Allow {
			if _, ok := allow[zero]; !ok {
				nets = append(nets, zero)
				allow[zero] = true
			}
		}
	}
	slices.SortFunc(nets, comparePrefix)
	var out []IPBlock
	for _, n := range nets {
		if !allow[n] || insideStructural(n) {
			continue
		}
		var holes []netip.Prefix
		for _, m := range nets {
			if m != n && contains(n, m) {
				holes = append(holes, m)
			}
		}
		for _, s := range netpolicy.Structural {
			if s.Prefix != n && contains(n, s.Prefix) {
				holes = append(holes, s.Prefix)
			}
		}
		b := IPBlock{CIDR: n.String()}
		for _, h := range maximal(holes) {
			b.Except = append(b.Except, h.String())
		}
		out = append(out, b)
	}
	return out, nil
}

// EgressRules converts the policy's IPv4 decisions into NetworkPolicy
// egress rules (see the comment above AllowedBlocks). An empty result
// admits nothing.
func EgressRules(p *netpolicy.DerivedNetworkPolicy) ([]EgressRule, error) {
	blocks, err := AllowedBlocks(p)
	if err != nil {
		return nil, err
	}
	var rules []EgressRule
	if len(blocks) > 0 {
		r := EgressRule{}
		for _, proto := range []string{protoTCP, protoUDP} {
			r.Ports = append(r.Ports,
				NetworkPolicyPort{Protocol: proto, Port: 1, EndPort: ptr(dnsPort - 1)},
				NetworkPolicyPort{Protocol: proto, Port: dnsPort + 1, EndPort: ptr(int32(65535))})
		}
		for i := range blocks {
			r.To = append(r.To, NetworkPolicyPeer{IPBlock: &blocks[i]})
		}
		rules = append(rules, r)
	}
	var dns EgressRule
	for _, res := range p.Resolvers {
		if res.Family != netpolicy.IPv4 || insideStructural(netip.PrefixFrom(res.Address, 32)) {
			continue
		}
		dns.To = append(dns.To, NetworkPolicyPeer{IPBlock: &IPBlock{CIDR: netip.PrefixFrom(res.Address, 32).String()}})
	}
	if len(dns.To) > 0 {
		dns.Ports = []NetworkPolicyPort{{Protocol: protoTCP, Port: dnsPort}, {Protocol: protoUDP, Port: dnsPort}}
		rules = append(rules, dns)
	}
	return rules, nil
}

// contains reports whether the network outer holds inner entirely.
func contains(outer, inner netip.Prefix) bool {
	return outer.Bits() <= inner.Bits() && outer.Contains(inner.Addr())
}

func insideStructural(n netip.Prefix) bool {
	for _, s := range netpolicy.Structural {
		if contains(s.Prefix, n) {
			return true
		}
	}
	return false
}

// maximal keeps the prefixes that no other one of the list contains,
// sorted and distinct.
func maximal(ps []netip.Prefix) []netip.Prefix {
	slices.SortFunc(ps, comparePrefix)
	ps = slices.Compact(ps)
	var out []netip.Prefix
	for _, p := range ps {
		// Sorted by address then length, a container comes before
		// everything it contains, so only the last kept one can hold p.
		if len(out) > 0 && contains(out[len(out)-1], p) {
			continue
		}
		out = append(out, p)
	}
	return out
}

func comparePrefix(a, b netip.Prefix) int {
	if c := a.Addr().Compare(b.Addr()); c != 0 {
		return c
	}
	return a.Bits() - b.Bits()
}

func ptr[T any](v T) *T { return &v }
