package netpolicy

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"reflect"
	"testing"

	"lazaret.dev/pkg/postcard"
)

// Every decoder must either refuse its input or accept exactly one
// canonical encoding: re-encoding what it accepted reproduces the input.

func FuzzDecodePolicy(f *testing.F) {
	f.Add(readHex(f, "policy_v1.hex"))
	f.Add(readHex(f, "policy_v2.hex"))
	p, _ := Derive(pfxs("0.0.0.0/0", "10.1.2.3/32"), RFC1918, addrs("9.9.9.9", "1.1.1.1"))
	f.Add(postcard.Marshal(p))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := DecodePolicy(b)
		if err != nil {
			return
		}
		enc, err := p.Encode()
		if err != nil {
			t.Fatalf("decoded policy does not encode: %v", err)
		}
		if !bytes.Equal(enc, b) {
			t.Fatalf("accepted a non-canonical encoding:\n in  %x\n out %x", b, enc)
		}
		if d, err := p.Digest(); err != nil || d != DigestOfEncoding(b) {
			t.Fatalf("Digest = %v, %v", d, err)
		}
	})
}

func FuzzDecodeIdentity(f *testing.F) {
	f.Add(readHex(f, "readiness_identity_v1.hex"))
	f.Fuzz(func(t *testing.T, b []byte) {
		id, err := DecodeIdentity(b)
		if err != nil {
			return
		}
		if id.SchemaID != IdentitySchemaID {
			t.Fatalf("accepted schema ID %q", id.SchemaID)
		}
		if enc := postcard.Marshal(id); !bytes.Equal(enc, b) {
			t.Fatalf("accepted a non-canonical encoding %x", b)
		}
		if _, err := id.Fingerprint(); err != nil {
			t.Fatalf("Fingerprint: %v", err)
		}
	})
}

func FuzzDecodeAttestation(f *testing.F) {
	a, _ := exampleReadiness()
	f.Add(postcard.Marshal(a))
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := DecodeAttestation(b)
		if err != nil {
			return
		}
		if enc := postcard.Marshal(a); !bytes.Equal(enc, b) {
			t.Fatalf("accepted a non-canonical encoding %x", b)
		}
		if _, err := a.Project(); err != nil {
			t.Fatalf("accepted attestation does not project: %v", err)
		}
	})
}

func FuzzDecodeProbe(f *testing.F) {
	_, p := exampleReadiness()
	f.Add(postcard.Marshal(p))
	_, _, pn := exampleNames()
	f.Add(postcard.Marshal(pn))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := DecodeProbe(b)
		if err != nil {
			return
		}
		if enc := postcard.Marshal(p); !bytes.Equal(enc, b) {
			t.Fatalf("accepted a non-canonical encoding %x", b)
		}
	})
}

// FuzzDecodeEvidence also runs the verifier: evidence it accepts must name
// the expected generation and carry the expected fingerprint.
func FuzzDecodeEvidence(f *testing.F) {
	a, p := exampleReadiness()
	want := exampleExpected()
	ev, err := Bind(want, a, p)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(postcard.Marshal(ev))
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := DecodeEvidence(b)
		if err != nil {
			return
		}
		if enc := postcard.Marshal(e); !bytes.Equal(enc, b) {
			t.Fatalf("accepted a non-canonical encoding %x", b)
		}
		if e.Verify(want) != nil {
			return
		}
		if e.GenerationID != want.GenerationID || e.ReadinessFingerprint != want.ReadinessFingerprint() ||
			e.Attestation.RuntimeSupervisor != want.RuntimeSupervisor {
			t.Fatalf("Verify accepted evidence of another generation or process: %+v", e)
		}
		if !reflect.DeepEqual(probeTargets(&e.Probe), probeTargets(&ev.Probe)) {
			t.Fatalf("Verify accepted a probe of other targets: %+v", e.Probe)
		}
	})
}

// FuzzDecide checks the Decider's longest match by lookup against a
// linear scan, over fuzzed policies (when they decode) and destinations.
func FuzzDecide(f *testing.F) {
	base, _ := Derive(pfxs("0.0.0.0/0", "10.1.2.3/32", "203.0.113.0/24", "203.0.113.160/27"),
		append(pfxs("203.0.113.128/25"), RFC1918...), addrs("10.0.0.53"))
	f.Add(postcard.Marshal(base), uint32(0x0a010203), uint16(22), uint8(ProtocolTCP))
	f.Add([]byte{}, uint32(0xcb0071a0), uint16(53), uint8(ProtocolUDP))
	f.Add([]byte{}, uint32(0xa9fea9fe), uint16(80), uint8(ProtocolTCP))
	hosts := addrs("198.51.100.10")
	f.Fuzz(func(t *testing.T, policy []byte, a uint32, port uint16, proto uint8) {
		p, err := DecodePolicy(policy)
		if err != nil {
			p = base
		}
		d, err := NewDecider(p, hosts)
		if err != nil {
			t.Fatalf("NewDecider on a valid policy: %v", err)
		}
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], a)
		dst := netip.AddrFrom4(b)
		got := d.Decide(dst, port, Protocol(proto))
		if ref := referenceDecide(d, dst, port, Protocol(proto)); got != ref {
			t.Fatalf("Decide(%v:%d/%v) = %v, reference %v", dst, port, Protocol(proto), got, ref)
		}
		if got.Allowed && (got.Reason != ReasonPrefixRule && got.Reason != ReasonResolver) {
			t.Fatalf("allowed for reason %d", got.Reason)
		}
		mapped := netip.AddrFrom16(dst.As16())
		if d.Decide(mapped, port, Protocol(proto)).Allowed {
			t.Fatalf("IPv4-mapped IPv6 %v allowed", mapped)
		}
	})
}

// probeTargets lists the targets a probe covers, without results.
func probeTargets(p *NetworkReachabilityProbe) Targets {
	var t Targets
	for _, o := range p.Denied {
		t.Denied = append(t.Denied, o.Destination)
	}
	for _, o := range p.Permitted {
		t.Permitted = append(t.Permitted, o.Destination)
	}
	for _, o := range p.DNS {
		t.DNS = append(t.DNS, o.target())
	}
	return t
}
