package netpolicy

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"
)

func mustDecider(t testing.TB, allow, deny []netip.Prefix, resolvers, hosts []netip.Addr) *Decider {
	t.Helper()
	p, err := Derive(allow, deny, resolvers)
	if err != nil {
		t.Fatalf("Derive: %v", err)
	}
	d, err := NewDecider(p, hosts)
	if err != nil {
		t.Fatalf("NewDecider: %v", err)
	}
	return d
}

type decideCase struct {
	name    string
	dst     string // address or address:port
	proto   Protocol
	allowed bool
	reason  Reason
	prefix  string // deciding prefix, "" for none
}

func runDecideCases(t *testing.T, d *Decider, cases []decideCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var a netip.Addr
			var port uint16
			if ap, err := netip.ParseAddrPort(tc.dst); err == nil {
				a, port = ap.Addr(), ap.Port()
			} else if tc.dst != "" {
				a = addr(tc.dst)
			}
			got := d.Decide(a, port, tc.proto)
			if got.Allowed != tc.allowed || got.Reason != tc.reason {
				t.Fatalf("Decide(%s, %v) = %v (reason %d), want allowed=%v reason %d", tc.dst, tc.proto, got, got.Reason, tc.allowed, tc.reason)
			}
			var want netip.Prefix
			if tc.prefix != "" {
				want = pfx(tc.prefix)
			}
			if got.Prefix != want {
				t.Fatalf("Decide(%s) decided by %v, want %v", tc.dst, got.Prefix, want)
			}
			if ref := referenceDecide(d, a, port, tc.proto); ref != got {
				t.Fatalf("reference decision %v differs from %v", ref, got)
			}
		})
	}
}

func TestDecideInternetMinusPrivate(t *testing.T) {
	d := mustDecider(t, pfxs("0.0.0.0/0"), RFC1918, addrs("9.9.9.9"), addrs("198.51.100.10", "::1", "::ffff:198.51.100.11"))
	runDecideCases(t, d, []decideCase{
		{"public host", "8.8.8.8:443", ProtocolTCP, true, ReasonPrefixRule, "0.0.0.0/0"},
		{"inside 10/8", "10.1.1.1:443", ProtocolTCP, false, ReasonPrefixRule, "10.0.0.0/8"},
		{"top of 172.16/12", "172.31.255.255:80", ProtocolTCP, false, ReasonPrefixRule, "172.16.0.0/12"},
		{"just past 172.16/12", "172.32.0.1:80", ProtocolTCP, true, ReasonPrefixRule, "0.0.0.0/0"},
		{"inside 192.168/16", "192.168.1.1:80", ProtocolUDP, false, ReasonPrefixRule, "192.168.0.0/16"},
		{"loopback not reopened", "127.0.0.1:80", ProtocolTCP, false, ReasonStructural, "127.0.0.0/8"},
		{"cloud metadata", "169.254.169.254:80", ProtocolTCP, false, ReasonStructural, "169.254.0.0/16"},
		{"this network", "0.1.2.3:80", ProtocolTCP, false, ReasonStructural, "0.0.0.0/8"},
		{"multicast", "224.0.0.251:5353", ProtocolUDP, false, ReasonStructural, "224.0.0.0/4"},
		{"broadcast", "255.255.255.255:67", ProtocolUDP, false, ReasonStructural, "240.0.0.0/4"},
		{"host address", "198.51.100.10:22", ProtocolTCP, false, ReasonHostAddress, "198.51.100.10/32"},
		{"mapped host address", "198.51.100.11:22", ProtocolTCP, false, ReasonHostAddress, "198.51.100.11/32"},
		{"neighbour of host", "198.51.100.12:22", ProtocolTCP, true, ReasonPrefixRule, "0.0.0.0/0"},
		{"DNS elsewhere over UDP", "8.8.8.8:53", ProtocolUDP, false, ReasonDNSNotResolver, ""},
		{"DNS elsewhere over TCP", "8.8.8.8:53", ProtocolTCP, false, ReasonDNSNotResolver, ""},
		{"DNS to resolver", "9.9.9.9:53", ProtocolTCP, true, ReasonResolver, "9.9.9.9/32"},
		{"resolver on another port", "9.9.9.9:443", ProtocolTCP, true, ReasonPrefixRule, "0.0.0.0/0"},
		{"ICMP ignores port 53", "8.8.8.8:53", ProtocolICMP, true, ReasonPrefixRule, "0.0.0.0/0"},
		{"IPv6", "[2001:db8::1]:443", ProtocolTCP, false, ReasonFamilyDisabled, ""},
		{"IPv6 loopback", "[::1]:80", ProtocolTCP, false, ReasonFamilyDisabled, ""},
		{"IPv4-mapped IPv6", "[::ffff:8.8.8.8]:443", ProtocolTCP, false, ReasonFamilyDisabled, ""},
		{"invalid address", "", ProtocolTCP, false, ReasonInvalidAddress, ""},
	})
}

