package netpolicy

import (
	"bytes"
	"encoding/hex"
	"errors"
	"testing"

	"lazaret.dev/pkg/postcard"
)

// TestBrokeredSection checks the encoding of the brokered destinations: it
// follows the upstream, sorted by (host, port), and round-trips; without
// it a v2 policy keeps the golden bytes.
func TestBrokeredSection(t *testing.T) {
	base := exampleV2(t)
	p, err := base.WithBrokered([]BrokeredDestination{{"api.example.com", 8443}, {"a.example.net", 443}, {"api.example.com", 443}})
	if err != nil {
		t.Fatalf("WithBrokered: %v", err)
	}
	golden, _ := hex.DecodeString(policyV2GoldenHex)
	want := append(bytes.Clone(golden), 0x03)
	for _, d := range []struct {
		host string
		port string
	}{{"a.example.net", "bb03"}, {"api.example.com", "bb03"}, {"api.example.com", "fb41"}} {
		want = append(want, byte(len(d.host)))
		want = append(want, d.host...)
		port, _ := hex.DecodeString(d.port)
		want = append(want, port...)
	}
	got, err := p.Encode()
	if err != nil {
		t.Fatalf("Encode: %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("encoding = %x\nwant       %x", got, want)
	}
	if b, _ := base.Encode(); !bytes.Equal(b, golden) {
		t.Fatal("WithBrokered changed the policy it copied")
	}
	back, err := DecodePolicy(got)
	if err != nil {
		t.Fatalf("DecodePolicy: %v", err)
	}
	if !bytes.Equal(postcard.Marshal(back), got) || len(back.Brokered) != 3 {
		t.Fatalf("round trip changed the policy: %+v", back.Brokered)
	}
	if ports := back.BrokeredPorts(); len(ports) != 2 || ports[0] != 443 || ports[1] != 8443 {
		t.Fatalf("BrokeredPorts = %v", ports)
	}
	if !back.IsBrokered("api.example.com") || back.IsBrokered("example.com") {
		t.Fatal("IsBrokered is wrong")
	}
	if d1, _ := back.Digest(); d1 == must(base.Digest()) {
		t.Fatal("the brokered section does not change the digest")
	}
}

func TestBrokeredRefused(t *testing.T) {
	base := exampleV2(t)
	for name, c := range map[string]struct {
		dests []BrokeredDestination
		want  error
	}{
		"host not allowed": {[]BrokeredDestination{{"other.example.org", 443}}, ErrBrokeredHost},
		"host denied":      {[]BrokeredDestination{{"tracker.example.net", 443}}, ErrBrokeredHost},
		"wildcard":         {[]BrokeredDestination{{"*.example.net", 443}}, ErrBrokeredHost},
		"port zero":        {[]BrokeredDestination{{"api.example.com", 0}}, ErrBrokeredPort},
		"duplicate":        {[]BrokeredDestination{{"api.example.com", 443}, {"api.example.com", 443}}, ErrDuplicate},
	} {
		if _, err := base.WithBrokered(c.dests); !errors.Is(err, c.want) {
			t.Errorf("%s: WithBrokered = %v, want %v", name, err, c.want)
		}
	}
	v1 := examplePolicy(t)
	if _, err := v1.WithBrokered([]BrokeredDestination{{"api.example.com", 443}}); !errors.Is(err, ErrBrokeredInV1) {
		t.Errorf("v1: WithBrokered = %v, want %v", err, ErrBrokeredInV1)
	}
	golden, _ := hex.DecodeString(policyV2GoldenHex)
	if _, err := DecodePolicy(append(golden, 0x00)); !errors.Is(err, ErrBrokeredEmpty) {
		t.Errorf("empty section: DecodePolicy = %v, want %v", err, ErrBrokeredEmpty)
	}
	unsorted := append(bytes.Clone(golden), 0x02, 0x0f)
	unsorted = append(unsorted, "api.example.com"...)
	unsorted = append(unsorted, 0xbb, 0x03, 0x0d)
	unsorted = append(unsorted, "a.example.net"...)
	unsorted = append(unsorted, 0xbb, 0x03)
	if _, err := DecodePolicy(unsorted); !errors.Is(err, ErrUnsorted) {
		t.Errorf("unsorted: DecodePolicy = %v, want %v", err, ErrUnsorted)
	}
}
