package netlab

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/net/dns/dnsmessage"
	"golang.org/x/sys/unix"

	"lazaret.dev/pkg/netpath"
	"lazaret.dev/pkg/testgate"
)

// EnvInside marks a test process that already runs inside its lab.
const EnvInside = "LAZARET_NETLAB_INSIDE"

// Inside reports whether this process is a lab.
func Inside() bool { return os.Getenv(EnvInside) == "1" }

// Enter runs the calling top-level test inside a lab: a re-executed test
// binary in new network and mount namespaces, plus a user namespace that
// maps the caller to root when not run as root. It returns true inside the
// lab, where the test continues; outside it waits for the lab, reports its
// result and returns false, and the test must return.
func Enter(t *testing.T) bool {
	t.Helper()
	if Inside() {
		return true
	}
	root := os.Geteuid() == 0
	if !root {
		testgate.UserNamespaces(t)
	}
	name := strings.Split(t.Name(), "/")[0]
	args := []string{"-test.run=^" + name + "$", "-test.v", "-test.count=1"}
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), EnvInside+"=1")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET | syscall.CLONE_NEWNS, Pdeathsig: syscall.SIGKILL}
	if !root {
		cmd.SysProcAttr.Cloneflags |= syscall.CLONE_NEWUSER
		cmd.SysProcAttr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}}
		cmd.SysProcAttr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}}
	}
	if err := cmd.Run(); err != nil {
		t.Fatalf("lab for %s: %v", name, err)
	}
	return false
}

// NewNS creates a network namespace with loopback up, closed at cleanup.
func NewNS(t testing.TB) *os.File {
	t.Helper()
	ns, err := netpath.NewNetNS()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	h := handle(t, ns)
	defer h.Close()
	lo, err := h.LinkByName("lo")
	if err == nil {
		err = h.LinkSetUp(lo)
	}
	if err != nil {
		t.Fatal(err)
	}
	return ns
}

func handle(t testing.TB, ns *os.File) *netlink.Handle {
	t.Helper()
	h, err := handleAt(ns)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func handleAt(ns *os.File) (*netlink.Handle, error) {
	h, err := netlink.NewHandleAt(netns.NsHandle(int(ns.Fd())), unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("netlink handle in namespace: %w", err)
	}
	return h, nil
}

func ipnet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: net.IP(p.Addr().AsSlice()), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

// Up brings the interface name of ns up.
func Up(t testing.TB, ns *os.File, name string) {
	t.Helper()
	if err := up(ns, name); err != nil {
		t.Fatal(err)
	}
}

func up(ns *os.File, name string) error {
	h, err := handleAt(ns)
	if err != nil {
		return err
	}
	defer h.Close()
	l, err := h.LinkByName(name)
	if err == nil {
		err = h.LinkSetUp(l)
	}
	if err != nil {
		return fmt.Errorf("bringing %s up: %w", name, err)
	}
	return nil
}

// AddHosts puts each address on the loopback of ns as a /32, so that ns
// answers as all of these hosts.
func AddHosts(t testing.TB, ns *os.File, addrs ...netip.Addr) {
	t.Helper()
	if err := addHosts(ns, addrs...); err != nil {
		t.Fatal(err)
	}
}

func addHosts(ns *os.File, addrs ...netip.Addr) error {
	h, err := handleAt(ns)
	if err != nil {
		return err
	}
	defer h.Close()
	lo, err := h.LinkByName("lo")
	if err != nil {
		return fmt.Errorf("loopback: %w", err)
	}
	for _, a := range addrs {
		if err := h.AddrAdd(lo, &netlink.Addr{IPNet: ipnet(netip.PrefixFrom(a, 32))}); err != nil {
			return fmt.Errorf("adding host %v: %w", a, err)
		}
	}
	return nil
}

// Link connects a and b with a veth pair named aName and bName, gives the
// ends the addresses aAddr and bAddr (an invalid prefix leaves an end
// without one) and brings them up.
func Link(t testing.TB, a *os.File, aName string, aAddr netip.Prefix, b *os.File, bName string, bAddr netip.Prefix) {
	t.Helper()
	if err := link(a, aName, aAddr, b, bName, bAddr); err != nil {
		t.Fatal(err)
	}
}

func link(a *os.File, aName string, aAddr netip.Prefix, b *os.File, bName string, bAddr netip.Prefix) error {
	ha, err := handleAt(a)
	if err != nil {
		return err
	}
	defer ha.Close()
	hb, err := handleAt(b)
	if err != nil {
		return err
	}
	defer hb.Close()
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: aName}, PeerName: bName, PeerNamespace: netlink.NsFd(int(b.Fd()))}
	if err := ha.LinkAdd(veth); err != nil {
		return fmt.Errorf("veth %s/%s: %w", aName, bName, err)
	}
	for _, end := range []struct {
		h    *netlink.Handle
		name string
		addr netip.Prefix
	}{{ha, aName, aAddr}, {hb, bName, bAddr}} {
		l, err := end.h.LinkByName(end.name)
		if err != nil {
			return fmt.Errorf("veth end %s: %w", end.name, err)
		}
		if end.addr.IsValid() {
			if err := end.h.AddrAdd(l, &netlink.Addr{IPNet: ipnet(end.addr)}); err != nil {
				return fmt.Errorf("address %v on %s: %w", end.addr, end.name, err)
			}
		}
		if err := end.h.LinkSetUp(l); err != nil {
			return fmt.Errorf("bringing %s up: %w", end.name, err)
		}
	}
	return nil
}

