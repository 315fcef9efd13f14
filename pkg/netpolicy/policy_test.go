package netpolicy

import (
	"bytes"
	"encoding/hex"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"lazaret.dev/pkg/postcard"
)

// The golden policy, field by field. Postcard rules used: a string is its
// length as a varint then its bytes; a sequence is its element count as a
// varint then the elements; an enum or union is its variant index as a
// varint then the payload; a fixed array is its bytes; a u8 is one raw byte.
const policyGoldenHex = "" +
	"21" + "6c617a617265742d646572697665642d6e6574776f726b2d706f6c6963792d7631" + // schema_id: 33 bytes
	"02" + "00" + "00" + // address_families: 2; IPv4 Enabled
	"01" + "01" + // IPv6 Disabled
	"01" + "00" + "01" + // default_actions: 1; IPv4 Deny
	"05" + // prefix_rules: 5, each family, union V4, 4 bytes, length, action
	"00" + "00" + "0a000000" + "08" + "01" + // 10.0.0.0/8 deny
	"00" + "00" + "0a010203" + "20" + "00" + // 10.1.2.3/32 allow
	"00" + "00" + "ac100000" + "0c" + "01" + // 172.16.0.0/12 deny
	"00" + "00" + "c0a80000" + "10" + "01" + // 192.168.0.0/16 deny
	"00" + "00" + "cb007100" + "18" + "00" + // 203.0.113.0/24 allow
	"01" + "00" + "00" + "c0000235" // resolvers: 1; IPv4, union V4, 192.0.2.53

