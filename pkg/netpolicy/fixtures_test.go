package netpolicy

import (
	"encoding/hex"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"lazaret.dev/pkg/hostid"
	"lazaret.dev/pkg/ids"
)

func pfx(s string) netip.Prefix { return netip.MustParsePrefix(s) }
func addr(s string) netip.Addr  { return netip.MustParseAddr(s) }

func pfxs(ss ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(ss))
	for i, s := range ss {
		out[i] = pfx(s)
	}
	return out
}

func addrs(ss ...string) []netip.Addr {
	out := make([]netip.Addr, len(ss))
	for i, s := range ss {
		out[i] = addr(s)
	}
	return out
}

func dst(s string) Destination {
	ap := netip.MustParseAddrPort(s)
	return Destination{Address: ap.Addr(), Port: ap.Port()}
}

// readHex reads a testdata file of hex digits (whitespace ignored).
func readHex(t testing.TB, name string) []byte {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatalf("reading golden file: %v", err)
	}
	b, err := hex.DecodeString(strings.Join(strings.Fields(string(raw)), ""))
	if err != nil {
		t.Fatalf("decoding golden file %s: %v", name, err)
	}
	return b
}

// examplePolicy is the policy of testdata/policy_v1.hex and docs/NETWORK.md.
func examplePolicy(t testing.TB) *DerivedNetworkPolicy {
	t.Helper()
	p, err := Derive(
		pfxs("203.0.113.0/24", "10.1.2.3/32"),
		pfxs("192.168.0.0/16", "10.0.0.0/8", "172.16.0.0/12"),
		addrs("192.0.2.53"),
	)
	if err != nil {
		t.Fatalf("Derive: %v", err)
	}
	return p
}

func fill16(b byte) (v [16]byte) {
	for i := range v {
		v[i] = b
	}
	return v
}

func fill32(b byte) (v [32]byte) {
	for i := range v {
		v[i] = b
	}
	return v
}

func exampleExpected() *Expected {
	var pd ids.Digest
	_, _ = hex.Decode(pd[:], []byte("6e3bde562849b046d242f15cf74be782d2c45eba0123fa25b45f338073225bb1"))
	return &Expected{
		DomainID:                 ids.DomainID(fill32(0x11)),
		GenerationID:             ids.GenerationID(fill16(0x22)),
		ConfigurationFingerprint: ids.Digest(fill32(0x33)),
		NetworkSidecarID:         ids.SidecarID(fill16(0x44)),
		DerivedPolicyDigest:      pd,
		EnforcementNamespace:     hostid.NamespaceIdentity{Device: 4, Inode: 4026532008},
		RuntimeSupervisor: hostid.PidfsProcessIdentityV1{
			Authority: hostid.PidfsProcessAuthorityV1{BootID: hostid.BootID{0: 0xb0}, PidfsDev: 15, PidfsInode: 7001},
			HostPID:   4242, StartTimeTicks: 99,
		},
		ConnectivityHelper: hostid.PidfsProcessIdentityV1{
			Authority: hostid.PidfsProcessAuthorityV1{BootID: hostid.BootID{0: 0xb0}, PidfsDev: 15, PidfsInode: 7002},
			HostPID:   4243, StartTimeTicks: 100,
		},
		Targets: Targets{
			Denied:    []Destination{dst("198.51.100.7:443"), dst("10.9.9.9:80")},
			Permitted: []Destination{dst("203.0.113.10:443"), dst("10.1.2.3:22")},
			DNS: []DNSTarget{
				{Resolver: addr("192.0.2.53"), Query: "example.test"},
				{Resolver: addr("192.0.2.53"), Query: "api.example.test"},
			},
		},
	}
}

// exampleReadiness is an attestation and probe that satisfy exampleExpected.
func exampleReadiness() (*NetworkReadinessAttestation, *NetworkReachabilityProbe) {
	w := exampleExpected()
	att := &NetworkReadinessAttestation{
		SchemaID:                 AttestationSchemaID,
		DomainID:                 w.DomainID,
		GenerationID:             w.GenerationID,
		ConfigurationFingerprint: w.ConfigurationFingerprint,
		NetworkSidecarID:         w.NetworkSidecarID,
		DerivedPolicyDigest:      w.DerivedPolicyDigest,
		EnforcementNamespace:     w.EnforcementNamespace,
		RuntimeSupervisor:        w.RuntimeSupervisor,
		ConnectivityHelper:       w.ConnectivityHelper,
		Observation: NetworkObservation{
			PolicyDelivery: SealedMemfd,
			HelperReady:    true,
			ObservedRoutes: pfxs("0.0.0.0/0", "10.0.2.0/24"),
			RoutesAttested: true,
		},
	}
	probe := &NetworkReachabilityProbe{
		DomainID:             w.DomainID,
		GenerationID:         w.GenerationID,
		EnforcementNamespace: w.EnforcementNamespace,
		Denied: []DeniedDestinationObservation{
			{Destination: dst("10.9.9.9:80"), Unreachable: true},
			{Destination: dst("198.51.100.7:443"), Unreachable: true},
		},
		Permitted: []PermittedDestinationObservation{
			{Destination: dst("10.1.2.3:22"), Reachable: true},
			{Destination: dst("203.0.113.10:443"), Reachable: true},
		},
		DNS: []DNSObservation{
			{Resolver: addr("192.0.2.53"), QueryName: "api.example.test", ResolvedAddresses: addrs("203.0.113.10")},
			{Resolver: addr("192.0.2.53"), QueryName: "example.test", ResolvedAddresses: addrs("203.0.113.10", "203.0.113.11")},
		},
	}
	return att, probe
}
