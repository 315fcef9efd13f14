package netpolicy

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"testing"

	"net/netip"

	"lazaret.dev/pkg/postcard"
)

// exampleV2 is the v2 policy of docs/NETWORK.md: the v1 example's prefix
// rules, no resolver, allow api.example.com and *.example.net, deny
// tracker.example.net, upstream 198.51.100.53.
func exampleV2(t testing.TB) *DerivedNetworkPolicy {
	t.Helper()
	p, err := DeriveV2(
		pfxs("203.0.113.0/24", "10.1.2.3/32"),
		pfxs("192.168.0.0/16", "10.0.0.0/8", "172.16.0.0/12"),
		nil,
		[]string{"api.example.com", "*.example.net"},
		[]string{"tracker.example.net"},
		addr("198.51.100.53"),
	)
	if err != nil {
		t.Fatalf("DeriveV2: %v", err)
	}
	return p
}

var policyV2GoldenHex = "" +
	"21" + "6c617a617265742d646572697665642d6e6574776f726b2d706f6c6963792d7632" + // schema_id "…-v2"
	"02" + "00" + "00" + "01" + "01" + // address_families
	"01" + "00" + "01" + // default_actions
	"05" +
	"00" + "00" + "0a000000" + "08" + "01" +
	"00" + "00" + "0a010203" + "20" + "00" +
	"00" + "00" + "ac100000" + "0c" + "01" +
	"00" + "00" + "c0a80000" + "10" + "01" +
	"00" + "00" + "cb007100" + "18" + "00" +
	"00" + // resolvers: none
	"03" + // name_rules: 3, sorted by pattern bytes ('*' < 'a' < 't')
	"0d" + hex.EncodeToString([]byte("*.example.net")) + "00" +
	"0f" + hex.EncodeToString([]byte("api.example.com")) + "00" +
	"13" + hex.EncodeToString([]byte("tracker.example.net")) + "01" +
	"00" + "00" + "c6336435" // name_upstream: IPv4, union V4, 198.51.100.53

