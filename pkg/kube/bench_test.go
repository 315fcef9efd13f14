package kube

import (
	"io"
	"math/rand/v2"
	"net/netip"
	"testing"

	"lazaret.dev/pkg/netpolicy"
	"lazaret.dev/pkg/netpolicy/policytest"
)

// benchPolicy is a policy of about n nested prefix rules.
func benchPolicy(b *testing.B, n int) *netpolicy.DerivedNetworkPolicy {
	rng := rand.New(rand.NewPCG(5, 6))
	for {
		allow, deny := policytest.NestedSets(rng)
		for len(allow)+len(deny) < n {
			a, d := policytest.NestedSets(rng)
			allow, deny = append(allow, a...), append(deny, d...)
		}
		p, err := netpolicy.Derive(allow, append(deny, netpolicy.RFC1918...), []netip.Addr{netip.MustParseAddr("1.1.1.1")})
		if err == nil {
			return p
		}
	}
}

// BenchmarkEgressRules converts a policy of about 200 rules; baseline:
// BenchmarkDecider below, the decider built from the same policy.
func BenchmarkEgressRules(b *testing.B) {
	p := benchPolicy(b, 200)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := EgressRules(p); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecider(b *testing.B) {
	p := benchPolicy(b, 200)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := netpolicy.NewDecider(p, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRenderYAML plans and writes the claude golden profile.
func BenchmarkRenderYAML(b *testing.B) {
	c := goldenCases(b)["claude"]
	b.ReportAllocs()
	for b.Loop() {
		plan, err := Render(c.in, c.opts)
		if err != nil {
			b.Fatal(err)
		}
		if err := YAML(io.Discard, nil, plan.Objects()); err != nil {
			b.Fatal(err)
		}
	}
}
