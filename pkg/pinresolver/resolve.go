package pinresolver

import (
	"context"
	"fmt"
	"net/netip"
	"strconv"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// Message size limits.
const (
	udpMinSize    = 512   // RFC 1035 datagram limit without EDNS0
	udpMaxSize    = 1232  // EDNS0 size that avoids IP fragmentation (DNS flag day 2020)
	streamMaxSize = 65535 // two-byte length framing
)

// rcodeBADVERS is the extended RCODE for an unsupported EDNS version
// (RFC 6891 section 6.1.3).
const rcodeBADVERS dnsmessage.RCode = 16

// Server is a pinning resolver. Its methods may be called concurrently.
type Server struct {
	cfg Config
}

// New validates cfg, fills its defaults and returns a Server. It opens
// nothing; the caller passes sockets to ServeUDP and ServeTCP.
func New(cfg Config) (*Server, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Server{cfg: c}, nil
}

// query is a parsed client query.
type query struct {
	hdr      dnsmessage.Header
	question dnsmessage.Question
	edns     bool
	ednsSize int    // UDP payload size the OPT record advertised
	ednsVer  uint8  // EDNS version of the OPT record
	name     string // question name, lowercased, without trailing dot
}

// answer is one record of a response: a CNAME when cname is set, else an A.
type answer struct {
	owner dnsmessage.Name
	cname *dnsmessage.Name
	a     [4]byte
}

// Resolve answers one query message with one response message, with the
// stream size limit (65535 bytes) of DNS over TCP. It returns a nil response
// and an error wrapping ErrDropped when the message must not be answered;
// every other outcome, SERVFAIL included, is a response and a nil error.
func (s *Server) Resolve(ctx context.Context, msg []byte) ([]byte, error) {
	return s.resolve(ctx, msg, streamMaxSize)
}

// ResolveUDP is Resolve with the datagram size limit: 512 bytes, or the
// size the query's OPT record advertises capped at 1232. A response that does
// not fit is truncated to whole records and has TC set.
func (s *Server) ResolveUDP(ctx context.Context, msg []byte) ([]byte, error) {
	return s.resolve(ctx, msg, 0)
}

func (s *Server) resolve(ctx context.Context, msg []byte, limit int) ([]byte, error) {
	q, resp, err := s.parseQuery(msg, limit)
	if resp != nil || err != nil {
		return resp, err
	}
	if q.question.Class != dnsmessage.ClassINET {
		s.event(Event{Kind: Refused, Name: q.name, Reason: "query class " + q.question.Class.String() + " is not IN"})
		return s.reply(q, dnsmessage.RCodeRefused, nil, limit), nil
	}
	name, ok := lowerName(q.question.Name)
	q.name = name
	if !ok {
		s.event(Event{Kind: Refused, Name: name, Reason: "name is the root or has a byte other than a letter, digit, hyphen or dot"})
		return s.reply(q, dnsmessage.RCodeRefused, nil, limit), nil
	}
	v := s.cfg.Names(name)
	if !v.Allowed {
		s.event(Event{Kind: Refused, Name: name, Rule: v.Rule, Reason: "name not allowed"})
		return s.reply(q, dnsmessage.RCodeRefused, nil, limit), nil
	}
	if q.question.Type != dnsmessage.TypeA {
		s.event(Event{Kind: Unpinned, Name: name, Rule: v.Rule, Reason: "query type " + q.question.Type.String() + " is answered empty and not forwarded"})
		return s.reply(q, dnsmessage.RCodeSuccess, nil, limit), nil
	}
	if s.cfg.Local != nil {
		if a, ok := s.cfg.Local(name); ok && a.Is4() {
			s.event(Event{Kind: Local, Name: name, Rule: v.Rule, Addresses: []netip.Addr{a}, TTL: LocalTTL})
			return s.replyTTL(q, dnsmessage.RCodeSuccess, []answer{{owner: q.question.Name, a: a.As4()}}, uint32(LocalTTL/time.Second), limit), nil
		}
	}

	up, err := s.forward(ctx, name)
	if err != nil {
		s.event(Event{Kind: Upstream, Name: name, Rule: v.Rule, Reason: err.Error()})
		return s.reply(q, dnsmessage.RCodeServerFailure, nil, limit), nil
	}
	if up.rcode != dnsmessage.RCodeSuccess {
		s.event(Event{Kind: Unpinned, Name: name, Rule: v.Rule, Reason: "upstream answered " + rcodeString(up.rcode)})
		return s.reply(q, up.rcode, nil, limit), nil
	}

	// Admit the candidates; the TTL is the minimum over the records used.
	var admitted []netip.Addr
	minTTL := uint32(1<<32 - 1)
	used := false
	for _, c := range up.chain {
		minTTL = min(minTTL, c.ttl)
		used = true
	}
	decided := map[netip.Addr]bool{} // address: admitted
	for _, r := range up.addrs {
		ok, seen := decided[r.addr]
		if !seen {
			var reason string
			ok, reason = s.cfg.Admit(r.addr)
			decided[r.addr] = ok
			if !ok {
				s.event(Event{Kind: Rebinding, Name: name, Rule: v.Rule, Addresses: []netip.Addr{r.addr}, Reason: reason})
			} else {
				admitted = append(admitted, r.addr)
			}
		}
		if !ok {
			continue
		}
		minTTL = min(minTTL, r.ttl)
		used = true
	}
	ttl := s.cfg.MinTTL
	if used {
		ttl = s.clamp(minTTL)
	}
	if len(admitted) > 0 {
		if err := s.cfg.Pin(admitted, ttl); err != nil {
			s.event(Event{Kind: PinFailed, Name: name, Rule: v.Rule, Addresses: admitted, TTL: ttl, Reason: err.Error()})
			return s.reply(q, dnsmessage.RCodeServerFailure, nil, limit), nil
		}
		s.event(Event{Kind: Pinned, Name: name, Rule: v.Rule, Addresses: admitted, TTL: ttl})
	} else {
		s.event(Event{Kind: Unpinned, Name: name, Rule: v.Rule, Reason: "no admitted address in the upstream answer"})
	}

	answers := make([]answer, 0, len(up.chain)+len(admitted))
	owner := q.question.Name
	for _, c := range up.chain {
		answers = append(answers, answer{owner: owner, cname: &c.target})
		owner = c.target
	}
	for _, a := range admitted {
		answers = append(answers, answer{owner: owner, a: a.As4()})
	}
	return s.replyTTL(q, dnsmessage.RCodeSuccess, answers, uint32(ttl/time.Second), limit), nil
}

// clamp turns a record TTL in seconds into the pin time.
func (s *Server) clamp(secs uint32) time.Duration {
	return min(max(time.Duration(secs)*time.Second, s.cfg.MinTTL), s.cfg.MaxTTL)
}

// parseQuery parses msg as an untrusted query. It returns either a query
// to resolve, or the response to send (or a drop) when msg is not one.
func (s *Server) parseQuery(msg []byte, limit int) (query, []byte, error) {
	var p dnsmessage.Parser
	var q query
	h, err := p.Start(msg)
	if err != nil {
		s.event(Event{Kind: Malformed, Reason: "dropped: header does not parse"})
		return q, nil, fmt.Errorf("%w: %v", ErrDropped, err)
	}
	if h.Response {
		s.event(Event{Kind: Malformed, Reason: "dropped: message is a response"})
		return q, nil, fmt.Errorf("%w: message is a response", ErrDropped)
	}
	q.hdr = h
	bad := func(rcode dnsmessage.RCode, reason string) (query, []byte, error) {
		s.event(Event{Kind: Malformed, Name: q.name, Reason: rcodeString(rcode) + ": " + reason})
		return q, s.reply(query{hdr: h}, rcode, nil, limit), nil
	}
	if h.OpCode != 0 {
		return bad(dnsmessage.RCodeNotImplemented, "opcode "+strconv.Itoa(int(h.OpCode)))
	}
	question, err := p.Question()
	if err == dnsmessage.ErrSectionDone {
		return bad(dnsmessage.RCodeFormatError, "no question")
	} else if err != nil {
		return bad(dnsmessage.RCodeFormatError, "question does not parse")
	}
	q.name, _ = lowerName(question.Name)
	if _, err := p.Question(); err != dnsmessage.ErrSectionDone {
		return bad(dnsmessage.RCodeFormatError, "more than one question")
	}
	if _, err := p.AnswerHeader(); err != dnsmessage.ErrSectionDone {
		return bad(dnsmessage.RCodeFormatError, "answer section is not empty")
	}
	if _, err := p.AuthorityHeader(); err != dnsmessage.ErrSectionDone {
		return bad(dnsmessage.RCodeFormatError, "authority section is not empty")
	}
	for {
		rh, err := p.AdditionalHeader()
		if err == dnsmessage.ErrSectionDone {
			break
		} else if err != nil {
			return bad(dnsmessage.RCodeFormatError, "additional record does not parse")
		}
		if rh.Type != dnsmessage.TypeOPT {
			if err := p.SkipAdditional(); err != nil {
				return bad(dnsmessage.RCodeFormatError, "additional record does not parse")
			}
			continue
		}
		if q.edns {
			return bad(dnsmessage.RCodeFormatError, "more than one OPT record")
		}
		if rh.Name.Length != 1 || rh.Name.Data[0] != '.' {
			return bad(dnsmessage.RCodeFormatError, "OPT record not owned by the root")
		}
		if _, err := p.OPTResource(); err != nil {
			return bad(dnsmessage.RCodeFormatError, "OPT record does not parse")
		}
		q.edns = true
		q.ednsSize = int(rh.Class)
		q.ednsVer = uint8(rh.TTL >> 16)
	}
	q.question = question
	if q.edns && q.ednsVer != 0 {
		s.event(Event{Kind: Malformed, Name: q.name, Reason: "BADVERS: EDNS version " + strconv.Itoa(int(q.ednsVer))})
		return q, s.reply(q, rcodeBADVERS, nil, limit), nil
	}
	return q, nil, nil
}

// lowerName returns n lowercased (ASCII) without its trailing dot, and
// whether it is a name this resolver may allow: not the root, and only
// letters, digits, hyphens and dots.
func lowerName(n dnsmessage.Name) (string, bool) {
	d := n.Data[:n.Length]
	if len(d) > 0 && d[len(d)-1] == '.' {
		d = d[:len(d)-1]
	}
	b := make([]byte, len(d))
	ok := len(d) > 0
	for i, c := range d {
		switch {
		case c >= 'A' && c <= 'Z':
			c += 'a' - 'A'
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-', c == '.':
		default:
			ok = false
		}
		b[i] = c
	}
	return string(b), ok
}

// reply builds a response without records.
func (s *Server) reply(q query, rcode dnsmessage.RCode, answers []answer, limit int) []byte {
	return s.replyTTL(q, rcode, answers, 0, limit)
}

// replyTTL builds the response to q with the answers, each with TTL ttl.
// limit is the size limit, or 0 for the datagram limit q allows. When the
// response does not fit, it keeps the longest prefix of answers that does
// and sets TC.
func (s *Server) replyTTL(q query, rcode dnsmessage.RCode, answers []answer, ttl uint32, limit int) []byte {
	if limit == 0 {
		limit = udpMinSize
		if q.edns && q.ednsSize > udpMinSize {
			limit = min(q.ednsSize, udpMaxSize)
		}
	}
	build := func(n int, tc bool) []byte {
		b, err := buildResponse(q, rcode, answers[:n], ttl, tc)
		if err != nil {
			return minimalResponse(q.hdr, dnsmessage.RCodeServerFailure)
		}
		return b
	}
	full := build(len(answers), false)
	if len(full) <= limit {
		return full
	}
	// Largest n whose response fits; n = 0 always fits a valid query
	// (header, one question of at most 259 bytes, one OPT of 11).
	lo, hi := 0, len(answers)-1
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if len(build(mid, true)) <= limit {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return build(lo, true)
}

func buildResponse(q query, rcode dnsmessage.RCode, answers []answer, ttl uint32, tc bool) ([]byte, error) {
	hdr := dnsmessage.Header{
		ID:                 q.hdr.ID,
		Response:           true,
		OpCode:             q.hdr.OpCode,
		RecursionDesired:   q.hdr.RecursionDesired,
		RecursionAvailable: true,
		Truncated:          tc,
		RCode:              rcode & 0xf,
	}
	b := dnsmessage.NewBuilder(make([]byte, 0, 512), hdr)
	b.EnableCompression()
	if q.question.Name.Length > 0 {
		if err := b.StartQuestions(); err != nil {
			return nil, err
		}
		if err := b.Question(q.question); err != nil {
			return nil, err
		}
	}
	if err := b.StartAnswers(); err != nil {
		return nil, err
	}
	for _, a := range answers {
		rh := dnsmessage.ResourceHeader{Name: a.owner, Class: dnsmessage.ClassINET, TTL: ttl}
		var err error
		if a.cname != nil {
			err = b.CNAMEResource(rh, dnsmessage.CNAMEResource{CNAME: *a.cname})
		} else {
			err = b.AResource(rh, dnsmessage.AResource{A: a.a})
		}
		if err != nil {
			return nil, err
		}
	}
	if q.edns {
		if err := b.StartAdditionals(); err != nil {
			return nil, err
		}
		var rh dnsmessage.ResourceHeader
		if err := rh.SetEDNS0(udpMaxSize, rcode, false); err != nil {
			return nil, err
		}
		if err := b.OPTResource(rh, dnsmessage.OPTResource{}); err != nil {
			return nil, err
		}
	}
	return b.Finish()
}

// minimalResponse is a header-only response, for when building fails.
func minimalResponse(h dnsmessage.Header, rcode dnsmessage.RCode) []byte {
	var bits uint16 = 1<<15 | uint16(h.OpCode&0xf)<<11 | 1<<7 | uint16(rcode&0xf)
	if h.RecursionDesired {
		bits |= 1 << 8
	}
	return []byte{byte(h.ID >> 8), byte(h.ID), byte(bits >> 8), byte(bits), 0, 0, 0, 0, 0, 0, 0, 0}
}

func rcodeString(r dnsmessage.RCode) string {
	switch r {
	case dnsmessage.RCodeSuccess:
		return "NOERROR"
	case dnsmessage.RCodeFormatError:
		return "FORMERR"
	case dnsmessage.RCodeServerFailure:
		return "SERVFAIL"
	case dnsmessage.RCodeNameError:
		return "NXDOMAIN"
	case dnsmessage.RCodeNotImplemented:
		return "NOTIMP"
	case dnsmessage.RCodeRefused:
		return "REFUSED"
	case rcodeBADVERS:
		return "BADVERS"
	}
	return "RCODE " + strconv.Itoa(int(r))
}

func (s *Server) event(e Event) {
	if s.cfg.Event == nil {
		return
	}
	e.Time = time.Now()
	s.cfg.Event(e)
}
