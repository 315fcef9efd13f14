package pinresolver

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// handler answers one upstream query; it returns the raw answer, or nil to
// stay silent. tcp says which transport asked.
type handler func(tcp bool, q dnsmessage.Message) []byte

// fakeUpstream is an in-process DNS server on 127.0.0.1, UDP and TCP on the
// same port.
type fakeUpstream struct {
	addr     netip.AddrPort
	udp, tcp atomic.Int32 // queries received
	mu       sync.Mutex
	queries  []dnsmessage.Message
	// discard stops recording queries (benchmarks).
	discard atomic.Bool
	// preface, when set, makes a datagram sent over UDP before the answer.
	preface func(q dnsmessage.Message) []byte
}

func newFakeUpstream(tb testing.TB, h handler) *fakeUpstream {
	tb.Helper()
	var (
		pc net.PacketConn
		l  net.Listener
	)
	for range 20 {
		var err error
		pc, err = net.ListenPacket("udp4", "127.0.0.1:0")
		if err != nil {
			tb.Fatal(err)
		}
		l, err = net.Listen("tcp4", pc.LocalAddr().String())
		if err == nil {
			break
		}
		pc.Close()
		pc = nil
	}
	if pc == nil {
		tb.Fatal("no port free for both UDP and TCP on 127.0.0.1")
	}
	f := &fakeUpstream{addr: netip.MustParseAddrPort(pc.LocalAddr().String())}
	var wg sync.WaitGroup
	tb.Cleanup(func() {
		pc.Close()
		l.Close()
		wg.Wait()
	})
	record := func(msg []byte) (dnsmessage.Message, bool) {
		var m dnsmessage.Message
		if m.Unpack(msg) != nil {
			return m, false
		}
		if f.discard.Load() {
			return m, true
		}
		f.mu.Lock()
		f.queries = append(f.queries, m)
		f.mu.Unlock()
		return m, true
	}
	wg.Go(func() {
		buf := make([]byte, 65535)
		for {
			n, addr, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			f.udp.Add(1)
			m, ok := record(buf[:n])
			if !ok {
				continue
			}
			f.mu.Lock()
			preface := f.preface
			f.mu.Unlock()
			if preface != nil {
				pc.WriteTo(preface(m), addr)
			}
			if resp := h(false, m); resp != nil {
				pc.WriteTo(resp, addr)
			}
		}
	})
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(5 * time.Second))
				var lb [2]byte
				if _, err := io.ReadFull(c, lb[:]); err != nil {
					return
				}
				msg := make([]byte, binary.BigEndian.Uint16(lb[:]))
				if _, err := io.ReadFull(c, msg); err != nil {
					return
				}
				f.tcp.Add(1)
				m, ok := record(msg)
				if !ok {
					return
				}
				if resp := h(true, m); resp != nil {
					c.Write(binary.BigEndian.AppendUint16(nil, uint16(len(resp))))
					c.Write(resp)
				}
			})
		}
	})
	return f
}

func (f *fakeUpstream) received() []dnsmessage.Message {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]dnsmessage.Message(nil), f.queries...)
}

// answerWith returns a handler answering every query with rcode and the
// records.
func answerWith(rcode dnsmessage.RCode, answers ...dnsmessage.Resource) handler {
	return func(_ bool, q dnsmessage.Message) []byte {
		return pack(respond(q, rcode, answers...))
	}
}

func respond(q dnsmessage.Message, rcode dnsmessage.RCode, answers ...dnsmessage.Resource) dnsmessage.Message {
	return dnsmessage.Message{
		Header:    dnsmessage.Header{ID: q.ID, Response: true, RecursionDesired: q.RecursionDesired, RecursionAvailable: true, RCode: rcode},
		Questions: q.Questions,
		Answers:   answers,
	}
}

func pack(m dnsmessage.Message) []byte {
	b, err := m.Pack()
	if err != nil {
		panic(err)
	}
	return b
}

func mustName(s string) dnsmessage.Name {
	if !strings.HasSuffix(s, ".") {
		s += "."
	}
	return dnsmessage.MustNewName(s)
}

func rrA(name, addr string, ttl uint32) dnsmessage.Resource {
	return dnsmessage.Resource{
		Header: dnsmessage.ResourceHeader{Name: mustName(name), Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET, TTL: ttl},
		Body:   &dnsmessage.AResource{A: netip.MustParseAddr(addr).As4()},
	}
}