// Route adds a route to dst via gw in ns; an invalid dst means default.
func Route(t testing.TB, ns *os.File, dst netip.Prefix, gw netip.Addr) {
	t.Helper()
	if err := route(ns, dst, gw); err != nil {
		t.Fatal(err)
	}
}

func route(ns *os.File, dst netip.Prefix, gw netip.Addr) error {
	r := &netlink.Route{Gw: net.IP(gw.AsSlice())}
	if dst.IsValid() {
		r.Dst = ipnet(dst)
	}
	h, err := handleAt(ns)
	if err != nil {
		return err
	}
	defer h.Close()
	if err := h.RouteAdd(r); err != nil {
		return fmt.Errorf("route %v via %v: %w", dst, gw, err)
	}
	return nil
}

// ServeTCP listens on addr inside ns and answers every connection with
// "hello from <addr>\n". The listener closes at cleanup.
func ServeTCP(t testing.TB, ns *os.File, addr netip.AddrPort) {
	t.Helper()
	ln, err := serveTCP(ns, addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
}

func serveTCP(ns *os.File, addr netip.AddrPort) (net.Listener, error) {
	return serveConns(ns, addr, func(c net.Conn) {
		c.Write([]byte("hello from " + addr.String() + "\n"))
	})
}

// listen opens a TCP listener on addr inside ns.
func listen(ns *os.File, addr netip.AddrPort) (net.Listener, error) {
	var ln net.Listener
	err := netpath.InNetNS(ns, func() error {
		var err error
		ln, err = net.Listen("tcp4", addr.String())
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("listening on %v: %w", addr, err)
	}
	return ln, nil
}

// serveDiscard listens on addr inside ns and reads every connection to
// its end (the discard service), for throughput measurements.
func serveDiscard(ns *os.File, addr netip.AddrPort) (net.Listener, error) {
	return serveConns(ns, addr, func(c net.Conn) { io.Copy(io.Discard, c) })
}

// serveConns listens on addr inside ns and runs handle on every
// connection, closing it afterwards, until the listener is closed.
func serveConns(ns *os.File, addr netip.AddrPort, handle func(net.Conn)) (net.Listener, error) {
	ln, err := listen(ns, addr)
	if err != nil {
		return nil, err
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				handle(c)
			}()
		}
	}()
	return ln, nil
}

// DNSServer answers A queries on addr:53 over UDP from a fixed table and
// counts the queries it received.
type DNSServer struct {
	mu      sync.Mutex
	queries int
}

// Queries returns how many queries arrived.
func (s *DNSServer) Queries() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.queries
}

// ServeDNS starts a resolver on addr:53 inside ns. records maps a query
// name (without the final dot) to its A records; other names get
// NXDOMAIN.
func ServeDNS(t testing.TB, ns *os.File, addr netip.Addr, records map[string][]netip.Addr) *DNSServer {
	t.Helper()
	s, pc, err := serveDNS(ns, addr, records)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	return s
}

func serveDNS(ns *os.File, addr netip.Addr, records map[string][]netip.Addr) (*DNSServer, net.PacketConn, error) {
	var pc net.PacketConn
	err := netpath.InNetNS(ns, func() error {
		var err error
		pc, err = net.ListenPacket("udp4", netip.AddrPortFrom(addr, 53).String())
		return err
	})
	if err != nil {
		return nil, nil, fmt.Errorf("DNS server on %v: %w", addr, err)
	}
	s := &DNSServer{}
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			s.mu.Lock()
			s.queries++
			s.mu.Unlock()
			if resp, err := answer(buf[:n], records); err == nil {
				pc.WriteTo(resp, from)
			}
		}
	}()
	return s, pc, nil
}

