package pinresolver

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// scriptConn is an upstream connection that answers each query it is sent
// with answer(query, tcp) at once, without sockets or timeouts.
type scriptConn struct {
	tcp    bool
	answer func(query []byte, tcp bool) []byte

	mu      sync.Mutex
	pending [][]byte      // UDP: datagrams to read
	stream  *bytes.Reader // TCP: bytes to read
}

func scriptDialer(answer func(query []byte, tcp bool) []byte) func(context.Context, string, string) (net.Conn, error) {
	return func(_ context.Context, network, _ string) (net.Conn, error) {
		return &scriptConn{tcp: network == "tcp", answer: answer}, nil
	}
}

func (c *scriptConn) Write(b []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.tcp {
		if a := c.answer(bytes.Clone(b), false); a != nil {
			c.pending = append(c.pending, a)
		}
		return len(b), nil
	}
	if len(b) < 2 || int(binary.BigEndian.Uint16(b)) != len(b)-2 {
		return 0, errors.New("scriptConn: expected one framed query per write")
	}
	a := c.answer(bytes.Clone(b[2:]), true)
	c.stream = bytes.NewReader(append(binary.BigEndian.AppendUint16(nil, uint16(len(a))), a...))
	return len(b), nil
}

func (c *scriptConn) Read(b []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.tcp {
		if c.stream == nil {
			return 0, os.ErrDeadlineExceeded
		}
		return c.stream.Read(b)
	}
	if len(c.pending) == 0 {
		return 0, os.ErrDeadlineExceeded // nothing more will come
	}
	n := copy(b, c.pending[0])
	c.pending = c.pending[1:]
	return n, nil
}

func (c *scriptConn) Close() error { return nil }
func (c *scriptConn) LocalAddr() net.Addr {
	return &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 5353}
}
func (c *scriptConn) RemoteAddr() net.Addr {
	return &net.UDPAddr{IP: net.IPv4(192, 0, 2, 53), Port: 53}
}
func (c *scriptConn) SetDeadline(time.Time) error      { return nil }
func (c *scriptConn) SetReadDeadline(time.Time) error  { return nil }
func (c *scriptConn) SetWriteDeadline(time.Time) error { return nil }

// echoAnswer answers an A query with its ID and question and one public A
// record for the question name.
func echoAnswer(query []byte, _ bool) []byte {
	var q dnsmessage.Message
	if q.Unpack(query) != nil || len(q.Questions) != 1 {
		return nil
	}
	return pack(respond(q, dnsmessage.RCodeSuccess, rrA(q.Questions[0].Name.String(), "93.184.216.34", 60)))
}