func TestPolicyGolden(t *testing.T) {
	want, _ := hex.DecodeString(policyGoldenHex)
	if file := readHex(t, "policy_v1.hex"); !bytes.Equal(file, want) {
		t.Fatalf("testdata/policy_v1.hex = %x, want the annotated %x", file, want)
	}
	p := examplePolicy(t)
	got, err := p.Encode()
	if err != nil {
		t.Fatalf("Encode: %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("encoding = %x\nwant       %x", got, want)
	}
	d, err := p.Digest()
	if err != nil {
		t.Fatalf("Digest: %v", err)
	}
	wantDigest := strings.TrimSpace(string(must(os.ReadFile(filepath.Join("testdata", "policy_v1.digest")))))
	if d.String() != wantDigest {
		t.Fatalf("digest = %v, want %s", d, wantDigest)
	}
	if DigestOfEncoding(got) != d {
		t.Fatal("DigestOfEncoding differs from Digest")
	}
	back, err := DecodePolicy(got)
	if err != nil {
		t.Fatalf("DecodePolicy: %v", err)
	}
	if !reflect.DeepEqual(back, p) {
		t.Fatalf("decoded %+v, want %+v", back, p)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func TestDeriveShape(t *testing.T) {
	p := examplePolicy(t)
	want := &DerivedNetworkPolicy{
		SchemaID:        PolicySchemaID,
		AddressFamilies: []AddressFamilyDisposition{{IPv4, Enabled}, {IPv6, Disabled}},
		DefaultActions:  []DefaultAction{{IPv4, Deny}},
		PrefixRules: []PrefixRule{
			{IPv4, pfx("10.0.0.0/8"), Deny},
			{IPv4, pfx("10.1.2.3/32"), Allow},
			{IPv4, pfx("172.16.0.0/12"), Deny},
			{IPv4, pfx("192.168.0.0/16"), Deny},
			{IPv4, pfx("203.0.113.0/24"), Allow},
		},
		Resolvers: []Resolver{{IPv4, addr("192.0.2.53")}},
	}
	if !reflect.DeepEqual(p, want) {
		t.Fatalf("Derive = %+v\nwant %+v", p, want)
	}
}

func TestDeriveOrderIndependent(t *testing.T) {
	allow := pfxs("0.0.0.0/0", "10.1.2.3/32", "10.1.2.0/24", "198.51.100.0/24")
	deny := append(slices.Clone(RFC1918), pfxs("10.1.0.0/16", "198.51.100.128/25")...)
	res := addrs("9.9.9.9", "1.1.1.1", "9.9.9.9")
	first, err := Derive(allow, deny, res)
	if err != nil {
		t.Fatalf("Derive: %v", err)
	}
	slices.Reverse(allow)
	slices.Reverse(deny)
	slices.Reverse(res)
	second, err := Derive(allow, deny, res)
	if err != nil {
		t.Fatalf("Derive reversed: %v", err)
	}
	d1, _ := first.Digest()
	d2, _ := second.Digest()
	if d1 != d2 {
		t.Fatalf("digest depends on input order: %v vs %v", d1, d2)
	}
	if len(first.Resolvers) != 2 {
		t.Fatalf("resolvers = %v, want 1.1.1.1 and 9.9.9.9 once each", first.Resolvers)
	}
	// A changed rule changes the digest.
	third, err := Derive(allow[1:], deny, res)
	if err != nil {
		t.Fatalf("Derive: %v", err)
	}
	if d3, _ := third.Digest(); d3 == d1 {
		t.Fatal("removing an allow prefix left the digest unchanged")
	}
}

func TestPolicyRoundTrip(t *testing.T) {
	tests := []struct {
		name      string
		allow     []netip.Prefix
		deny      []netip.Prefix
		resolvers []netip.Addr
	}{
		{"no allow", nil, RFC1918, addrs("192.0.2.1")},
		{"internet minus private", pfxs("0.0.0.0/0"), RFC1918, addrs("9.9.9.9", "1.1.1.1")},
		{"hosts and nets", pfxs("203.0.113.7/32", "198.51.100.0/24", "10.20.30.0/24"),
			append(slices.Clone(RFC1918), pfx("198.51.100.64/26")), addrs("10.20.30.53")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Derive(tc.allow, tc.deny, tc.resolvers)
			if err != nil {
				t.Fatalf("Derive: %v", err)
			}
			b, err := p.Encode()
			if err != nil {
				t.Fatalf("Encode: %v", err)
			}
			back, err := DecodePolicy(b)
			if err != nil {
				t.Fatalf("DecodePolicy: %v", err)
			}
			if !reflect.DeepEqual(back, p) {
				t.Fatalf("round trip changed the policy: %+v vs %+v", back, p)
			}
			again, _ := back.Encode()
			if !bytes.Equal(again, b) {
				t.Fatalf("re-encoding differs: %x vs %x", again, b)
			}
		})
	}
}

func TestDeriveRejects(t *testing.T) {
	tests := []struct {
		name      string
		allow     []netip.Prefix
		deny      []netip.Prefix
		resolvers []netip.Addr
		want      error
		field     string
	}{
		{"host bits", pfxs("203.0.113.1/24"), RFC1918, addrs("192.0.2.1"), ErrHostBits, "allow[0]"},
		{"IPv6 prefix", pfxs("2001:db8::/32"), RFC1918, addrs("192.0.2.1"), ErrNotIPv4, "allow[0]"},
		{"IPv4-mapped prefix", pfxs("::ffff:203.0.113.0/120"), RFC1918, addrs("192.0.2.1"), ErrNotIPv4, "allow[0]"},
		{"invalid prefix", []netip.Prefix{{}}, RFC1918, addrs("192.0.2.1"), ErrInvalidAddress, "allow[0]"},
		{"duplicate allow", pfxs("203.0.113.0/24", "203.0.113.0/24"), RFC1918, addrs("192.0.2.1"), ErrDuplicate, "allow[0] and allow[1]"},
		{"same prefix allowed and denied", pfxs("203.0.113.0/24"), append(slices.Clone(RFC1918), pfx("203.0.113.0/24")), addrs("192.0.2.1"), ErrConflict, "allow[0] and deny[3]"},
		{"RFC 1918 allowed exactly", pfxs("10.0.0.0/8"), RFC1918, addrs("192.0.2.1"), ErrConflict, "allow[0] and deny[0]"},
		{"missing RFC 1918", nil, pfxs("10.0.0.0/8", "172.16.0.0/12"), addrs("192.0.2.1"), ErrMissingRFC1918, "deny"},
		{"no resolver", nil, RFC1918, nil, ErrNoResolver, "resolvers"},
		{"IPv6 resolver", nil, RFC1918, addrs("2001:db8::53"), ErrNotIPv4, "resolvers[0]"},
		{"IPv4-mapped resolver", nil, RFC1918, addrs("::ffff:192.0.2.1"), ErrNotIPv4, "resolvers[0]"},
		{"invalid resolver", nil, RFC1918, []netip.Addr{{}}, ErrInvalidAddress, "resolvers[0]"},
		{"loopback resolver", nil, RFC1918, addrs("192.0.2.1", "127.0.0.53"), ErrStructuralTarget, "resolvers[1]"},
		{"metadata resolver", nil, RFC1918, addrs("169.254.169.254"), ErrStructuralTarget, "resolvers[0]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Derive(tc.allow, tc.deny, tc.resolvers)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Derive = %v, %v; want %v", p, err, tc.want)
			}
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != tc.field {
				t.Fatalf("error %q does not name field %q", err, tc.field)
			}
		})
	}
}

