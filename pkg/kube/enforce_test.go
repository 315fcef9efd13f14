package kube

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"

	"lazaret.dev/pkg/netlab"
	"lazaret.dev/pkg/netpath"
	"lazaret.dev/pkg/netpolicy"
	"lazaret.dev/pkg/readyprobe"
	"lazaret.dev/pkg/testgate"
)

// cniRuleset is what a CNI that enforces NetworkPolicy egress does with
// the rendered rules, written as nftables: drop what leaves the pod
// unless some rule's peer and port admit it. It reads the rendered
// EgressRule values, not the Lazaret policy, so it tests the rendering.
func cniRuleset(rules []EgressRule) string {
	var b strings.Builder
	b.WriteString("table ip kubecni {\n chain egress {\n  type filter hook output priority 0; policy drop;\n")
	b.WriteString("  oifname \"lo\" accept\n  ct state established,related accept\n")
	for _, r := range rules {
		for _, peer := range r.To {
			match := "ip daddr " + peer.IPBlock.CIDR
			if len(peer.IPBlock.Except) > 0 {
				match += " ip daddr != { " + strings.Join(peer.IPBlock.Except, ", ") + " }"
			}
			for _, p := range r.Ports {
				ports := fmt.Sprint(p.Port)
				if p.EndPort != nil {
					ports += fmt.Sprintf("-%d", *p.EndPort)
				}
				fmt.Fprintf(&b, "  %s %s dport %s accept\n", match, strings.ToLower(p.Protocol), ports)
			}
		}
	}
	b.WriteString(" }\n}\n")
	return b.String()
}

// TestRenderedPolicyEnforced runs the in-pod readiness proof in a network
// namespace (the pod) behind real nftables rules made from the rendered
// NetworkPolicy, against hosts of a second namespace (the internet):
// with the policy enforced the proof passes; without it (a CNI that
// ignores NetworkPolicy) it fails, naming the denied target; DNS to an
// address that is not a resolver is dropped even where the address is
// allowed.
func TestRenderedPolicyEnforced(t *testing.T) {
	if !netlab.Enter(t) {
		return
	}
	nft := testgate.Command(t, "nft")
	pod, err := netpath.CurrentNetNS()
	if err != nil {
		t.Fatal(err)
	}
	defer pod.Close()
	inet := netlab.NewNS(t)
	netlab.Link(t, pod, "pod0", netip.MustParsePrefix("10.200.0.2/30"), inet, "inet0", netip.MustParsePrefix("10.200.0.1/30"))
	netlab.Route(t, pod, netip.Prefix{}, netip.MustParseAddr("10.200.0.1"))
	permitted := netip.MustParseAddrPort("198.51.100.10:443")
	denied := netip.MustParseAddrPort("198.51.100.20:443") // in the denied /28
	resolver := netip.MustParseAddr("203.0.113.53")
	netlab.AddHosts(t, inet, permitted.Addr(), denied.Addr(), resolver)
	netlab.ServeTCP(t, inet, permitted)
	netlab.ServeTCP(t, inet, denied)
	records := map[string][]netip.Addr{"svc.lab.test": {permitted.Addr()}}
	netlab.ServeDNS(t, inet, resolver, records)
	netlab.ServeDNS(t, inet, permitted.Addr(), records) // a resolver the policy does not name

	pol, err := netpolicy.Derive(
		[]netip.Prefix{netip.MustParsePrefix("198.51.100.0/24")},
		append([]netip.Prefix{netip.MustParsePrefix("198.51.100.16/28")}, netpolicy.RFC1918...),
		[]netip.Addr{resolver})
	if err != nil {
		t.Fatal(err)
	}
	rules, err := EgressRules(pol)
	if err != nil {
		t.Fatal(err)
	}
	targets := readyprobe.Targets{
		Denied:    []netip.AddrPort{denied},
		Permitted: []netip.AddrPort{permitted},
		DNS:       []readyprobe.DNSTarget{{Resolver: resolver, Name: "svc.lab.test"}},
	}
	ctx := context.Background()

	// No policy enforced: the denied host answers.
	_, err = readyprobe.Check(ctx, targets, time.Second)
	var nr *readyprobe.NotReadyError
	if !errors.As(err, &nr) || len(nr.Failures) != 1 || !strings.HasPrefix(nr.Failures[0].String(), "denied target 198.51.100.20:443: the TCP handshake completed") {
		t.Fatalf("without enforcement: %v", err)
	}

	cmd := exec.Command(nft, "-f", "-")
	cmd.Stdin = strings.NewReader(cniRuleset(rules))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("nft: %v\n%s\n%s", err, out.String(), cniRuleset(rules))
	}
	rep, err := readyprobe.Check(ctx, targets, time.Second)
	if err != nil {
		t.Fatalf("with the rendered policy enforced: %v", err)
	}
	t.Logf("%s", strings.Join(rep.Lines, "\n"))

	// The allowed address is no resolver: its port 53 is not admitted.
	_, err = readyprobe.Check(ctx, readyprobe.Targets{DNS: []readyprobe.DNSTarget{{Resolver: permitted.Addr(), Name: "svc.lab.test"}}}, time.Second)
	if !errors.As(err, &nr) || !strings.Contains(nr.Failures[0].String(), "no answer") {
		t.Fatalf("DNS to an allowed address that is not a resolver: %v", err)
	}
}