func TestDecideNestedPrefixes(t *testing.T) {
	d := mustDecider(t,
		pfxs("10.1.2.3/32", "203.0.113.0/24", "203.0.113.160/27"),
		append(slices.Clone(RFC1918), pfxs("203.0.113.128/25", "127.0.0.0/8")...),
		addrs("10.0.0.53"), nil)
	runDecideCases(t, d, []decideCase{
		{"/32 allow inside /8 deny", "10.1.2.3:22", ProtocolTCP, true, ReasonPrefixRule, "10.1.2.3/32"},
		{"neighbour of the /32", "10.1.2.4:22", ProtocolTCP, false, ReasonPrefixRule, "10.0.0.0/8"},
		{"allow /24", "203.0.113.5:443", ProtocolTCP, true, ReasonPrefixRule, "203.0.113.0/24"},
		{"deny /25 inside allow /24", "203.0.113.200:443", ProtocolTCP, false, ReasonPrefixRule, "203.0.113.128/25"},
		{"allow /27 inside deny /25", "203.0.113.170:443", ProtocolTCP, true, ReasonPrefixRule, "203.0.113.160/27"},
		{"edge of the /27", "203.0.113.192:443", ProtocolTCP, false, ReasonPrefixRule, "203.0.113.128/25"},
		{"no match", "198.51.100.1:443", ProtocolTCP, false, ReasonDefaultAction, ""},
		{"DNS to resolver inside a deny", "10.0.0.53:53", ProtocolUDP, true, ReasonResolver, "10.0.0.53/32"},
		{"resolver's other ports follow prefixes", "10.0.0.53:80", ProtocolTCP, false, ReasonPrefixRule, "10.0.0.0/8"},
		{"DNS to an allowed /32 that is no resolver", "10.1.2.3:53", ProtocolUDP, false, ReasonDNSNotResolver, ""},
	})
}

func TestDecideNoAllowReopensStructural(t *testing.T) {
	d := mustDecider(t, pfxs("127.0.0.0/8", "169.254.169.254/32", "224.0.0.0/4", "0.0.0.0/0"), RFC1918, addrs("192.0.2.53"), addrs("203.0.113.9"))
	runDecideCases(t, d, []decideCase{
		{"loopback allowed by rule", "127.0.0.1:80", ProtocolTCP, false, ReasonStructural, "127.0.0.0/8"},
		{"metadata /32 allowed by rule", "169.254.169.254:80", ProtocolTCP, false, ReasonStructural, "169.254.0.0/16"},
		{"multicast allowed by rule", "239.1.1.1:80", ProtocolUDP, false, ReasonStructural, "224.0.0.0/4"},
		{"host address under 0/0", "203.0.113.9:80", ProtocolTCP, false, ReasonHostAddress, "203.0.113.9/32"},
	})
}