func rrCNAME(name, target string, ttl uint32) dnsmessage.Resource {
	return dnsmessage.Resource{
		Header: dnsmessage.ResourceHeader{Name: mustName(name), Type: dnsmessage.TypeCNAME, Class: dnsmessage.ClassINET, TTL: ttl},
		Body:   &dnsmessage.CNAMEResource{CNAME: mustName(target)},
	}
}

// mkQuery builds a client query; edns > 0 adds an OPT record advertising
// that size.
func mkQuery(id uint16, name string, t dnsmessage.Type, edns int) []byte {
	m := dnsmessage.Message{
		Header:    dnsmessage.Header{ID: id, RecursionDesired: true},
		Questions: []dnsmessage.Question{{Name: mustName(name), Type: t, Class: dnsmessage.ClassINET}},
	}
	if edns > 0 {
		var rh dnsmessage.ResourceHeader
		rh.SetEDNS0(edns, dnsmessage.RCodeSuccess, false)
		m.Additionals = []dnsmessage.Resource{{Header: rh, Body: &dnsmessage.OPTResource{}}}
	}
	return pack(m)
}

type pinCall struct {
	addrs []netip.Addr
	ttl   time.Duration
}

// harness is a Server wired to a fake upstream, recording names decided,
// pins and events.
type harness struct {
	s  *Server
	up *fakeUpstream

	mu     sync.Mutex
	names  []string
	pins   []pinCall
	events []Event
}

// testNames allows example.com and its subdomains, except deny.example.com.
func testNames(name string) Verdict {
	switch {
	case name == "deny.example.com":
		return Verdict{false, "!deny.example.com"}
	case name == "example.com":
		return Verdict{true, "example.com"}
	case strings.HasSuffix(name, ".example.com"):
		return Verdict{true, "*.example.com"}
	}
	return Verdict{}
}

// testAdmit refuses what a sandbox must never reach by name.
func testAdmit(a netip.Addr) (bool, string) {
	switch {
	case a.IsPrivate():
		return false, "private range"
	case a.IsLoopback():
		return false, "loopback"
	case a.IsLinkLocalUnicast():
		return false, "link-local"
	case a.IsUnspecified():
		return false, "this network"
	}
	return true, ""
}

func newHarness(tb testing.TB, h handler, mods ...func(*Config)) *harness {
	tb.Helper()
	hs := &harness{}
	if h != nil {
		hs.up = newFakeUpstream(tb, h)
	}
	cfg := Config{
		Names: func(name string) Verdict {
			hs.mu.Lock()
			hs.names = append(hs.names, name)
			hs.mu.Unlock()
			return testNames(name)
		},
		Upstream: netip.MustParseAddrPort("192.0.2.53:53"),
		Admit:    testAdmit,
		Pin: func(addrs []netip.Addr, ttl time.Duration) error {
			hs.mu.Lock()
			defer hs.mu.Unlock()
			hs.pins = append(hs.pins, pinCall{append([]netip.Addr(nil), addrs...), ttl})
			return nil
		},
		Event: func(e Event) {
			hs.mu.Lock()
			defer hs.mu.Unlock()
			hs.events = append(hs.events, e)
		},
		UpstreamTimeout: 300 * time.Millisecond,
	}
	if hs.up != nil {
		cfg.Upstream = hs.up.addr
	}
	for _, m := range mods {
		m(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	hs.s = s
	return hs
}

func (hs *harness) resolve(tb testing.TB, query []byte) dnsmessage.Message {
	tb.Helper()
	resp, err := hs.s.Resolve(context.Background(), query)
	if err != nil {
		tb.Fatalf("Resolve: %v", err)
	}
	var m dnsmessage.Message
	if err := m.Unpack(resp); err != nil {
		tb.Fatalf("response does not parse: %v", err)
	}
	return m
}

func (hs *harness) pinned() []pinCall {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	return append([]pinCall(nil), hs.pins...)
}

func (hs *harness) eventsOf(k EventKind) []Event {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	var out []Event
	for _, e := range hs.events {
		if e.Kind == k {
			out = append(out, e)
		}
	}
	return out
}

// answerAddrs lists the A records of m's answer section.
func answerAddrs(m dnsmessage.Message) []netip.Addr {
	var out []netip.Addr
	for _, r := range m.Answers {
		if a, ok := r.Body.(*dnsmessage.AResource); ok {
			out = append(out, netip.AddrFrom4(a.A))
		}
	}
	return out
}

func addrs(ss ...string) []netip.Addr {
	out := make([]netip.Addr, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParseAddr(s)
	}
	return out
}

var errTest = errors.New("test error")
