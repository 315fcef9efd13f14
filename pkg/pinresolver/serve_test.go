package pinresolver

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// serveUDP runs hs.s.ServeUDP on 127.0.0.1 until the test ends.
func serveUDP(t testing.TB, hs *harness) net.Addr {
	t.Helper()
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- hs.s.ServeUDP(pc) }()
	t.Cleanup(func() {
		pc.Close()
		if err := <-done; err != nil {
			t.Errorf("ServeUDP: %v", err)
		}
	})
	return pc.LocalAddr()
}

// serveTCP runs hs.s.ServeTCP on 127.0.0.1 until the test ends.
func serveTCP(t *testing.T, hs *harness) net.Addr {
	t.Helper()
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- hs.s.ServeTCP(l) }()
	t.Cleanup(func() {
		l.Close()
		if err := <-done; err != nil {
			t.Errorf("ServeTCP: %v", err)
		}
	})
	return l.Addr()
}

func udpExchange(t *testing.T, addr net.Addr, q []byte, timeout time.Duration) (dnsmessage.Message, error) {
	t.Helper()
	c, err := net.Dial("udp4", addr.String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(timeout))
	if _, err := c.Write(q); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 65535)
	n, err := c.Read(buf)
	if err != nil {
		return dnsmessage.Message{}, err
	}
	var m dnsmessage.Message
	if err := m.Unpack(buf[:n]); err != nil {
		t.Fatalf("response does not parse: %v", err)
	}
	if n > 512 && len(m.Additionals) == 0 {
		t.Fatalf("%d-byte datagram to a client without EDNS", n)
	}
	return m, nil
}

func writeFramed(t *testing.T, c net.Conn, msgs ...[]byte) {
	t.Helper()
	var b []byte
	for _, m := range msgs {
		b = binary.BigEndian.AppendUint16(b, uint16(len(m)))
		b = append(b, m...)
	}
	if _, err := c.Write(b); err != nil {
		t.Fatal(err)
	}
}

func readFramed(t *testing.T, c net.Conn) dnsmessage.Message {
	t.Helper()
	var l [2]byte
	if _, err := io.ReadFull(c, l[:]); err != nil {
		t.Fatalf("reading length: %v", err)
	}
	msg := make([]byte, binary.BigEndian.Uint16(l[:]))
	if _, err := io.ReadFull(c, msg); err != nil {
		t.Fatalf("reading message: %v", err)
	}
	var m dnsmessage.Message
	if err := m.Unpack(msg); err != nil {
		t.Fatal(err)
	}
	return m
}

// expectClosed fails unless the server closes c within d.
func expectClosed(t *testing.T, c net.Conn, d time.Duration) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(d))
	_, err := c.Read(make([]byte, 1))
	var ne net.Error
	if err == nil || errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("connection still open after %v (read: %v)", d, err)
	}
}

