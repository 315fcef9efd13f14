package netpolicy

import (
	"encoding/binary"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"
)

// benchSets returns n distinct canonical public prefixes, alternately
// allowed and denied, plus the RFC 1918 denies.
func benchSets(n int) (allow, deny []netip.Prefix) {
	r := rand.New(rand.NewPCG(1, 2))
	seen := make(map[netip.Prefix]bool)
	deny = slices.Clone(RFC1918)
	for len(seen) < n {
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], r.Uint32())
		p := netip.PrefixFrom(netip.AddrFrom4(b), 8+r.IntN(25)).Masked()
		if _, s := structuralPrefix(p.Addr()); s || seen[p] || slices.Contains(RFC1918, p) {
			continue
		}
		seen[p] = true
		if len(seen)%2 == 0 {
			allow = append(allow, p)
		} else {
			deny = append(deny, p)
		}
	}
	return allow, deny
}

func BenchmarkDeriveDigest1000(b *testing.B) {
	allow, deny := benchSets(1000)
	res := addrs("192.0.2.53", "198.51.100.53")
	b.ReportAllocs()
	for b.Loop() {
		p, err := Derive(allow, deny, res)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := p.Digest(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodePolicy1000(b *testing.B) {
	allow, deny := benchSets(1000)
	p, err := Derive(allow, deny, addrs("192.0.2.53"))
	if err != nil {
		b.Fatal(err)
	}
	enc, _ := p.Encode()
	b.SetBytes(int64(len(enc)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodePolicy(enc); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecide(b *testing.B) {
	allow, deny := benchSets(1000)
	p, err := Derive(allow, deny, addrs("192.0.2.53"))
	if err != nil {
		b.Fatal(err)
	}
	d, err := NewDecider(p, addrs("198.51.100.10"))
	if err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(3, 4))
	dsts := make([]netip.Addr, 1024)
	for i := range dsts {
		var a [4]byte
		binary.BigEndian.PutUint32(a[:], r.Uint32())
		dsts[i] = netip.AddrFrom4(a)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		_ = d.Decide(dsts[i&1023], 443, ProtocolTCP)
		i++
	}
}