func TestDecisionString(t *testing.T) {
	d := mustDecider(t, pfxs("10.1.2.3/32"), RFC1918, addrs("192.0.2.53"), nil)
	tests := []struct {
		dst   string
		proto Protocol
		want  string
	}{
		{"10.1.2.3:22", ProtocolTCP, "allowed by allow prefix 10.1.2.3/32 (longest match)"},
		{"10.1.2.4:22", ProtocolTCP, "denied by deny prefix 10.0.0.0/8 (longest match)"},
		{"198.51.100.1:22", ProtocolTCP, "denied: no prefix matches and the default action is deny"},
		{"169.254.169.254:80", ProtocolTCP, "denied: 169.254.0.0/16 (link-local and cloud metadata) is always dropped"},
		{"192.0.2.53:53", ProtocolUDP, "allowed: DNS to configured resolver 192.0.2.53"},
		{"[2001:db8::1]:80", ProtocolTCP, "denied: IPv6 is disabled"},
	}
	for _, tc := range tests {
		t.Run(tc.dst, func(t *testing.T) {
			ap := netip.MustParseAddrPort(tc.dst)
			if got := d.Decide(ap.Addr(), ap.Port(), tc.proto).String(); got != tc.want {
				t.Fatalf("String = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestNewDeciderRejects(t *testing.T) {
	p := examplePolicy(t)
	if _, err := NewDecider(p, []netip.Addr{{}}); !errors.Is(err, ErrInvalidAddress) {
		t.Fatalf("invalid host address: %v", err)
	}
	p.DefaultActions[0].Action = Allow
	if _, err := NewDecider(p, nil); !errors.Is(err, ErrDefaultAllow) {
		t.Fatalf("invalid policy: %v", err)
	}
	if _, err := Decide(p, nil, addr("8.8.8.8"), 443, ProtocolTCP); !errors.Is(err, ErrDefaultAllow) {
		t.Fatalf("Decide on invalid policy: %v", err)
	}
}

func TestDeciderCopiesPolicy(t *testing.T) {
	p := examplePolicy(t)
	d, err := NewDecider(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	p.PrefixRules[1].Action = Deny // 10.1.2.3/32
	if dec := d.Decide(addr("10.1.2.3"), 22, ProtocolTCP); !dec.Allowed {
		t.Fatalf("decider followed a later edit of the policy: %v", dec)
	}
}

func TestCheckTargets(t *testing.T) {
	d := mustDecider(t, pfxs("10.1.2.3/32", "203.0.113.0/24"), RFC1918, addrs("192.0.2.53"), nil)
	good := exampleExpected().Targets
	if err := d.CheckTargets(good); err != nil {
		t.Fatalf("CheckTargets(good) = %v", err)
	}
	tests := []struct {
		name   string
		mutate func(*Targets)
		kind   TargetKind
		target string
		want   error
	}{
		{"denied target allowed", func(tg *Targets) { tg.Denied = append(tg.Denied, dst("203.0.113.1:443")) }, TargetDenied, "203.0.113.1:443", ErrTargetAllowed},
		{"permitted target denied", func(tg *Targets) { tg.Permitted = append(tg.Permitted, dst("10.1.2.4:22")) }, TargetPermitted, "10.1.2.4:22", ErrTargetDenied},
		{"permitted target structural", func(tg *Targets) { tg.Permitted = append(tg.Permitted, dst("169.254.169.254:80")) }, TargetPermitted, "169.254.169.254:80", ErrTargetDenied},
		{"permitted DNS to non-resolver", func(tg *Targets) { tg.Permitted = append(tg.Permitted, dst("203.0.113.1:53")) }, TargetPermitted, "203.0.113.1:53", ErrTargetDenied},
		{"DNS through unknown resolver", func(tg *Targets) {
			tg.DNS = append(tg.DNS, DNSTarget{Resolver: addr("203.0.113.53"), Query: "example.test"})
		}, TargetDNS, `"example.test" via 203.0.113.53`, ErrTargetDenied},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tg := exampleExpected().Targets
			tc.mutate(&tg)
			err := d.CheckTargets(tg)
			var te *TargetError
			if !errors.Is(err, tc.want) || !errors.As(err, &te) || te.Kind != tc.kind || te.Target != tc.target {
				t.Fatalf("CheckTargets = %v, want %v target %s", err, tc.kind, tc.target)
			}
			if !strings.Contains(err.Error(), tc.target) {
				t.Fatalf("message %q does not name the target", err)
			}
		})
	}
}

// referenceDecide is a direct transcription of the decision procedure with
// a linear longest-prefix scan, used to check the Decider's lookup by
// masked prefix.
func referenceDecide(d *Decider, a netip.Addr, port uint16, proto Protocol) Decision {
	if !a.IsValid() {
		return Decision{Reason: ReasonInvalidAddress}
	}
	if !a.Is4() {
		return Decision{Reason: ReasonFamilyDisabled}
	}
	for _, s := range Structural {
		if s.Prefix.Contains(a) {
			return Decision{Reason: ReasonStructural, Prefix: s.Prefix, Name: s.Name}
		}
	}
	if slices.Contains(d.hosts, a) {
		return Decision{Reason: ReasonHostAddress, Prefix: netip.PrefixFrom(a, 32)}
	}
	if port == 53 && (proto == ProtocolTCP || proto == ProtocolUDP) {
		if slices.Contains(d.resolvers, a) {
			return Decision{Allowed: true, Reason: ReasonResolver, Prefix: netip.PrefixFrom(a, 32)}
		}
		return Decision{Reason: ReasonDNSNotResolver}
	}
	best := netip.Prefix{}
	for network := range d.rules {
		if network.Contains(a) && (!best.IsValid() || network.Bits() > best.Bits()) {
			best = network
		}
	}
	if best.IsValid() {
		return Decision{Allowed: d.rules[best] == Allow, Reason: ReasonPrefixRule, Prefix: best}
	}
	return Decision{Reason: ReasonDefaultAction}
}

// TestDecideDocExample is the example table of docs/NETWORK.md.
func TestDecideDocExample(t *testing.T) {
	d := mustDecider(t, pfxs("0.0.0.0/0", "10.1.2.3/32", "203.0.113.0/24"),
		append(slices.Clone(RFC1918), pfx("203.0.113.128/25")), addrs("10.0.0.53"), nil)
	tests := []struct {
		dst   string
		proto Protocol
		want  string
	}{
		{"8.8.8.8:443", ProtocolTCP, "allowed by allow prefix 0.0.0.0/0 (longest match)"},
		{"10.1.1.1:443", ProtocolTCP, "denied by deny prefix 10.0.0.0/8 (longest match)"},
		{"10.1.2.3:22", ProtocolTCP, "allowed by allow prefix 10.1.2.3/32 (longest match)"},
		{"203.0.113.200:443", ProtocolTCP, "denied by deny prefix 203.0.113.128/25 (longest match)"},
		{"10.0.0.53:53", ProtocolUDP, "allowed: DNS to configured resolver 10.0.0.53"},
		{"8.8.8.8:53", ProtocolUDP, "denied: DNS (port 53) goes only to the configured resolvers"},
		{"169.254.169.254:80", ProtocolTCP, "denied: 169.254.0.0/16 (link-local and cloud metadata) is always dropped"},
		{"[2001:db8::1]:443", ProtocolTCP, "denied: IPv6 is disabled"},
	}
	for _, tc := range tests {
		t.Run(tc.dst, func(t *testing.T) {
			ap := netip.MustParseAddrPort(tc.dst)
			if got := d.Decide(ap.Addr(), ap.Port(), tc.proto).String(); got != tc.want {
				t.Fatalf("Decide(%s) = %q, want %q", tc.dst, got, tc.want)
			}
		})
	}
}