func FuzzResolveQuery(f *testing.F) {
	for _, s := range [][]byte{
		mkQuery(1, "www.example.com", dnsmessage.TypeA, 0),
		mkQuery(2, "WWW.EXAMPLE.COM", dnsmessage.TypeA, 1232),
		mkQuery(3, "evil.org", dnsmessage.TypeA, 0),
		mkQuery(4, "example.com", dnsmessage.TypeAAAA, 4096),
		mkQuery(5, "a_b.example.com", dnsmessage.TypeTXT, 0),
		cat(wireHeader(6, flagRD, 1, 0, 0, 1), wireQuestion(1, 1), wireOPT(1)),
		cat(wireHeader(7, flagRD, 1, 0, 0, 2), wireQuestion(1, 1), wireA, wireOPT(0)),
		cat(wireHeader(8, flagRD, 1, 0, 0, 0), []byte{0xc0, 12, 0, 1, 0, 1}),
		cat(wireHeader(9, flagRD|2<<opcodeShift, 1, 0, 0, 0), wireQuestion(1, 1)),
		wireHeader(10, flagQR, 0, 0, 0, 0),
		{0xab},
	} {
		f.Add(s)
	}
	pinnable := netip.MustParseAddr("93.184.216.34")
	f.Fuzz(func(t *testing.T, query []byte) {
		var pinErr error
		s, err := New(Config{
			Names:    testNames,
			Upstream: netip.MustParseAddrPort("192.0.2.53:53"),
			Admit:    testAdmit,
			Pin: func(addrs []netip.Addr, _ time.Duration) error {
				for _, a := range addrs {
					if a != pinnable {
						pinErr = errors.New("pinned " + a.String())
					}
				}
				return nil
			},
			Event: func(e Event) { _ = e.String() },
			Dial:  scriptDialer(echoAnswer),
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, udp := range []bool{false, true} {
			resolve, limit := s.Resolve, streamMaxSize
			if udp {
				resolve, limit = s.ResolveUDP, udpMaxSize
			}
			resp, err := resolve(context.Background(), query)
			if resp == nil {
				if !errors.Is(err, ErrDropped) {
					t.Fatalf("nil response with error %v", err)
				}
				continue
			}
			if err != nil {
				t.Fatalf("response with error %v", err)
			}
			if len(resp) > limit {
				t.Fatalf("%d-byte response over a limit of %d", len(resp), limit)
			}
			var m dnsmessage.Message
			if err := m.Unpack(resp); err != nil {
				t.Fatalf("response does not parse: %v\n%x", err, resp)
			}
			if !m.Response || len(query) < 2 || m.ID != binary.BigEndian.Uint16(query) {
				t.Fatalf("response header %+v for query %x", m.Header, query)
			}
			for _, a := range answerAddrs(m) {
				if a != pinnable {
					t.Fatalf("answered %v", a)
				}
			}
		}
		if pinErr != nil {
			t.Fatal(pinErr)
		}
	})
}

// answerSectionA lists every A record of msg's answer section, whatever its
// owner or class, as far as the section parses.
func answerSectionA(msg []byte) map[netip.Addr]bool {
	out := map[netip.Addr]bool{}
	var p dnsmessage.Parser
	if _, err := p.Start(msg); err != nil {
		return out
	}
	if p.SkipAllQuestions() != nil {
		return out
	}
	for {
		h, err := p.AnswerHeader()
		if err != nil {
			return out
		}
		if h.Type == dnsmessage.TypeA && h.Length == 4 {
			r, err := p.AResource()
			if err != nil {
				return out
			}
			out[netip.AddrFrom4(r.A)] = true
		} else if p.SkipAnswer() != nil {
			return out
		}
	}
}

func FuzzUpstreamAnswer(f *testing.F) {
	q := dnsmessage.Message{
		Header:    dnsmessage.Header{RecursionDesired: true},
		Questions: []dnsmessage.Question{{Name: mustName("www.example.com"), Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET}},
	}
	seed := func(mode byte, m dnsmessage.Message) {
		f.Add(append([]byte{mode}, pack(m)...))
	}
	seed(1, respond(q, dnsmessage.RCodeSuccess, rrA("www.example.com", "93.184.216.34", 60)))
	seed(1, respond(q, dnsmessage.RCodeSuccess, rrCNAME("www.example.com", "a.cdn.net", 60), rrA("a.cdn.net", "93.184.216.34", 0), rrA("a.cdn.net", "10.0.0.1", 60), rrA("b.cdn.net", "93.184.216.35", 60)))
	seed(1, respond(q, dnsmessage.RCodeSuccess, rrCNAME("www.example.com", "a.cdn.net", 60), rrCNAME("a.cdn.net", "www.example.com", 60)))
	seed(1, respond(q, dnsmessage.RCodeNameError))
	withAuth := respond(q, dnsmessage.RCodeSuccess, rrA("www.example.com", "192.168.0.1", 60))
	withAuth.Authorities = []dnsmessage.Resource{rrA("www.example.com", "93.184.216.50", 60)}
	withAuth.Additionals = []dnsmessage.Resource{rrA("www.example.com", "93.184.216.51", 60)}
	seed(1, withAuth)
	tc := respond(q, dnsmessage.RCodeSuccess, manyA("www.example.com", 3)...)
	tc.Truncated = true
	seed(1, tc)
	seed(0, respond(q, dnsmessage.RCodeSuccess, rrA("www.example.com", "93.184.216.34", 60)))

	query := mkQuery(77, "www.example.com", dnsmessage.TypeA, 0)
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		mode, raw := data[0], data[1:]
		var (
			mu        sync.Mutex
			delivered = map[netip.Addr]bool{} // A records of the answer sections sent
		)
		// mode bit 0: give the answer the query's ID, so parsing goes
		// past the header.
		answer := func(query []byte, tcp bool) []byte {
			a := bytes.Clone(raw)
			if mode&1 != 0 && len(a) >= 2 && len(query) >= 2 {
				copy(a, query[:2])
			}
			if tcp && len(a) >= 3 {
				a[2] &^= 0x02 // the TCP answer is whole
			}
			mu.Lock()
			for k := range answerSectionA(a) {
				delivered[k] = true
			}
			mu.Unlock()
			return a
		}
		var pins []netip.Addr
		s, err := New(Config{
			Names:    testNames,
			Upstream: netip.MustParseAddrPort("192.0.2.53:53"),
			Admit:    testAdmit,
			Pin: func(addrs []netip.Addr, ttl time.Duration) error {
				if ttl < DefaultMinTTL || ttl > DefaultMaxTTL {
					t.Errorf("ttl %v outside the clamp", ttl)
				}
				pins = append(pins, addrs...)
				return nil
			},
			Event: func(e Event) { _ = e.String() },
			Dial:  scriptDialer(answer),
		})
		if err != nil {
			t.Fatal(err)
		}
		resp, err := s.Resolve(context.Background(), query)
		if err != nil {
			t.Fatal(err)
		}
		var m dnsmessage.Message
		if err := m.Unpack(resp); err != nil || m.ID != 77 {
			t.Fatalf("response %x: %v", resp, err)
		}
		mu.Lock()
		defer mu.Unlock()
		for _, a := range pins {
			if ok, _ := testAdmit(a); !ok {
				t.Fatalf("pinned %v, which Admit refuses", a)
			}
			if !delivered[a] {
				t.Fatalf("pinned %v, not an A record of any answer section sent", a)
			}
		}
		for _, a := range answerAddrs(m) {
			if !slices.Contains(pins, a) {
				t.Fatalf("answered %v without pinning it (pins %v)", a, pins)
			}
		}
	})
}
