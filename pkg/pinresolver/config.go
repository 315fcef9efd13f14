package pinresolver

import (
	"context"
	"net"
	"net/netip"
	"time"
)

// Defaults applied by New to zero fields of Config.
const (
	DefaultMinTTL          = 10 * time.Second
	DefaultMaxTTL          = time.Hour
	DefaultUpstreamTimeout = 2 * time.Second
	DefaultMaxUDPInFlight  = 64
	DefaultMaxTCPConns     = 16
	DefaultTCPIdleTimeout  = 10 * time.Second
)

// MaxCNAMEHops bounds the CNAME chain followed in an upstream answer.
const MaxCNAMEHops = 8

// Verdict is the decision on one query name.
type Verdict struct {
	Allowed bool
	// Rule is the pattern that decided, for logs; empty when none did.
	Rule string
}

// Config configures a Server. Names, Admit and Pin are required.
type Config struct {
	// Names decides a query name (lowercased ASCII, no trailing dot). Must
	// be safe for any string.
	Names func(name string) Verdict
	// Upstream is the IPv4 resolver (port 53 normally) allowed names are
	// forwarded to.
	Upstream netip.AddrPort
	// Admit decides whether an address learned from an allowed name may be
	// pinned: false when the static policy denies it (private ranges, deny
	// prefixes, structural ranges). reason is a one-line explanation.
	Admit func(a netip.Addr) (ok bool, reason string)
	// Pin adds addrs to the permitted set for ttl (already clamped). Called
	// before the answer is sent to the client, so a client can connect as
	// soon as it has the answer. An error makes the query SERVFAIL. Pin may
	// be called concurrently; it must extend an existing pin to at least
	// ttl and never shorten it.
	Pin func(addrs []netip.Addr, ttl time.Duration) error
	// Local, when not nil, answers some allowed names itself: for a name
	// it returns true for, an A query is answered with addr alone (TTL
	// LocalTTL), without asking the upstream and without pinning. The
	// network sidecar uses it to send brokered names to the credential
	// broker. Must be safe for any string.
	Local func(name string) (addr netip.Addr, ok bool)
	// Event receives one record per decision (may be nil). Called
	// synchronously, possibly concurrently; must not block long.
	Event func(Event)
	// MinTTL and MaxTTL clamp the pin time; zero values mean DefaultMinTTL
	// and DefaultMaxTTL.
	MinTTL, MaxTTL time.Duration
	// UpstreamTimeout bounds each upstream attempt (UDP, then TCP after a
	// truncated answer); zero means DefaultUpstreamTimeout.
	UpstreamTimeout time.Duration
	// Dial opens connections to the upstream; nil means a net.Dialer.
	// Tests inject fakes.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)

	// MaxUDPInFlight bounds the queries ServeUDP handles at once; queries
	// beyond it are dropped. Zero means DefaultMaxUDPInFlight.
	MaxUDPInFlight int
	// MaxTCPConns bounds the connections ServeTCP serves at once;
	// connections beyond it are closed at once. Zero means
	// DefaultMaxTCPConns.
	MaxTCPConns int
	// TCPIdleTimeout closes a TCP connection that has not delivered a
	// complete query for this long; zero means DefaultTCPIdleTimeout.
	TCPIdleTimeout time.Duration
}

// withDefaults validates c and fills its zero fields.
func (c Config) withDefaults() (Config, error) {
	switch {
	case c.Names == nil:
		return c, &ConfigError{Field: "Names", Err: ErrRequired}
	case c.Admit == nil:
		return c, &ConfigError{Field: "Admit", Err: ErrRequired}
	case c.Pin == nil:
		return c, &ConfigError{Field: "Pin", Err: ErrRequired}
	case !c.Upstream.IsValid() || !c.Upstream.Addr().Is4() || c.Upstream.Addr().IsUnspecified() || c.Upstream.Port() == 0:
		return c, &ConfigError{Field: "Upstream", Value: c.Upstream.String(), Err: ErrUpstreamAddr}
	}
	for _, d := range []struct {
		field string
		v     *time.Duration
		def   time.Duration
	}{
		{"MinTTL", &c.MinTTL, DefaultMinTTL},
		{"MaxTTL", &c.MaxTTL, DefaultMaxTTL},
		{"UpstreamTimeout", &c.UpstreamTimeout, DefaultUpstreamTimeout},
		{"TCPIdleTimeout", &c.TCPIdleTimeout, DefaultTCPIdleTimeout},
	} {
		if *d.v < 0 {
			return c, &ConfigError{Field: d.field, Value: d.v.String(), Err: ErrNegative}
		}
		if *d.v == 0 {
			*d.v = d.def
		}
	}
	if c.MinTTL > c.MaxTTL {
		return c, &ConfigError{Field: "MinTTL", Value: c.MinTTL.String() + " > " + c.MaxTTL.String(), Err: ErrTTLRange}
	}
	for _, n := range []struct {
		field string
		v     *int
		def   int
	}{
		{"MaxUDPInFlight", &c.MaxUDPInFlight, DefaultMaxUDPInFlight},
		{"MaxTCPConns", &c.MaxTCPConns, DefaultMaxTCPConns},
	} {
		if *n.v < 0 {
			return c, &ConfigError{Field: n.field, Err: ErrNegative}
		}
		if *n.v == 0 {
			*n.v = n.def
		}
	}
	if c.Dial == nil {
		var d net.Dialer
		c.Dial = d.DialContext
	}
	return c, nil
}
