package netpath

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/net/dns/dnsmessage"

	"lazaret.dev/pkg/netpolicy"
)

// ProbeConfig bounds the readiness probes.
type ProbeConfig struct {
	// ConnectTimeout is how long a TCP connect may take. A permitted
	// target must complete its handshake within it; a denied target must
	// not complete it within it.
	ConnectTimeout time.Duration
	// DNSTimeout is how long one DNS attempt waits for its answer.
	DNSTimeout time.Duration
	// DNSAttempts is how many queries are sent before a DNS target counts
	// as unresolved.
	DNSAttempts int
}

// DefaultProbeConfig suits a local test network and a helper on the same
// host; the coordinator passes its own.
var DefaultProbeConfig = ProbeConfig{ConnectTimeout: 2 * time.Second, DNSTimeout: 1500 * time.Millisecond, DNSAttempts: 2}

// Outcome is what a TCP connect attempt from the sandbox side showed.
type Outcome uint8

const (
	// Connected: the handshake completed.
	Connected Outcome = iota
	// Refused: a host answered with a reset, so the SYN crossed the path.
	Refused
	// TimedOut: nothing answered within the timeout; the enforcement
	// ruleset drops silently, so this is how a denied target looks.
	TimedOut
	// NoRoute: the kernel of the sandbox namespace had no way to send the
	// SYN (network or host unreachable, or refused locally).
	NoRoute
)

func (o Outcome) String() string {
	switch o {
	case Connected:
		return "connected"
	case Refused:
		return "refused by the remote host"
	case TimedOut:
		return "timed out"
	case NoRoute:
		return "no route"
	}
	return fmt.Sprintf("Outcome(%d)", uint8(o))
}

// Reachable is the probe's definition: a target is reachable when a host
// behind the path answered, by completing the handshake or by refusing it.
// A timeout or a local routing failure means unreachable.
func (o Outcome) Reachable() bool { return o == Connected || o == Refused }

// Connect attempts one TCP connection to dst from inside the network
// namespace ns and classifies the result. Errors other than the four
// outcomes are returned.
func Connect(ctx context.Context, ns *os.File, dst netip.AddrPort, timeout time.Duration) (Outcome, error) {
	var out Outcome
	err := InNetNS(ns, func() error {
		d := net.Dialer{Timeout: timeout}
		c, err := d.DialContext(ctx, "tcp4", dst.String())
		if err == nil {
			c.Close()
			out = Connected
			return nil
		}
		var ne net.Error
		switch {
		case errors.Is(err, syscall.ECONNREFUSED):
			out = Refused
		case errors.Is(err, syscall.ENETUNREACH), errors.Is(err, syscall.EHOSTUNREACH),
			errors.Is(err, syscall.EPERM), errors.Is(err, syscall.EACCES):
			out = NoRoute
		case errors.As(err, &ne) && ne.Timeout(), errors.Is(err, context.DeadlineExceeded):
			if ctx.Err() != nil {
				return ctx.Err()
			}
			out = TimedOut
		default:
			return fmt.Errorf("connecting to %v: %w", dst, err)
		}
		return nil
	})
	return out, err
}

// Resolve sends a DNS query for the A records of name to resolver:53 over
// UDP from inside ns and returns the IPv4 addresses of the answer, sorted
// and distinct. No answer within the attempts gives an empty result and
// no error; a malformed answer is an error.
func Resolve(ctx context.Context, ns *os.File, resolver netip.Addr, name string, cfg ProbeConfig) ([]netip.Addr, error) {
	var conn *net.UDPConn
	err := InNetNS(ns, func() error {
		c, err := net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(resolver, netpolicy.DNSPort)))
		conn = c
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("opening DNS socket to %v: %w", resolver, err)
	}
	defer conn.Close()
	buf := make([]byte, 1500)
	for range max(cfg.DNSAttempts, 1) {
		id, query, err := EncodeQuery(name)
		if err != nil {
			return nil, err
		}
		if _, err := conn.Write(query); err != nil {
			if errors.Is(err, syscall.ENETUNREACH) || errors.Is(err, syscall.EHOSTUNREACH) || errors.Is(err, syscall.ECONNREFUSED) {
				return nil, nil
			}
			return nil, fmt.Errorf("sending DNS query to %v: %w", resolver, err)
		}
		deadline := time.Now().Add(cfg.DNSTimeout)
		if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
			deadline = d
		}
		conn.SetReadDeadline(deadline)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, syscall.ECONNREFUSED) {
					break
				}
				return nil, fmt.Errorf("reading DNS answer from %v: %w", resolver, err)
			}
			addrs, match, err := DecodeAnswer(buf[:n], id, name)
			if err != nil {
				return nil, fmt.Errorf("DNS answer from %v for %q: %w", resolver, name, err)
			}
			if match {
				return addrs, nil
			}
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	return nil, nil
}

