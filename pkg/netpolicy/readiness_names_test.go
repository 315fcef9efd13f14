package netpolicy

import (
	"errors"
	"net/netip"
	"testing"
)

// exampleNames is exampleReadiness with names: one readiness host, no
// permitted or DNS targets, and the refusal proof.
func exampleNames() (*Expected, *NetworkReadinessAttestation, *NetworkReachabilityProbe) {
	w := exampleExpected()
	w.Targets.Permitted, w.Targets.DNS = nil, nil
	w.Targets.Hosts = []HostTarget{{Name: "api.example.com", Port: 443}}
	att, p := exampleReadiness()
	p.Permitted, p.DNS = nil, nil
	p.Names = &NameObservations{
		Hosts: []HostObservation{{Name: "api.example.com", Port: 443,
			ResolvedAddresses: []netip.Addr{addr("198.51.100.80"), addr("198.51.100.81")}, Reached: addr("198.51.100.80")}},
		Refusal: RefusalObservation{Name: RefusalProbeName, Refused: true},
	}
	return w, att, p
}

func TestNameProbeRoundTrip(t *testing.T) {
	w, att, p := exampleNames()
	b, err := p.Encode()
	if err != nil {
		t.Fatal(err)
	}
	back, err := DecodeProbe(b)
	if err != nil {
		t.Fatal(err)
	}
	if back.Names == nil || len(back.Names.Hosts) != 1 || back.Names.Hosts[0].Reached != addr("198.51.100.80") || !back.Names.Refusal.Refused {
		t.Fatalf("round trip lost the name section: %+v", back.Names)
	}
	ev, err := Bind(w, att, back)
	if err != nil {
		t.Fatalf("Bind: %v", err)
	}
	enc, err := ev.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := DecodeEvidence(enc); err != nil {
		t.Fatalf("DecodeEvidence with names: %v", err)
	}
	// A v1 probe's encoding does not change.
	_, v1 := exampleReadiness()
	b1, _ := v1.Encode()
	v1.Names = nil
	if b2, _ := v1.Encode(); string(b1) != string(b2) {
		t.Fatal("a probe without names changed encoding")
	}
}

func TestNameProofsJudged(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(w *Expected, p *NetworkReachabilityProbe)
		want   error
		kind   TargetKind
	}{
		{"unresolved", func(_ *Expected, p *NetworkReachabilityProbe) {
			p.Names.Hosts[0].ResolvedAddresses, p.Names.Hosts[0].Reached = nil, netip.Addr{}
		}, ErrTargetUnresolved, TargetHost},
		{"unreached", func(_ *Expected, p *NetworkReachabilityProbe) { p.Names.Hosts[0].Reached = netip.Addr{} }, ErrTargetUnreachable, TargetHost},
		{"not refused", func(_ *Expected, p *NetworkReachabilityProbe) { p.Names.Refusal.Refused = false }, ErrNameNotRefused, TargetRefusal},
		{"host missing", func(w *Expected, _ *NetworkReachabilityProbe) {
			w.Targets.Hosts = append(w.Targets.Hosts, HostTarget{Name: "auth.example.com", Port: 443})
		}, ErrTargetNotProbed, TargetHost},
		{"host not configured", func(w *Expected, _ *NetworkReachabilityProbe) { w.Targets.Hosts[0].Port = 8443 }, ErrTargetNotProbed, TargetHost},
		{"names expected, none probed", func(_ *Expected, p *NetworkReachabilityProbe) {
			p.Names = nil
			p.Permitted = []PermittedDestinationObservation{{Destination: dst("10.1.2.3:22"), Reachable: true}}
			p.DNS = []DNSObservation{{Resolver: addr("192.0.2.53"), QueryName: "example.test", ResolvedAddresses: []netip.Addr{addr("192.0.2.1")}}}
		}, ErrTargetNotProbed, TargetHost},
		{"other refusal name", func(_ *Expected, p *NetworkReachabilityProbe) { p.Names.Refusal.Name = "example.invalid" }, ErrTargetNotConfigured, TargetRefusal},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w, att, p := exampleNames()
			tc.mutate(w, p)
			_, err := Bind(w, att, p)
			var te *TargetError
			if !errors.Is(err, tc.want) || !errors.As(err, &te) || te.Kind != tc.kind {
				t.Fatalf("Bind = %v, want %v of kind %v", err, tc.want, tc.kind)
			}
		})
	}
}

func TestNameProbeCanonical(t *testing.T) {
	_, _, p := exampleNames()
	p.Names.Hosts[0].ResolvedAddresses = []netip.Addr{addr("198.51.100.81"), addr("198.51.100.80")}
	if err := p.Validate(); !errors.Is(err, ErrUnsorted) {
		t.Fatalf("unsorted addresses: %v", err)
	}
	_, _, p = exampleNames()
	p.Names.Hosts[0].Reached = addr("203.0.113.9")
	if err := p.Validate(); err == nil {
		t.Fatal("a reached address that was never resolved was accepted")
	}
	_, _, p = exampleNames()
	p.Names.Hosts = nil
	if err := p.Validate(); !errors.Is(err, ErrTargetNotProbed) {
		t.Fatalf("no hosts: %v", err)
	}
	_, _, p = exampleNames()
	p.Names.Hosts[0].Name = "API.example.com"
	if err := p.Validate(); !errors.Is(err, ErrHostName) {
		t.Fatalf("bad name: %v", err)
	}
}

func TestCheckHostTargets(t *testing.T) {
	d, err := NewDecider(exampleV2(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	base := Targets{Denied: []Destination{dst("10.9.9.9:80")}}
	for _, tc := range []struct {
		name  string
		hosts []HostTarget
		want  error
	}{
		{"allowed", []HostTarget{{"api.example.com", 443}, {"cdn.example.net", 443}}, nil},
		{"none", nil, ErrTargetNotProbed},
		{"not listed", []HostTarget{{"other.example.org", 443}}, ErrNameRefusedByPolicy},
		{"denied wins", []HostTarget{{"tracker.example.net", 443}}, ErrNameRefusedByPolicy},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tg := base
			tg.Hosts = tc.hosts
			if err := d.CheckTargets(tg); !errors.Is(err, tc.want) {
				t.Fatalf("CheckTargets = %v, want %v", err, tc.want)
			}
		})
	}
	wide, err := DeriveV2(pfxs("203.0.113.0/24"), RFC1918, nil, []string{"*.lazaret.invalid"}, nil, addr("198.51.100.53"))
	if err != nil {
		t.Fatal(err)
	}
	dw, _ := NewDecider(wide, nil)
	if err := dw.CheckTargets(Targets{Hosts: []HostTarget{{"x.lazaret.invalid", 443}}}); !errors.Is(err, ErrTargetAllowed) {
		t.Fatalf("a policy allowing the refusal probe's name: %v", err)
	}
	v1, _ := NewDecider(examplePolicy(t), nil)
	if err := v1.CheckTargets(Targets{Hosts: []HostTarget{{"api.example.com", 443}}}); !errors.Is(err, ErrNameRefusedByPolicy) {
		t.Fatalf("hosts with a v1 policy: %v", err)
	}
}
