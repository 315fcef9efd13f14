package pinresolver

import (
	"context"
	"net"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// benchExchange sends q on the connected UDP socket c and reads the answer.
func benchExchange(b *testing.B, c net.Conn, q, buf []byte) {
	if _, err := c.Write(q); err != nil {
		b.Fatal(err)
	}
	n, err := c.Read(buf)
	if err != nil {
		b.Fatal(err)
	}
	if n < 12 || buf[0] != q[0] || buf[1] != q[1] || buf[3]&0xf != 0 || buf[7] != 1 {
		b.Fatalf("unexpected answer %x", buf[:n])
	}
}

func benchClient(b *testing.B, addr string) net.Conn {
	b.Helper()
	c, err := net.Dial("udp4", addr)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(time.Hour))
	return c
}

func benchHarness(b *testing.B) *harness {
	hs := newHarness(b, answerWith(dnsmessage.RCodeSuccess, rrA("www.example.com", "93.184.216.34", 300)), func(c *Config) {
		c.Names = testNames
		c.Pin = func([]netip.Addr, time.Duration) error { return nil }
		c.Event = nil
	})
	hs.up.discard.Store(true)
	return hs
}

// BenchmarkResolveDirect is a stub client querying the in-process upstream
// itself: the baseline for BenchmarkResolveThroughPinning.
func BenchmarkResolveDirect(b *testing.B) {
	hs := benchHarness(b)
	c := benchClient(b, hs.up.addr.String())
	q := mkQuery(1, "www.example.com", dnsmessage.TypeA, 0)
	buf := make([]byte, 1500)
	for b.Loop() {
		benchExchange(b, c, q, buf)
	}
}

// BenchmarkResolveThroughPinning is the same client and upstream with the
// pinning resolver's UDP server in between (no-op Pin): the extra hop, the
// fresh upstream socket per query, and parsing and building both messages.
func BenchmarkResolveThroughPinning(b *testing.B) {
	hs := benchHarness(b)
	c := benchClient(b, serveUDP(b, hs).String())
	q := mkQuery(1, "www.example.com", dnsmessage.TypeA, 0)
	buf := make([]byte, 1500)
	for b.Loop() {
		benchExchange(b, c, q, buf)
	}
}

// BenchmarkResolveCore is Resolve alone with a scripted upstream: the CPU
// cost of this package without sockets.
func BenchmarkResolveCore(b *testing.B) {
	s, err := New(Config{
		Names:    testNames,
		Upstream: netip.MustParseAddrPort("192.0.2.53:53"),
		Admit:    testAdmit,
		Pin:      func([]netip.Addr, time.Duration) error { return nil },
		Dial:     scriptDialer(echoAnswer),
	})
	if err != nil {
		b.Fatal(err)
	}
	q := mkQuery(1, "www.example.com", dnsmessage.TypeA, 0)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Resolve(context.Background(), q); err != nil {
			b.Fatal(err)
		}
	}
}
