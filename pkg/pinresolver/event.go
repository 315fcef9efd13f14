package pinresolver

import (
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// EventKind says what a resolver decision was.
type EventKind int

// Kinds of Event.
const (
	// Pinned: addresses of an allowed name were admitted and pinned.
	Pinned EventKind = iota
	// Refused: the name is not allowed (or the query class is not IN).
	Refused
	// Rebinding: an address of an allowed name was not admitted.
	Rebinding
	// Upstream: the upstream exchange failed; the client got SERVFAIL.
	Upstream
	// Malformed: the query was answered FORMERR, NOTIMP or BADVERS, or
	// dropped.
	Malformed
	// Unpinned: an allowed name was answered without pinning anything: a
	// query type other than A, an upstream RCODE other than NOERROR, or no
	// admitted A record.
	Unpinned
	// PinFailed: Config.Pin returned an error; the client got SERVFAIL.
	PinFailed
	// Local: an allowed name was answered with Config.Local's address
	// (the credential broker), without the upstream and without a pin.
	Local
)

// LocalTTL is the TTL of an answer from Config.Local.
const LocalTTL = 60 * time.Second

func (k EventKind) String() string {
	switch k {
	case Pinned:
		return "pinned"
	case Refused:
		return "refused"
	case Rebinding:
		return "rebinding"
	case Upstream:
		return "upstream"
	case Malformed:
		return "malformed"
	case Unpinned:
		return "unpinned"
	case PinFailed:
		return "pin-failed"
	case Local:
		return "brokered"
	}
	return "kind-" + strconv.Itoa(int(k))
}

// Event records one resolver decision.
type Event struct {
	Time time.Time
	Kind EventKind
	// Name is the query name, lowercased, without trailing dot; empty when
	// the query did not parse that far.
	Name string
	// Rule is the Verdict.Rule that decided the name.
	Rule      string
	Addresses []netip.Addr
	TTL       time.Duration
	Reason    string
}

// String renders e on one line, without its time (loggers add their own):
//
//	pinned name=example.com rule=*.example.com addrs=93.184.216.34 ttl=5m0s
//
// Every byte of Name outside [a-z0-9.-_*] is escaped as \xNN; Rule and
// Reason are quoted with every byte outside printable ASCII escaped, so
// neither can carry a terminal escape or a line break into a log.
func (e Event) String() string {
	var b strings.Builder
	b.WriteString(e.Kind.String())
	b.WriteString(" name=")
	b.WriteString(EscapeName(e.Name))
	if e.Rule != "" {
		b.WriteString(" rule=")
		b.WriteString(quoteASCII(e.Rule))
	}
	if len(e.Addresses) > 0 {
		b.WriteString(" addrs=")
		for i, a := range e.Addresses {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(a.String())
		}
	}
	if e.TTL != 0 {
		b.WriteString(" ttl=")
		b.WriteString(e.TTL.String())
	}
	if e.Reason != "" {
		b.WriteString(" reason=")
		b.WriteString(quoteASCII(e.Reason))
	}
	return b.String()
}

// EscapeName returns name with every byte outside [a-z0-9.-_*] written as
// \xNN (a backslash included), so the result is printable and unambiguous.
func EscapeName(name string) string {
	const hex = "0123456789abcdef"
	var b strings.Builder
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_' || c == '*' {
			b.WriteByte(c)
			continue
		}
		b.WriteString(`\x`)
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&0xf])
	}
	return b.String()
}

// quoteASCII quotes s with every byte outside printable ASCII escaped.
func quoteASCII(s string) string {
	return strconv.QuoteToASCII(s)
}