func fqdn(name string) string {
	if strings.HasSuffix(name, ".") {
		return name
	}
	return name + "."
}

// EncodeQuery builds a recursive query for the A records of name with a
// random ID.
func EncodeQuery(name string) (uint16, []byte, error) {
	n, err := dnsmessage.NewName(fqdn(name))
	if err != nil {
		return 0, nil, fmt.Errorf("DNS query name %q: %w", name, err)
	}
	var idb [2]byte
	if _, err := rand.Read(idb[:]); err != nil {
		return 0, nil, fmt.Errorf("DNS query ID: %w", err)
	}
	id := binary.BigEndian.Uint16(idb[:])
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: id, RecursionDesired: true})
	if err := b.StartQuestions(); err != nil {
		return 0, nil, err
	}
	if err := b.Question(dnsmessage.Question{Name: n, Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET}); err != nil {
		return 0, nil, fmt.Errorf("DNS query name %q: %w", name, err)
	}
	msg, err := b.Finish()
	return id, msg, err
}

// DecodeAnswer parses a DNS response. match is false for a message that
// answers another query (different ID or question), which the caller
// ignores. For a matching response it returns the A records of the answer
// section, sorted and distinct; an error code other than success yields
// no addresses.
func DecodeAnswer(msg []byte, id uint16, name string) (addrs []netip.Addr, match bool, err error) {
	var p dnsmessage.Parser
	h, err := p.Start(msg)
	if err != nil {
		return nil, false, fmt.Errorf("%w: header: %v", ErrDNSResponse, err)
	}
	if h.ID != id || !h.Response {
		return nil, false, nil
	}
	q, err := p.Question()
	if err != nil {
		return nil, false, fmt.Errorf("%w: question: %v", ErrDNSResponse, err)
	}
	if !strings.EqualFold(q.Name.String(), fqdn(name)) || q.Type != dnsmessage.TypeA || q.Class != dnsmessage.ClassINET {
		return nil, false, nil
	}
	if err := p.SkipAllQuestions(); err != nil {
		return nil, false, fmt.Errorf("%w: questions: %v", ErrDNSResponse, err)
	}
	if h.RCode != dnsmessage.RCodeSuccess {
		return nil, true, nil
	}
	for {
		ah, err := p.AnswerHeader()
		if errors.Is(err, dnsmessage.ErrSectionDone) {
			break
		}
		if err != nil {
			return nil, false, fmt.Errorf("%w: answer: %v", ErrDNSResponse, err)
		}
		if ah.Type != dnsmessage.TypeA || ah.Class != dnsmessage.ClassINET {
			if err := p.SkipAnswer(); err != nil {
				return nil, false, fmt.Errorf("%w: answer: %v", ErrDNSResponse, err)
			}
			continue
		}
		r, err := p.AResource()
		if err != nil {
			return nil, false, fmt.Errorf("%w: A record: %v", ErrDNSResponse, err)
		}
		addrs = append(addrs, netip.AddrFrom4(r.A))
	}
	slices.SortFunc(addrs, netip.Addr.Compare)
	return slices.Compact(addrs), true, nil
}

// Observations are the results of probing every readiness target, in the
// order the reachability probe requires.
type Observations struct {
	Denied    []netpolicy.DeniedDestinationObservation
	Permitted []netpolicy.PermittedDestinationObservation
	DNS       []netpolicy.DNSObservation
	// Outcomes holds the connect outcome of every destination target, for
	// error messages and logs.
	Outcomes map[netpolicy.Destination]Outcome
}