func TestPolicyV2Golden(t *testing.T) {
	want, _ := hex.DecodeString(policyV2GoldenHex)
	if file := readHex(t, "policy_v2.hex"); !bytes.Equal(file, want) {
		t.Fatalf("testdata/policy_v2.hex = %x, want the annotated %x", file, want)
	}
	p := exampleV2(t)
	got, err := p.Encode()
	if err != nil {
		t.Fatalf("Encode: %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("encoding = %x\nwant       %x", got, want)
	}
	sum := sha256.Sum256(append([]byte("lazaret-derived-network-policy-v2\x00"), want...))
	d, err := p.Digest()
	if err != nil || d.String() != hex.EncodeToString(sum[:]) {
		t.Fatalf("Digest = %v, %v; want %x", d, err, sum)
	}
	if DigestOfEncoding(got) != d {
		t.Fatal("DigestOfEncoding differs from Digest for v2")
	}
	if v1 := examplePolicy(t); must(v1.Digest()) == d {
		t.Fatal("v1 and v2 digests collide")
	}
	back, err := DecodePolicy(got)
	if err != nil {
		t.Fatalf("DecodePolicy: %v", err)
	}
	if !bytes.Equal(postcard.Marshal(back), got) || back.NameUpstream != p.NameUpstream || len(back.NameRules) != 3 {
		t.Fatalf("round trip changed the policy: %+v", back)
	}
}

func TestDeriveV2Refuses(t *testing.T) {
	allow, deny := pfxs("203.0.113.0/24"), RFC1918
	up := addr("198.51.100.53")
	tests := []struct {
		name        string
		allowH, dnH []string
		up          string
		want        error
	}{
		{"no allow", nil, []string{"a.example.com"}, "198.51.100.53", ErrNoNameAllow},
		{"bad pattern", []string{"*.com"}, nil, "198.51.100.53", ErrHostPattern},
		{"uppercase", []string{"API.example.com"}, nil, "198.51.100.53", ErrHostPattern},
		{"inner wildcard", []string{"a.*.example.com"}, nil, "198.51.100.53", ErrHostPattern},
		{"duplicate", []string{"a.example.com", "a.example.com"}, nil, "198.51.100.53", ErrDuplicate},
		{"conflict", []string{"a.example.com"}, []string{"a.example.com"}, "198.51.100.53", ErrConflict},
		{"loopback upstream", []string{"a.example.com"}, nil, "127.0.0.53", ErrNameUpstream},
		{"no upstream", []string{"a.example.com"}, nil, "", ErrNameUpstream},
		{"IPv6 upstream", []string{"a.example.com"}, nil, "2001:db8::53", ErrNotIPv4},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			u := up
			if tc.up == "" {
				u = netip.Addr{}
			} else {
				u = addr(tc.up)
			}
			_, err := DeriveV2(allow, deny, nil, tc.allowH, tc.dnH, u)
			if !errors.Is(err, tc.want) {
				t.Fatalf("DeriveV2 = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestV2FieldsRefusedInV1(t *testing.T) {
	p := examplePolicy(t)
	p.NameRules = []NameRule{{Pattern: "a.example.com", Action: Allow}}
	if err := p.Validate(); !errors.Is(err, ErrNamesInV1) {
		t.Fatalf("Validate = %v, want %v", err, ErrNamesInV1)
	}
	q := exampleV2(t)
	q.NameRules[0], q.NameRules[1] = q.NameRules[1], q.NameRules[0]
	if err := q.Validate(); !errors.Is(err, ErrUnsorted) {
		t.Fatalf("unsorted name rules: Validate = %v", err)
	}
}

func TestMatchHost(t *testing.T) {
	tests := []struct {
		pattern, name string
		want          bool
	}{
		{"api.example.com", "api.example.com", true},
		{"api.example.com", "x.api.example.com", false},
		{"*.example.com", "api.example.com", true},
		{"*.example.com", "a.b.example.com", true},
		{"*.example.com", "example.com", false},
		{"*.example.com", "badexample.com", false},
		{"*.example.com", "API.example.com", false},
		{"*.example.com", "api.example.com.", false},
		{"*.example.com", "a\x1b.example.com", false},
		{"*.com", "example.com", false},
		{"example.com", "", false},
	}
	for _, tc := range tests {
		if got := MatchHost(tc.pattern, tc.name); got != tc.want {
			t.Errorf("MatchHost(%q, %q) = %v, want %v", tc.pattern, tc.name, got, tc.want)
		}
	}
}

func TestDecideNameDenyWins(t *testing.T) {
	p := exampleV2(t)
	tests := []struct {
		name    string
		allowed bool
		rule    string
	}{
		{"api.example.com", true, "api.example.com"},
		{"cdn.example.net", true, "*.example.net"},
		{"tracker.example.net", false, "tracker.example.net"},
		{"example.net", false, ""},
		{"other.example.org", false, ""},
	}
	for _, tc := range tests {
		d := p.DecideName(tc.name)
		if d.Allowed != tc.allowed || d.Rule.Pattern != tc.rule {
			t.Errorf("DecideName(%q) = %+v, want allowed=%v rule %q", tc.name, d, tc.allowed, tc.rule)
		}
	}
}

func TestAdmitLearned(t *testing.T) {
	d, err := NewDecider(exampleV2(t), addrs("198.18.5.1"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		a    string
		want bool
	}{
		{"198.51.100.80", true}, // no prefix: what pinning admits
		{"203.0.113.7", true},   // already allowed by a prefix
		{"10.1.2.3", true},      // an allow inside RFC 1918
		{"10.9.9.9", false},     // RFC 1918: rebinding
		{"192.168.1.1", false},
		{"127.0.0.1", false},
		{"169.254.169.254", false},
		{"198.18.5.1", false}, // the host
		{"0.0.0.0", false},
		{"::1", false},
	}
	for _, tc := range tests {
		if dec, ok := d.AdmitLearned(addr(tc.a)); ok != tc.want {
			t.Errorf("AdmitLearned(%s) = %v (%v), want %v", tc.a, ok, dec, tc.want)
		}
	}
}
