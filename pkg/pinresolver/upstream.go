package pinresolver

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// upstreamAnswer is what an upstream answer contributes: its RCODE, and for
// NOERROR the CNAME chain from the query name and the A records of the
// chain's final name, in answer order.
type upstreamAnswer struct {
	rcode     dnsmessage.RCode
	truncated bool
	chain     []cnameRecord
	addrs     []aRecord
}

type cnameRecord struct {
	target dnsmessage.Name
	ttl    uint32
}

type aRecord struct {
	addr netip.Addr
	ttl  uint32
}

// errNotOurs marks an upstream datagram that is not the answer to our query;
// over UDP it is ignored as a possible spoof.
type errNotOurs struct{ reason string }

func (e errNotOurs) Error() string { return ErrUpstreamMismatch.Error() + ": " + e.reason }
func (e errNotOurs) Unwrap() error { return ErrUpstreamMismatch }

// bufPool holds receive buffers for upstream datagrams.
var bufPool = sync.Pool{New: func() any { return new([streamMaxSize]byte) }}

// forward asks the upstream for the A records of name (lowercased, no
// trailing dot): over UDP, then over TCP when the UDP answer is truncated.
func (s *Server) forward(ctx context.Context, name string) (upstreamAnswer, error) {
	qname, err := dnsmessage.NewName(name + ".")
	if err != nil {
		return upstreamAnswer{}, fmt.Errorf("encoding query name: %w", err)
	}
	var idb [2]byte
	_, _ = rand.Read(idb[:]) // never fails (crypto/rand, Go 1.24)
	id := binary.BigEndian.Uint16(idb[:])
	b := dnsmessage.NewBuilder(make([]byte, 0, 64+len(name)), dnsmessage.Header{ID: id, RecursionDesired: true})
	var rh dnsmessage.ResourceHeader
	if err := errors.Join(
		b.StartQuestions(),
		b.Question(dnsmessage.Question{Name: qname, Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET}),
		b.StartAdditionals(),
		rh.SetEDNS0(udpMaxSize, dnsmessage.RCodeSuccess, false),
		b.OPTResource(rh, dnsmessage.OPTResource{}),
	); err != nil {
		return upstreamAnswer{}, fmt.Errorf("building upstream query: %w", err)
	}
	msg, err := b.Finish()
	if err != nil {
		return upstreamAnswer{}, fmt.Errorf("building upstream query: %w", err)
	}
	ans, err := s.exchangeUDP(ctx, msg, id, name)
	if err != nil || !ans.truncated {
		return ans, err
	}
	return s.exchangeTCP(ctx, msg, id, name)
}

// attempt opens a connection to the upstream whose deadline is the
// attempt's timeout, or earlier when ctx ends.
func (s *Server) attempt(ctx context.Context, network string) (net.Conn, func(), error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.UpstreamTimeout)
	conn, err := s.cfg.Dial(ctx, network, s.cfg.Upstream.String())
	if err != nil {
		cancel()
		return nil, nil, fmt.Errorf("dialing upstream %s/%s: %w", network, s.cfg.Upstream, err)
	}
	deadline, _ := ctx.Deadline()
	_ = conn.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	return conn, func() {
		stop()
		cancel()
		_ = conn.Close()
	}, nil
}

func (s *Server) exchangeUDP(ctx context.Context, msg []byte, id uint16, name string) (upstreamAnswer, error) {
	conn, done, err := s.attempt(ctx, "udp")
	if err != nil {
		return upstreamAnswer{}, err
	}
	defer done()
	if _, err := conn.Write(msg); err != nil {
		return upstreamAnswer{}, fmt.Errorf("sending upstream query: %w", err)
	}
	// One lost datagram must not cost the whole attempt: the same query
	// (same ID and socket, so a late answer to the first send still
	// matches) is sent again every quarter of the attempt.
	end := time.Now().Add(s.cfg.UpstreamTimeout)
	resend := s.cfg.UpstreamTimeout / 4
	_ = conn.SetReadDeadline(time.Now().Add(resend))
	buf := bufPool.Get().(*[streamMaxSize]byte)
	defer bufPool.Put(buf)
	var ignored error
	for {
		n, err := conn.Read(buf[:])
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() && ctx.Err() == nil && time.Now().Before(end) {
				// A resend that fails (the attempt's deadline passed in
				// between) ends the attempt as a timeout.
				if _, werr := conn.Write(msg); werr == nil {
					next := time.Now().Add(resend)
					if next.After(end) {
						next = end
					}
					_ = conn.SetReadDeadline(next)
					continue
				}
			}
			if errors.As(err, &ne) && ne.Timeout() {
				if ignored != nil {
					return upstreamAnswer{}, fmt.Errorf("%w over UDP (ignored: %v)", ErrUpstreamTimeout, ignored)
				}
				return upstreamAnswer{}, fmt.Errorf("%w over UDP", ErrUpstreamTimeout)
			}
			return upstreamAnswer{}, fmt.Errorf("reading upstream answer: %w", err)
		}
		ans, err := parseAnswer(buf[:n], id, name)
		var notOurs errNotOurs
		if errors.As(err, &notOurs) {
			ignored = err
			continue
		}
		return ans, err
	}
}

