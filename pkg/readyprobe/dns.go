package readyprobe

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"syscall"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// ErrDNSResponse means a resolver answered with a message that does not
// parse.
var ErrDNSResponse = errors.New("malformed DNS response")

// Answer is how a DNS query was answered.
type Answer uint8

const (
	// NoAnswer: no matching answer arrived.
	NoAnswer Answer = iota
	// AnswerSuccess: RCODE NOERROR (with or without addresses).
	AnswerSuccess
	// AnswerRefused: RCODE REFUSED.
	AnswerRefused
	// AnswerOther: any other RCODE.
	AnswerOther
)

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
// no addresses; rcode tells how it was answered.
func DecodeAnswer(msg []byte, id uint16, name string) (addrs []netip.Addr, rcode Answer, match bool, err error) {
	var p dnsmessage.Parser
	h, err := p.Start(msg)
	if err != nil {
		return nil, NoAnswer, false, fmt.Errorf("%w: header: %v", ErrDNSResponse, err)
	}
	if h.ID != id || !h.Response {
		return nil, NoAnswer, false, nil
	}
	q, err := p.Question()
	if err != nil {
		return nil, NoAnswer, false, fmt.Errorf("%w: question: %v", ErrDNSResponse, err)
	}
	if !strings.EqualFold(q.Name.String(), fqdn(name)) || q.Type != dnsmessage.TypeA || q.Class != dnsmessage.ClassINET {
		return nil, NoAnswer, false, nil
	}
	if err := p.SkipAllQuestions(); err != nil {
		return nil, NoAnswer, false, fmt.Errorf("%w: questions: %v", ErrDNSResponse, err)
	}
	switch h.RCode {
	case dnsmessage.RCodeSuccess:
	case dnsmessage.RCodeRefused:
		return nil, AnswerRefused, true, nil
	default:
		return nil, AnswerOther, true, nil
	}
	for {
		ah, err := p.AnswerHeader()
		if errors.Is(err, dnsmessage.ErrSectionDone) {
			break
		}
		if err != nil {
			return nil, NoAnswer, false, fmt.Errorf("%w: answer: %v", ErrDNSResponse, err)
		}
		if ah.Type != dnsmessage.TypeA || ah.Class != dnsmessage.ClassINET {
			if err := p.SkipAnswer(); err != nil {
				return nil, NoAnswer, false, fmt.Errorf("%w: answer: %v", ErrDNSResponse, err)
			}
			continue
		}
		r, err := p.AResource()
		if err != nil {
			return nil, NoAnswer, false, fmt.Errorf("%w: A record: %v", ErrDNSResponse, err)
		}
		addrs = append(addrs, netip.AddrFrom4(r.A))
	}
	slices.SortFunc(addrs, netip.Addr.Compare)
	return slices.Compact(addrs), AnswerSuccess, true, nil
}

// Exchange sends a query for the A records of name on conn, a UDP socket
// connected to a resolver's port 53, up to attempts times, waiting
// timeout for an answer after each send, and returns the matching
// answer's addresses (sorted and distinct) and how it was answered. Every
// attempt sends the same query, so an answer to an earlier send that
// arrives late still matches. No answer within the attempts gives
// NoAnswer and no error; a malformed answer is an error.
func Exchange(ctx context.Context, conn *net.UDPConn, name string, timeout time.Duration, attempts int) ([]netip.Addr, Answer, error) {
	resolver := conn.RemoteAddr()
	buf := make([]byte, 1500)
	id, query, err := EncodeQuery(name)
	if err != nil {
		return nil, NoAnswer, err
	}
	for range max(attempts, 1) {
		if _, err := conn.Write(query); err != nil {
			if errors.Is(err, syscall.ENETUNREACH) || errors.Is(err, syscall.EHOSTUNREACH) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EPERM) {
				return nil, NoAnswer, nil
			}
			return nil, NoAnswer, fmt.Errorf("sending DNS query to %v: %w", resolver, err)
		}
		deadline := time.Now().Add(timeout)
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
				return nil, NoAnswer, fmt.Errorf("reading DNS answer from %v: %w", resolver, err)
			}
			addrs, rc, match, err := DecodeAnswer(buf[:n], id, name)
			if err != nil {
				return nil, NoAnswer, fmt.Errorf("DNS answer from %v for %q: %w", resolver, name, err)
			}
			if match {
				return addrs, rc, nil
			}
		}
		if ctx.Err() != nil {
			return nil, NoAnswer, ctx.Err()
		}
	}
	return nil, NoAnswer, nil
}
