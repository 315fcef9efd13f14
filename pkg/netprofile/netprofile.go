// Package netprofile derives the network policy and readiness targets of
// a resolved configuration. It is its own package so that the network
// sidecar, which only decodes policies, does not link the configuration
// parser.
package netprofile

import (
	"fmt"
	"net/netip"
	"slices"

	"lazaret.dev/pkg/config"
	"lazaret.dev/pkg/netpolicy"
)

// PolicyOf derives the network policy and readiness targets of a resolved
// configuration: a v1 policy when the profile allows no host names (every
// v1 document, byte for byte as before), a v2 policy with the name rules
// and the upstream resolver when it does. deny_hosts without allow_hosts
// admits nothing and changes nothing: without an allowed name there is no
// pinning resolver to refuse a name.
func PolicyOf(cfg *config.ResolvedDomainConfiguration) (*netpolicy.DerivedNetworkPolicy, netpolicy.Targets, error) {
	rd := cfg.Readiness()
	var t netpolicy.Targets
	for _, d := range rd.Denied {
		t.Denied = append(t.Denied, netpolicy.Destination{Address: d.Address, Port: d.Port})
	}
	for _, p := range rd.Permitted {
		t.Permitted = append(t.Permitted, netpolicy.Destination{Address: p.Address, Port: p.Port})
	}
	var resolvers []netip.Addr
	for _, d := range rd.DNS {
		t.DNS = append(t.DNS, netpolicy.DNSTarget{Resolver: d.Resolver, Query: d.Query})
		if !slices.Contains(resolvers, d.Resolver) {
			resolvers = append(resolvers, d.Resolver)
		}
	}
	for _, h := range rd.Hosts {
		t.Hosts = append(t.Hosts, netpolicy.HostTarget{Name: h.Name, Port: h.Port})
	}
	var pol *netpolicy.DerivedNetworkPolicy
	var err error
	if allow := cfg.EffectiveAllowHosts(); len(allow) > 0 {
		upstream, _ := cfg.NameResolver()
		pol, err = netpolicy.DeriveV2(cfg.EffectiveAllow(), cfg.EffectiveDeny(), resolvers, allow, cfg.EffectiveDenyHosts(), upstream)
	} else {
		pol, err = netpolicy.Derive(cfg.EffectiveAllow(), cfg.EffectiveDeny(), resolvers)
	}
	if err == nil && len(cfg.Credentials()) > 0 {
		// The credential broker's destinations: the resolver sends
		// their names to the broker, and the input chain admits it.
		var dests []netpolicy.BrokeredDestination
		for _, c := range cfg.Credentials() {
			for _, h := range c.Hosts {
				if d := (netpolicy.BrokeredDestination{Host: h, Port: c.Port}); !slices.Contains(dests, d) {
					dests = append(dests, d)
				}
			}
		}
		pol, err = pol.WithBrokered(dests)
	}
	if err != nil {
		return nil, netpolicy.Targets{}, fmt.Errorf("deriving the network policy of profile %q: %w", cfg.Profile(), err)
	}
	return pol, t, nil
}