// TestDecodePolicyRejects encodes broken policies without validation and
// checks that the decoder refuses each for the right reason.
func TestDecodePolicyRejects(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(p *DerivedNetworkPolicy)
		want   error
	}{
		{"schema ID", func(p *DerivedNetworkPolicy) { p.SchemaID = "lazaret-derived-network-policy-v3" }, ErrSchemaID},
		{"readiness schema ID", func(p *DerivedNetworkPolicy) { p.SchemaID = IdentitySchemaID }, ErrSchemaID},
		{"unsorted rules", func(p *DerivedNetworkPolicy) { p.PrefixRules[0], p.PrefixRules[1] = p.PrefixRules[1], p.PrefixRules[0] }, ErrUnsorted},
		{"shorter prefix after longer", func(p *DerivedNetworkPolicy) {
			p.PrefixRules[0].Network, p.PrefixRules[1].Network = pfx("10.0.0.0/16"), pfx("10.0.0.0/8")
			p.PrefixRules[1].Action = Deny
		}, ErrUnsorted},
		{"duplicate rule", func(p *DerivedNetworkPolicy) { p.PrefixRules[1] = p.PrefixRules[0] }, ErrDuplicate},
		{"conflicting rule", func(p *DerivedNetworkPolicy) {
			p.PrefixRules = slices.Insert(p.PrefixRules, 1, PrefixRule{IPv4, pfx("10.0.0.0/8"), Allow})
			p.PrefixRules[0].Action, p.PrefixRules[1].Action = Allow, Deny
		}, ErrConflict},
		{"host bits", func(p *DerivedNetworkPolicy) { p.PrefixRules[0].Network = pfx("10.0.0.1/8") }, ErrHostBits},
		{"IPv6 rule", func(p *DerivedNetworkPolicy) {
			p.PrefixRules = append(p.PrefixRules, PrefixRule{IPv6, pfx("2001:db8::/32"), Allow})
		}, ErrFamilyDisabled},
		{"rule family mismatch", func(p *DerivedNetworkPolicy) {
			p.PrefixRules = append(p.PrefixRules, PrefixRule{IPv4, pfx("2001:db8::/32"), Allow})
		}, ErrFamilyMismatch},
		{"IPv6 enabled", func(p *DerivedNetworkPolicy) { p.AddressFamilies[1].Disposition = Enabled }, ErrIPv6Enabled},
		{"one disposition", func(p *DerivedNetworkPolicy) { p.AddressFamilies = p.AddressFamilies[:1] }, ErrDisposition},
		{"duplicate disposition", func(p *DerivedNetworkPolicy) { p.AddressFamilies[1] = p.AddressFamilies[0] }, ErrDisposition},
		{"unsorted dispositions", func(p *DerivedNetworkPolicy) {
			p.AddressFamilies[0], p.AddressFamilies[1] = p.AddressFamilies[1], p.AddressFamilies[0]
		}, ErrUnsorted},
		{"default for disabled family", func(p *DerivedNetworkPolicy) {
			p.DefaultActions = append(p.DefaultActions, DefaultAction{IPv6, Deny})
		}, ErrDefaultAction},
		{"missing default", func(p *DerivedNetworkPolicy) { p.DefaultActions = nil }, ErrDefaultAction},
		{"duplicate default", func(p *DerivedNetworkPolicy) {
			p.DefaultActions = append(p.DefaultActions, DefaultAction{IPv4, Deny})
		}, ErrDefaultAction},
		{"default allow", func(p *DerivedNetworkPolicy) { p.DefaultActions[0].Action = Allow }, ErrDefaultAllow},
		{"no resolver", func(p *DerivedNetworkPolicy) { p.Resolvers = nil }, ErrNoResolver},
		{"duplicate resolver", func(p *DerivedNetworkPolicy) { p.Resolvers = append(p.Resolvers, p.Resolvers[0]) }, ErrDuplicate},
		{"unsorted resolvers", func(p *DerivedNetworkPolicy) {
			p.Resolvers = append(p.Resolvers, Resolver{IPv4, addr("1.1.1.1")})
		}, ErrUnsorted},
		{"IPv6 resolver", func(p *DerivedNetworkPolicy) {
			p.Resolvers = append(p.Resolvers, Resolver{IPv6, addr("2001:db8::53")})
		}, ErrFamilyDisabled},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := examplePolicy(t)
			tc.mutate(p)
			if err := p.Validate(); !errors.Is(err, tc.want) {
				t.Fatalf("Validate = %v, want %v", err, tc.want)
			}
			if _, err := p.Encode(); !errors.Is(err, tc.want) {
				t.Fatalf("Encode = %v, want %v", err, tc.want)
			}
			if _, err := p.Digest(); !errors.Is(err, tc.want) {
				t.Fatalf("Digest = %v, want %v", err, tc.want)
			}
			_, err := DecodePolicy(postcard.Marshal(p))
			if !errors.Is(err, tc.want) {
				t.Fatalf("DecodePolicy = %v, want %v", err, tc.want)
			}
			var de *postcard.DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("error %v carries no decode offset", err)
			}
		})
	}
}

