package readyprobe

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// dnsServer answers A queries on a loopback UDP port: name "ok.test."
// with 192.0.2.7, "empty.test." with no record, "refused.test." with
// REFUSED; anything else gets no answer at all.
func dnsServer(t *testing.T) uint16 {
	t.Helper()
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			var p dnsmessage.Parser
			h, err := p.Start(buf[:n])
			if err != nil {
				continue
			}
			q, err := p.Question()
			if err != nil {
				continue
			}
			h.Response = true
			var answers []dnsmessage.Resource
			switch q.Name.String() {
			case "ok.test.":
				answers = append(answers, dnsmessage.Resource{
					Header: dnsmessage.ResourceHeader{Name: q.Name, Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET, TTL: 60},
					Body:   &dnsmessage.AResource{A: [4]byte{192, 0, 2, 7}},
				})
			case "empty.test.":
			case "refused.test.":
				h.RCode = dnsmessage.RCodeRefused
			default:
				continue
			}
			msg := dnsmessage.Message{Header: h, Questions: []dnsmessage.Question{q}, Answers: answers}
			b, err := msg.Pack()
			if err != nil {
				continue
			}
			pc.WriteTo(b, from)
		}
	}()
	return uint16(pc.LocalAddr().(*net.UDPAddr).Port)
}

func listener(t *testing.T) netip.AddrPort {
	t.Helper()
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return netip.MustParseAddrPort(l.Addr().String())
}

// closedPort is a loopback port nothing listens on: a connect is reset.
func closedPort(t *testing.T) netip.AddrPort {
	t.Helper()
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ap := netip.MustParseAddrPort(l.Addr().String())
	l.Close()
	return ap
}

// TestCheck runs the in-pod proof against real sockets: what passes, and
// each way a target fails, named.
func TestCheck(t *testing.T) {
	port := dnsServer(t)
	open, closed := listener(t), closedPort(t)
	lo := netip.MustParseAddr("127.0.0.1")
	ctx := context.Background()

	rep, err := check(ctx, Targets{
		Permitted: []netip.AddrPort{open, closed}, // a reset is a host's answer
		DNS:       []DNSTarget{{lo, "ok.test"}},
	}, time.Second, port)
	if err != nil {
		t.Fatalf("check: %v", err)
	}
	if len(rep.Lines) != 3 || !strings.Contains(rep.Lines[2], "192.0.2.7") {
		t.Errorf("report %q", rep.Lines)
	}

	_, err = check(ctx, Targets{
		Denied: []netip.AddrPort{open, closed},
		DNS:    []DNSTarget{{lo, "empty.test"}, {lo, "refused.test"}, {lo, "silent.test"}},
	}, 500*time.Millisecond, port)
	var nr *NotReadyError
	if !errors.As(err, &nr) || !errors.Is(err, ErrNotReady) {
		t.Fatalf("check = %v, want a NotReadyError", err)
	}
	want := []string{
		"denied target " + open.String() + ": the TCP handshake completed",
		"denied target " + closed.String() + ": a TCP reset answered",
		`dns target "empty.test" via 127.0.0.1: the answer holds no address`,
		`dns target "refused.test" via 127.0.0.1: the resolver refused the query`,
		`dns target "silent.test" via 127.0.0.1: no answer within 500ms`,
	}
	if len(nr.Failures) != len(want) {
		t.Fatalf("failures %v", nr.Failures)
	}
	for i, w := range want {
		if !strings.HasPrefix(nr.Failures[i].String(), w) {
			t.Errorf("failure %d = %q, want it to begin %q", i, nr.Failures[i], w)
		}
	}
}

// silentPort is a loopback port whose listener's accept queue is full and
// never drained: the kernel drops every further SYN, as a NetworkPolicy
// that drops the packet would.
func silentPort(t *testing.T) netip.AddrPort {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	ap := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(sa.(*syscall.SockaddrInet4).Port))
	// Fill the queue: connects complete until it is full, then hang.
	for range 8 {
		c, err := net.DialTimeout("tcp4", ap.String(), 200*time.Millisecond)
		if err != nil {
			return ap
		}
		t.Cleanup(func() { c.Close() })
	}
	t.Fatal("the accept queue never filled")
	return ap
}

// TestCheckDeniedUnanswered: a denied target that nothing answers passes;
// the same target as permitted fails, naming the outcome.
func TestCheckDeniedUnanswered(t *testing.T) {
	blackhole := silentPort(t)
	if _, err := check(context.Background(), Targets{Denied: []netip.AddrPort{blackhole}}, 300*time.Millisecond, 53); err != nil {
		t.Fatalf("denied unanswered target: %v", err)
	}
	_, err := check(context.Background(), Targets{Permitted: []netip.AddrPort{blackhole}}, 300*time.Millisecond, 53)
	var nr *NotReadyError
	if !errors.As(err, &nr) || !strings.HasPrefix(nr.Failures[0].String(), "permitted target "+blackhole.String()+": TCP connect timed out") {
		t.Fatalf("permitted unanswered target: %v", err)
	}
}

func TestParseArgs(t *testing.T) {
	tg, d, err := ParseArgs([]string{"--denied", "10.0.0.1:443", "--permitted=1.2.3.4:80", "--dns", "1.1.1.1=example.com", "--timeout", "5s"})
	if err != nil || d != 5*time.Second || len(tg.Denied) != 1 || len(tg.Permitted) != 1 || tg.DNS[0].Name != "example.com" {
		t.Fatalf("ParseArgs = %+v %v %v", tg, d, err)
	}
	for _, bad := range [][]string{
		{}, {"--denied"}, {"--denied", "10.0.0.1"}, {"--denied", "[::1]:80"}, {"--permitted", "1.2.3.4:0"},
		{"--dns", "1.1.1.1"}, {"--dns", "example.com=1.1.1.1"}, {"--timeout", "1h", "--denied", "1.2.3.4:1"},
		{"--bogus", "x"}, {"--dns", "1.1.1.1=" + strings.Repeat("a", 300)},
	} {
		if _, _, err := ParseArgs(bad); err == nil {
			t.Errorf("ParseArgs(%q) accepted", bad)
		}
	}
}