func (s *Server) exchangeTCP(ctx context.Context, msg []byte, id uint16, name string) (upstreamAnswer, error) {
	conn, done, err := s.attempt(ctx, "tcp")
	if err != nil {
		return upstreamAnswer{}, err
	}
	defer done()
	framed := make([]byte, 2+len(msg))
	binary.BigEndian.PutUint16(framed, uint16(len(msg)))
	copy(framed[2:], msg)
	if _, err := conn.Write(framed); err != nil {
		return upstreamAnswer{}, fmt.Errorf("sending upstream query over TCP: %w", err)
	}
	var l [2]byte
	if _, err := io.ReadFull(conn, l[:]); err != nil {
		return upstreamAnswer{}, tcpReadError(err)
	}
	ansMsg := make([]byte, binary.BigEndian.Uint16(l[:]))
	if _, err := io.ReadFull(conn, ansMsg); err != nil {
		return upstreamAnswer{}, tcpReadError(err)
	}
	ans, err := parseAnswer(ansMsg, id, name)
	if err == nil && ans.truncated {
		return upstreamAnswer{}, ErrUpstreamTruncated
	}
	return ans, err
}

func tcpReadError(err error) error {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return fmt.Errorf("%w over TCP", ErrUpstreamTimeout)
	}
	return fmt.Errorf("reading upstream answer over TCP: %w", err)
}

// parseAnswer parses msg as an untrusted answer to the A query id for name.
// A message that is not that answer yields an errNotOurs. Of a matching
// NOERROR answer, only the answer section is read.
func parseAnswer(msg []byte, id uint16, name string) (upstreamAnswer, error) {
	var p dnsmessage.Parser
	h, err := p.Start(msg)
	if err != nil {
		return upstreamAnswer{}, errNotOurs{"header does not parse"}
	}
	switch {
	case h.ID != id:
		return upstreamAnswer{}, errNotOurs{"ID differs"}
	case !h.Response:
		return upstreamAnswer{}, errNotOurs{"not a response"}
	case h.OpCode != 0:
		return upstreamAnswer{}, errNotOurs{"opcode is not QUERY"}
	}
	q, err := p.Question()
	if err != nil {
		return upstreamAnswer{}, errNotOurs{"no question"}
	}
	if q.Type != dnsmessage.TypeA || q.Class != dnsmessage.ClassINET || !sameName(q.Name, name) {
		return upstreamAnswer{}, errNotOurs{"question differs"}
	}
	if _, err := p.Question(); err != dnsmessage.ErrSectionDone {
		return upstreamAnswer{}, errNotOurs{"more than one question"}
	}
	if h.Truncated {
		return upstreamAnswer{truncated: true}, nil
	}
	if h.RCode != dnsmessage.RCodeSuccess {
		return upstreamAnswer{rcode: h.RCode}, nil
	}

	type cname struct {
		owner  string
		target dnsmessage.Name
		ttl    uint32
	}
	type a struct {
		owner string
		aRecord
	}
	var cnames []cname
	var as []a
	for {
		rh, err := p.AnswerHeader()
		if err == dnsmessage.ErrSectionDone {
			break
		} else if err != nil {
			return upstreamAnswer{}, fmt.Errorf("%w: answer record: %v", ErrUpstreamMalformed, err)
		}
		switch {
		case rh.Class == dnsmessage.ClassINET && rh.Type == dnsmessage.TypeCNAME:
			r, err := p.CNAMEResource()
			if err != nil {
				return upstreamAnswer{}, fmt.Errorf("%w: CNAME record: %v", ErrUpstreamMalformed, err)
			}
			cnames = append(cnames, cname{foldName(rh.Name), r.CNAME, rh.TTL})
		case rh.Class == dnsmessage.ClassINET && rh.Type == dnsmessage.TypeA:
			if rh.Length != 4 {
				return upstreamAnswer{}, fmt.Errorf("%w: A record of %d bytes", ErrUpstreamMalformed, rh.Length)
			}
			r, err := p.AResource()
			if err != nil {
				return upstreamAnswer{}, fmt.Errorf("%w: A record: %v", ErrUpstreamMalformed, err)
			}
			as = append(as, a{foldName(rh.Name), aRecord{netip.AddrFrom4(r.A), rh.TTL}})
		default:
			if err := p.SkipAnswer(); err != nil {
				return upstreamAnswer{}, fmt.Errorf("%w: answer record: %v", ErrUpstreamMalformed, err)
			}
		}
	}

	ans := upstreamAnswer{rcode: dnsmessage.RCodeSuccess}
	cur := name + "."
	visited := map[string]bool{cur: true}
	for {
		var next *cname
		for i := range cnames {
			c := &cnames[i]
			if c.owner != cur {
				continue
			}
			if next != nil && foldName(next.target) != foldName(c.target) {
				return upstreamAnswer{}, fmt.Errorf("%w: %s", ErrCNAMEAmbiguous, cur)
			}
			if next == nil || c.ttl < next.ttl {
				next = c
			}
		}
		if next == nil {
			break
		}
		if len(ans.chain) == MaxCNAMEHops {
			return upstreamAnswer{}, ErrCNAMEChain
		}
		cur = foldName(next.target)
		if visited[cur] {
			return upstreamAnswer{}, fmt.Errorf("%w at %s", ErrCNAMELoop, cur)
		}
		visited[cur] = true
		ans.chain = append(ans.chain, cnameRecord{next.target, next.ttl})
	}
	for _, r := range as {
		if r.owner == cur {
			ans.addrs = append(ans.addrs, r.aRecord)
		}
	}
	return ans, nil
}

// foldName is n's wire text with ASCII letters lowercased, trailing dot kept.
func foldName(n dnsmessage.Name) string {
	return asciiLower(string(n.Data[:n.Length]))
}

// sameName reports whether n is name (lowercased, no trailing dot), ignoring
// ASCII case.
func sameName(n dnsmessage.Name, name string) bool {
	return foldName(n) == name+"."
}

func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + ('a' - 'A')
		}
	}
	return string(b)
}