func TestDecodePolicyRejectsBytes(t *testing.T) {
	golden := readHex(t, "policy_v1.hex")
	edit := func(off int, b ...byte) []byte {
		c := slices.Clone(golden)
		copy(c[off:], b)
		return c
	}
	// Offsets in the golden encoding: 34 is the address_families count,
	// 42 the prefix_rules count, 43 the first rule.
	tests := []struct {
		name string
		in   []byte
		want error
	}{
		{"trailing byte", append(slices.Clone(golden), 0), postcard.ErrTrailing},
		{"truncated", golden[:len(golden)-1], postcard.ErrTruncated},
		{"empty", nil, postcard.ErrTruncated},
		{"unknown family", edit(35, 2), postcard.ErrUnknownEnum},
		{"unknown disposition", edit(36, 2), postcard.ErrUnknownEnum},
		{"unknown action", edit(43+7, 2), postcard.ErrUnknownEnum},
		{"unknown address union", edit(43+1, 2), postcard.ErrUnknownEnum},
		{"prefix length 33", edit(43+6, 33), ErrInvalidAddress},
		{"overlong count", slices.Concat(golden[:42], []byte{0x85, 0x00}, golden[43:]), postcard.ErrOverlong},
		{"huge count", slices.Concat(golden[:42], []byte{0xff, 0xff, 0xff, 0xff, 0x0f}, golden[43:]), postcard.ErrTruncated},
		{"schema ID not UTF-8", edit(1, 0xff), postcard.ErrInvalidUTF8},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := DecodePolicy(tc.in); !errors.Is(err, tc.want) {
				t.Fatalf("DecodePolicy = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestSchemaErrorIsTyped(t *testing.T) {
	p := examplePolicy(t)
	p.SchemaID = "lazaret-derived-network-policy-v0"
	_, err := DecodePolicy(postcard.Marshal(p))
	var se *SchemaError
	if !errors.As(err, &se) || se.Got != p.SchemaID || se.Want != PolicySchemaID {
		t.Fatalf("error %v is not a SchemaError naming both IDs", err)
	}
}