func answer(req []byte, records map[string][]netip.Addr) ([]byte, error) {
	var p dnsmessage.Parser
	h, err := p.Start(req)
	if err != nil {
		return nil, err
	}
	q, err := p.Question()
	if err != nil {
		return nil, err
	}
	name := strings.ToLower(strings.TrimSuffix(q.Name.String(), "."))
	rrs, ok := lookup(name, records)
	rh := dnsmessage.Header{ID: h.ID, Response: true, RecursionDesired: h.RecursionDesired, Authoritative: true}
	if !ok {
		rh.RCode = dnsmessage.RCodeNameError
	}
	b := dnsmessage.NewBuilder(nil, rh)
	b.EnableCompression()
	if err := b.StartQuestions(); err != nil {
		return nil, err
	}
	if err := b.Question(q); err != nil {
		return nil, err
	}
	if err := b.StartAnswers(); err != nil {
		return nil, err
	}
	if q.Type != dnsmessage.TypeA {
		return b.Finish()
	}
	for _, r := range rrs {
		owner, err := dnsmessage.NewName(r.owner + ".")
		if err != nil {
			return nil, err
		}
		rh := dnsmessage.ResourceHeader{Name: owner, Class: dnsmessage.ClassINET, TTL: r.ttl}
		if r.cname != "" {
			target, err := dnsmessage.NewName(r.cname + ".")
			if err != nil {
				return nil, err
			}
			rh.Type = dnsmessage.TypeCNAME
			err = b.CNAMEResource(rh, dnsmessage.CNAMEResource{CNAME: target})
			if err != nil {
				return nil, err
			}
			continue
		}
		rh.Type = dnsmessage.TypeA
		if err := b.AResource(rh, dnsmessage.AResource{A: r.a.As4()}); err != nil {
			return nil, err
		}
	}
	return b.Finish()
}

// DynamicSuffix is the zone in which the test internet's resolvers answer
// names that a test chooses, without configuring the resolver:
//
//   - "A-B-C-D.ttlN.DynamicSuffix" has one A record, A.B.C.D, with TTL N
//     seconds (198-19-0-10.ttl60.dyn.lab.test is 198.19.0.10 for 60 s);
//   - "cname.REST" is a CNAME to REST, with REST's TTL.
//
// Anything else in the zone is NXDOMAIN.
const DynamicSuffix = "dyn.lab.test"

// DynamicName returns the name in DynamicSuffix that the test internet's
// resolvers answer with a, with a TTL of ttl seconds.
func DynamicName(a netip.Addr, ttl int) string {
	return fmt.Sprintf("%s.ttl%d.%s", strings.ReplaceAll(a.String(), ".", "-"), ttl, DynamicSuffix)
}

type record struct {
	owner string
	ttl   uint32
	cname string     // a CNAME record when set
	a     netip.Addr // else an A record
}

// lookup answers name from records (TTL 60) or, in DynamicSuffix, from
// the name itself.
func lookup(name string, records map[string][]netip.Addr) ([]record, bool) {
	if addrs, ok := records[name]; ok {
		out := make([]record, len(addrs))
		for i, a := range addrs {
			out[i] = record{owner: name, ttl: 60, a: a}
		}
		return out, true
	}
	rest, ok := strings.CutSuffix(name, "."+DynamicSuffix)
	if !ok {
		return nil, false
	}
	if target, ok := strings.CutPrefix(rest, "cname."); ok {
		t := target + "." + DynamicSuffix
		rrs, ok := lookup(t, nil)
		if !ok {
			return nil, false
		}
		return append([]record{{owner: name, ttl: rrs[0].ttl, cname: t}}, rrs...), true
	}
	addr, ttl, ok := strings.Cut(rest, ".ttl")
	if !ok {
		return nil, false
	}
	a, err := netip.ParseAddr(strings.ReplaceAll(addr, "-", "."))
	n, nerr := strconv.ParseUint(ttl, 10, 32)
	if err != nil || !a.Is4() || nerr != nil {
		return nil, false
	}
	return []record{{owner: name, ttl: uint32(n), a: a}}, true
}

// Dial reports whether a TCP connection to dst from inside ns completes
// within timeout.
func Dial(t testing.TB, ns *os.File, dst netip.AddrPort, timeout time.Duration) netpath.Outcome {
	t.Helper()
	out, err := netpath.Connect(context.Background(), ns, dst, timeout)
	if err != nil {
		t.Fatalf("connecting to %v: %v", dst, err)
	}
	return out
}

// DialErr connects to an address of any family from inside ns and returns
// the error, for destinations the stack itself must refuse (IPv6).
func DialErr(ns *os.File, network, addr string, timeout time.Duration) error {
	return netpath.InNetNS(ns, func() error {
		c, err := net.DialTimeout(network, addr, timeout)
		if err == nil {
			c.Close()
			return nil
		}
		return err
	})
}
