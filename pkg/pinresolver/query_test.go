package pinresolver

import (
	"context"
	"encoding/binary"
	"errors"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// Wire pieces for hand-made queries.
func wireHeader(id, flags, qd, an, ns, ar uint16) []byte {
	var b []byte
	for _, v := range []uint16{id, flags, qd, an, ns, ar} {
		b = binary.BigEndian.AppendUint16(b, v)
	}
	return b
}

const (
	flagRD      = 1 << 8
	flagQR      = 1 << 15
	opcodeShift = 11
)

// wireQuestion is example.com. of type A (or qtype) and class IN (or
// qclass).
func wireQuestion(qtype, qclass uint16) []byte {
	b := []byte{7, 'e', 'x', 'a', 'm', 'p', 'l', 'e', 3, 'c', 'o', 'm', 0}
	b = binary.BigEndian.AppendUint16(b, qtype)
	return binary.BigEndian.AppendUint16(b, qclass)
}

// wireA is an A record for example.com. (by pointer to offset 12).
var wireA = []byte{0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 93, 184, 216, 34}

// wireOPT is an OPT record owned by the root with the given EDNS version.
func wireOPT(version byte) []byte {
	return []byte{0, 0, 41, 0x10, 0, 0, version, 0, 0, 0, 0}
}

func cat(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

func TestMalformedQueries(t *testing.T) {
	const id = 0xabcd
	q := wireQuestion(1, 1)
	for _, tc := range []struct {
		name  string
		msg   []byte
		drop  bool
		rcode dnsmessage.RCode
		extRC dnsmessage.RCode // checked when the response has an OPT
		qEcho bool
	}{
		{name: "empty", msg: nil, drop: true},
		{name: "short header", msg: []byte{0xab, 0xcd, 1}, drop: true},
		{name: "response", msg: cat(wireHeader(id, flagQR|flagRD, 1, 0, 0, 0), q), drop: true},
		{name: "no question", msg: wireHeader(id, flagRD, 0, 0, 0, 0), rcode: dnsmessage.RCodeFormatError},
		{name: "two questions", msg: cat(wireHeader(id, flagRD, 2, 0, 0, 0), q, q), rcode: dnsmessage.RCodeFormatError},
		{name: "question count beyond message", msg: cat(wireHeader(id, flagRD, 2, 0, 0, 0), q), rcode: dnsmessage.RCodeFormatError},
		{name: "truncated question", msg: cat(wireHeader(id, flagRD, 1, 0, 0, 0), q[:8]), rcode: dnsmessage.RCodeFormatError},
		{name: "pointer loop", msg: cat(wireHeader(id, flagRD, 1, 0, 0, 0), []byte{0xc0, 12, 0, 1, 0, 1}), rcode: dnsmessage.RCodeFormatError},
		{name: "forward pointer", msg: cat(wireHeader(id, flagRD, 1, 0, 0, 0), []byte{0xc0, 200, 0, 1, 0, 1}), rcode: dnsmessage.RCodeFormatError},
		{name: "reserved label type", msg: cat(wireHeader(id, flagRD, 1, 0, 0, 0), []byte{0x41, 'a', 0, 0, 1, 0, 1}), rcode: dnsmessage.RCodeFormatError},
		{name: "dotted label", msg: cat(wireHeader(id, flagRD, 1, 0, 0, 0), []byte{3, 'a', '.', 'b', 0, 0, 1, 0, 1}), rcode: dnsmessage.RCodeFormatError},
		{name: "answer record", msg: cat(wireHeader(id, flagRD, 1, 1, 0, 0), q, wireA), rcode: dnsmessage.RCodeFormatError},
		{name: "authority record", msg: cat(wireHeader(id, flagRD, 1, 0, 1, 0), q, wireA), rcode: dnsmessage.RCodeFormatError},
		{name: "additional count beyond message", msg: cat(wireHeader(id, flagRD, 1, 0, 0, 2), q, wireOPT(0)), rcode: dnsmessage.RCodeFormatError},
		{name: "two OPT records", msg: cat(wireHeader(id, flagRD, 1, 0, 0, 2), q, wireOPT(0), wireOPT(0)), rcode: dnsmessage.RCodeFormatError},
		{name: "OPT not owned by root", msg: cat(wireHeader(id, flagRD, 1, 0, 0, 1), q, []byte{0xc0, 12}, wireOPT(0)[1:]), rcode: dnsmessage.RCodeFormatError},
		{name: "opcode STATUS", msg: cat(wireHeader(id, flagRD|2<<opcodeShift, 1, 0, 0, 0), q), rcode: dnsmessage.RCodeNotImplemented},
		{name: "EDNS version 1", msg: cat(wireHeader(id, flagRD, 1, 0, 0, 1), q, wireOPT(1)), rcode: dnsmessage.RCodeSuccess, extRC: rcodeBADVERS, qEcho: true},
		{name: "class CH", msg: cat(wireHeader(id, flagRD, 1, 0, 0, 0), wireQuestion(1, 3)), rcode: dnsmessage.RCodeRefused, qEcho: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hs := newHarness(t, answerWith(dnsmessage.RCodeSuccess, rrA("example.com", "93.184.216.34", 60)))
			resp, err := hs.s.Resolve(context.Background(), tc.msg)
			if tc.drop {
				if resp != nil || !errors.Is(err, ErrDropped) {
					t.Fatalf("got %x, %v; want a drop", resp, err)
				}
				if len(hs.eventsOf(Malformed)) != 1 {
					t.Fatalf("events %+v", hs.events)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var m dnsmessage.Message
			if err := m.Unpack(resp); err != nil {
				t.Fatalf("response does not parse: %v", err)
			}
			if m.ID != id || !m.Response || !m.RecursionDesired || m.RCode != tc.rcode {
				t.Fatalf("header %+v, want rcode %v", m.Header, tc.rcode)
			}
			if got := len(m.Questions) == 1; got != tc.qEcho {
				t.Fatalf("questions %+v", m.Questions)
			}
			if tc.extRC != 0 {
				if len(m.Additionals) != 1 || m.Additionals[0].Header.ExtendedRCode(m.RCode) != tc.extRC {
					t.Fatalf("additionals %+v, want extended rcode %v", m.Additionals, tc.extRC)
				}
			}
			if len(m.Answers) != 0 || hs.up.udp.Load() != 0 || len(hs.pinned()) != 0 {
				t.Fatal("malformed query answered, forwarded or pinned")
			}
		})
	}
}

func TestQueryAdditionalRecordsIgnored(t *testing.T) {
	// An OPT and a non-OPT additional record (a client's stray A record
	// here) are accepted; the stray record is ignored.
	hs := newHarness(t, answerWith(dnsmessage.RCodeSuccess, rrA("example.com", "93.184.216.34", 60)))
	m := hs.resolve(t, cat(wireHeader(0x55, flagRD, 1, 0, 0, 2), wireQuestion(1, 1), wireA, wireOPT(0)))
	if m.RCode != dnsmessage.RCodeSuccess || len(answerAddrs(m)) != 1 || len(m.Additionals) != 1 || m.Additionals[0].Header.Type != dnsmessage.TypeOPT {
		t.Fatalf("response %+v", m)
	}
}

func TestNewValidatesConfig(t *testing.T) {
	ok := func(c *Config) {}
	for _, tc := range []struct {
		name  string
		mod   func(*Config)
		field string
		err   error
	}{
		{"valid", ok, "", nil},
		{"no Names", func(c *Config) { c.Names = nil }, "Names", ErrRequired},
		{"no Admit", func(c *Config) { c.Admit = nil }, "Admit", ErrRequired},
		{"no Pin", func(c *Config) { c.Pin = nil }, "Pin", ErrRequired},
		{"no upstream", func(c *Config) { c.Upstream = netip.AddrPort{} }, "Upstream", ErrUpstreamAddr},
		{"IPv6 upstream", func(c *Config) { c.Upstream = netip.MustParseAddrPort("[2001:db8::53]:53") }, "Upstream", ErrUpstreamAddr},
		{"IPv4-mapped upstream", func(c *Config) { c.Upstream = netip.MustParseAddrPort("[::ffff:192.0.2.53]:53") }, "Upstream", ErrUpstreamAddr},
		{"port 0", func(c *Config) { c.Upstream = netip.MustParseAddrPort("192.0.2.53:0") }, "Upstream", ErrUpstreamAddr},
		{"unspecified upstream", func(c *Config) { c.Upstream = netip.MustParseAddrPort("0.0.0.0:53") }, "Upstream", ErrUpstreamAddr},
		{"MinTTL above MaxTTL", func(c *Config) { c.MinTTL, c.MaxTTL = time.Hour, time.Minute }, "MinTTL", ErrTTLRange},
		{"MinTTL above default MaxTTL", func(c *Config) { c.MinTTL = 2 * time.Hour }, "MinTTL", ErrTTLRange},
		{"negative timeout", func(c *Config) { c.UpstreamTimeout = -1 }, "UpstreamTimeout", ErrNegative},
		{"negative MaxTCPConns", func(c *Config) { c.MaxTCPConns = -1 }, "MaxTCPConns", ErrNegative},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{
				Names:    testNames,
				Upstream: netip.MustParseAddrPort("192.0.2.53:53"),
				Admit:    testAdmit,
				Pin:      func([]netip.Addr, time.Duration) error { return nil },
			}
			tc.mod(&cfg)
			s, err := New(cfg)
			if tc.err == nil {
				if err != nil {
					t.Fatal(err)
				}
				if s.cfg.MinTTL != DefaultMinTTL || s.cfg.MaxTTL != DefaultMaxTTL || s.cfg.UpstreamTimeout != DefaultUpstreamTimeout || s.cfg.Dial == nil {
					t.Fatalf("defaults not applied: %+v", s.cfg)
				}
				return
			}
			var ce *ConfigError
			if !errors.Is(err, tc.err) || !errors.As(err, &ce) || ce.Field != tc.field {
				t.Fatalf("error %v, want %v on %s", err, tc.err, tc.field)
			}
		})
	}
}