func TestServeUDPPinsBeforeReplying(t *testing.T) {
	var pinned atomic.Bool
	hs := newHarness(t, answerWith(dnsmessage.RCodeSuccess, rrA("example.com", "93.184.216.34", 60)), func(c *Config) {
		c.Pin = func([]netip.Addr, time.Duration) error {
			time.Sleep(50 * time.Millisecond) // a reply sent before Pin returns would win
			pinned.Store(true)
			return nil
		}
	})
	addr := serveUDP(t, hs)
	m, err := udpExchange(t, addr, mkQuery(21, "example.com", dnsmessage.TypeA, 0), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if !pinned.Load() {
		t.Fatal("answer arrived before the pin")
	}
	if m.ID != 21 || len(answerAddrs(m)) != 1 {
		t.Fatalf("response %+v", m)
	}
	// A disallowed name over the socket: REFUSED.
	if m, err := udpExchange(t, addr, mkQuery(22, "evil.org", dnsmessage.TypeA, 0), 2*time.Second); err != nil || m.RCode != dnsmessage.RCodeRefused {
		t.Fatalf("evil.org: %+v, %v", m.Header, err)
	}
}

func TestServeUDPTruncatesThenTCPAnswersInFull(t *testing.T) {
	hs := newHarness(t, answerWith(dnsmessage.RCodeSuccess, manyA("example.com", 100)...))
	q := mkQuery(23, "example.com", dnsmessage.TypeA, 0)
	m, err := udpExchange(t, serveUDP(t, hs), q, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if !m.Truncated || len(m.Answers) == 0 || len(m.Answers) >= 100 {
		t.Fatalf("UDP: TC %v with %d answers", m.Truncated, len(m.Answers))
	}
	c, err := net.Dial("tcp4", serveTCP(t, hs).String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	writeFramed(t, c, q)
	m = readFramed(t, c)
	if m.Truncated || len(m.Answers) != 100 {
		t.Fatalf("TCP: TC %v with %d answers", m.Truncated, len(m.Answers))
	}
}

func TestServeUDPBoundsInFlight(t *testing.T) {
	hs := newHarness(t, func(bool, dnsmessage.Message) []byte { return nil }, func(c *Config) {
		c.MaxUDPInFlight = 2
		c.UpstreamTimeout = 500 * time.Millisecond
	})
	addr := serveUDP(t, hs)
	c, err := net.Dial("udp4", addr.String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := range 6 {
		if _, err := c.Write(mkQuery(uint16(100+i), "example.com", dnsmessage.TypeA, 0)); err != nil {
			t.Fatal(err)
		}
	}
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	got := 0
	buf := make([]byte, 512)
	for {
		if _, err := c.Read(buf); err != nil {
			break
		}
		got++
	}
	// Each forwarded query may be sent more than once (resent within its
	// attempt); what the bound limits is distinct queries.
	ids := map[uint16]bool{}
	for _, q := range hs.up.received() {
		ids[q.ID] = true
	}
	if got != 2 || len(ids) != 2 {
		t.Fatalf("%d responses, %d distinct upstream queries; want 2 and 2 with 2 in flight", got, len(ids))
	}
}

func TestServeTCP(t *testing.T) {
	hs := newHarness(t, answerWith(dnsmessage.RCodeSuccess, rrA("example.com", "93.184.216.34", 60)), func(c *Config) {
		c.TCPIdleTimeout = 200 * time.Millisecond
	})
	addr := serveTCP(t, hs)
	dial := func() net.Conn {
		c, err := net.Dial("tcp4", addr.String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}

	t.Run("several queries per connection, answered in order", func(t *testing.T) {
		c := dial()
		writeFramed(t, c,
			mkQuery(31, "example.com", dnsmessage.TypeA, 0),
			mkQuery(32, "evil.org", dnsmessage.TypeA, 0),
			mkQuery(33, "example.com", dnsmessage.TypeAAAA, 0))
		for _, want := range []struct {
			id    uint16
			rcode dnsmessage.RCode
			n     int
		}{{31, dnsmessage.RCodeSuccess, 1}, {32, dnsmessage.RCodeRefused, 0}, {33, dnsmessage.RCodeSuccess, 0}} {
			m := readFramed(t, c)
			if m.ID != want.id || m.RCode != want.rcode || len(m.Answers) != want.n {
				t.Fatalf("response %+v, want ID %d %v with %d answers", m.Header, want.id, want.rcode, want.n)
			}
		}
		// Split writes of one message are reassembled.
		q := mkQuery(34, "example.com", dnsmessage.TypeA, 0)
		framed := binary.BigEndian.AppendUint16(nil, uint16(len(q)))
		framed = append(framed, q...)
		c.Write(framed[:1])
		time.Sleep(20 * time.Millisecond)
		c.Write(framed[1:7])
		time.Sleep(20 * time.Millisecond)
		c.Write(framed[7:])
		if m := readFramed(t, c); m.ID != 34 {
			t.Fatalf("ID %d", m.ID)
		}
	})
	t.Run("idle connection closed", func(t *testing.T) {
		expectClosed(t, dial(), 2*time.Second)
	})
	t.Run("incomplete query closed at the idle timeout", func(t *testing.T) {
		c := dial()
		c.Write([]byte{0, 40, 1, 2, 3})
		expectClosed(t, c, 2*time.Second)
	})
	t.Run("zero length closes", func(t *testing.T) {
		c := dial()
		c.Write([]byte{0, 0})
		expectClosed(t, c, 100*time.Millisecond)
	})
	t.Run("dropped message closes", func(t *testing.T) {
		c := dial()
		writeFramed(t, c, []byte{1, 2, 3})
		expectClosed(t, c, 100*time.Millisecond)
	})
	t.Run("FORMERR keeps the connection", func(t *testing.T) {
		c := dial()
		writeFramed(t, c, wireHeader(35, 0, 0, 0, 0, 0), mkQuery(36, "example.com", dnsmessage.TypeA, 0))
		if m := readFramed(t, c); m.ID != 35 || m.RCode != dnsmessage.RCodeFormatError {
			t.Fatalf("response %+v", m.Header)
		}
		if m := readFramed(t, c); m.ID != 36 || m.RCode != dnsmessage.RCodeSuccess {
			t.Fatalf("response %+v", m.Header)
		}
	})
}

func TestServeTCPBoundsConnections(t *testing.T) {
	hs := newHarness(t, answerWith(dnsmessage.RCodeSuccess, rrA("example.com", "93.184.216.34", 60)), func(c *Config) {
		c.MaxTCPConns = 2
	})
	addr := serveTCP(t, hs)
	var conns []net.Conn
	for i := range 3 {
		c, err := net.Dial("tcp4", addr.String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		conns = append(conns, c)
		if i < 2 {
			// Make sure the server holds this one before dialling the next.
			writeFramed(t, c, mkQuery(uint16(40+i), "example.com", dnsmessage.TypeA, 0))
			readFramed(t, c)
		}
	}
	expectClosed(t, conns[2], time.Second)
	// The first two are still served.
	writeFramed(t, conns[0], mkQuery(45, "example.com", dnsmessage.TypeA, 0))
	if m := readFramed(t, conns[0]); m.ID != 45 {
		t.Fatalf("ID %d", m.ID)
	}
	// Once one closes, a new connection is served.
	conns[1].Close()
	time.Sleep(50 * time.Millisecond)
	c, err := net.Dial("tcp4", addr.String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	writeFramed(t, c, mkQuery(46, "example.com", dnsmessage.TypeA, 0))
	if m := readFramed(t, c); m.ID != 46 {
		t.Fatalf("ID %d", m.ID)
	}
}

func TestServeTCPReturnsAndClosesConnections(t *testing.T) {
	hs := newHarness(t, nil)
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- hs.s.ServeTCP(l) }()
	c, err := net.Dial("tcp4", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	writeFramed(t, c, mkQuery(50, "evil.org", dnsmessage.TypeA, 0))
	readFramed(t, c)
	l.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("ServeTCP did not return after its listener closed")
	}
	expectClosed(t, c, 100*time.Millisecond)
}