// Probe runs every readiness target from inside the sandbox namespace, in
// parallel: each denied target must be unreachable, each permitted target
// reachable (see Outcome.Reachable), each DNS target must resolve through
// its resolver. It returns the observations; Check reports the first
// failure.
func Probe(ctx context.Context, sandbox *os.File, t netpolicy.Targets, cfg ProbeConfig) (*Observations, error) {
	obs := &Observations{Outcomes: map[netpolicy.Destination]Outcome{}}
	var mu sync.Mutex
	var wg sync.WaitGroup
	var firstErr error
	fail := func(err error) {
		mu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		mu.Unlock()
	}
	connect := func(dst netpolicy.Destination, record func(Outcome)) {
		defer wg.Done()
		out, err := Connect(ctx, sandbox, netip.AddrPortFrom(dst.Address, dst.Port), cfg.ConnectTimeout)
		if err != nil {
			fail(fmt.Errorf("probing %v: %w", dst, err))
			return
		}
		mu.Lock()
		obs.Outcomes[dst] = out
		record(out)
		mu.Unlock()
	}
	for _, dst := range t.Denied {
		wg.Add(1)
		go connect(dst, func(o Outcome) {
			obs.Denied = append(obs.Denied, netpolicy.DeniedDestinationObservation{Destination: dst, Unreachable: !o.Reachable()})
		})
	}
	for _, dst := range t.Permitted {
		wg.Add(1)
		go connect(dst, func(o Outcome) {
			obs.Permitted = append(obs.Permitted, netpolicy.PermittedDestinationObservation{Destination: dst, Reachable: o.Reachable()})
		})
	}
	for _, q := range t.DNS {
		wg.Add(1)
		go func() {
			defer wg.Done()
			addrs, err := Resolve(ctx, sandbox, q.Resolver, q.Query, cfg)
			if err != nil {
				fail(fmt.Errorf("probing %v: %w", q, err))
				return
			}
			mu.Lock()
			obs.DNS = append(obs.DNS, netpolicy.DNSObservation{Resolver: q.Resolver, QueryName: q.Query, ResolvedAddresses: addrs})
			mu.Unlock()
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return nil, fmt.Errorf("running readiness probes: %w", firstErr)
	}
	cmpDst := func(a, b netpolicy.Destination) int {
		if c := a.Address.Compare(b.Address); c != 0 {
			return c
		}
		return int(a.Port) - int(b.Port)
	}
	slices.SortFunc(obs.Denied, func(a, b netpolicy.DeniedDestinationObservation) int { return cmpDst(a.Destination, b.Destination) })
	slices.SortFunc(obs.Permitted, func(a, b netpolicy.PermittedDestinationObservation) int {
		return cmpDst(a.Destination, b.Destination)
	})
	slices.SortFunc(obs.DNS, func(a, b netpolicy.DNSObservation) int {
		if c := a.Resolver.Compare(b.Resolver); c != 0 {
			return c
		}
		return strings.Compare(a.QueryName, b.QueryName)
	})
	return obs, nil
}

// Check returns the first target whose observation contradicts the
// policy, as a *netpolicy.TargetError naming it.
func (o *Observations) Check() error {
	for _, d := range o.Denied {
		if !d.Unreachable {
			return &netpolicy.TargetError{Kind: netpolicy.TargetDenied, Target: d.Destination.String(),
				Detail: "TCP connect " + o.Outcomes[d.Destination].String(), Err: ErrReachable}
		}
	}
	for _, p := range o.Permitted {
		if !p.Reachable {
			return &netpolicy.TargetError{Kind: netpolicy.TargetPermitted, Target: p.Destination.String(),
				Detail: "TCP connect " + o.Outcomes[p.Destination].String(), Err: ErrUnreachable}
		}
	}
	for _, q := range o.DNS {
		if len(q.ResolvedAddresses) == 0 {
			return &netpolicy.TargetError{Kind: netpolicy.TargetDNS,
				Target: netpolicy.DNSTarget{Resolver: q.Resolver, Query: q.QueryName}.String(),
				Detail: "no A record answered", Err: ErrNotResolved}
		}
	}
	return nil
}
