package pinresolver

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

func TestAllowedNamePinnedAndAnswered(t *testing.T) {
	hs := newHarness(t, answerWith(dnsmessage.RCodeSuccess, rrA("www.example.com", "93.184.216.34", 300)))
	m := hs.resolve(t, mkQuery(0x1234, "www.example.com", dnsmessage.TypeA, 0))

	if m.ID != 0x1234 || !m.Response || !m.RecursionDesired || !m.RecursionAvailable || m.RCode != dnsmessage.RCodeSuccess {
		t.Fatalf("header = %+v", m.Header)
	}
	if len(m.Questions) != 1 || m.Questions[0].Name.String() != "www.example.com." || m.Questions[0].Type != dnsmessage.TypeA {
		t.Fatalf("question not echoed: %+v", m.Questions)
	}
	if got := answerAddrs(m); !slices.Equal(got, addrs("93.184.216.34")) {
		t.Fatalf("answer addresses = %v", got)
	}
	if ttl := m.Answers[0].Header.TTL; ttl != 300 {
		t.Errorf("answer TTL = %d, want 300", ttl)
	}
	pins := hs.pinned()
	if len(pins) != 1 || !slices.Equal(pins[0].addrs, addrs("93.184.216.34")) || pins[0].ttl != 300*time.Second {
		t.Fatalf("pins = %+v", pins)
	}
	ev := hs.eventsOf(Pinned)
	if len(ev) != 1 || ev[0].Name != "www.example.com" || ev[0].Rule != "*.example.com" || ev[0].TTL != 300*time.Second {
		t.Fatalf("Pinned events = %+v", ev)
	}

	// The upstream got one fresh A query for the lowercased name.
	q := hs.up.received()
	if len(q) != 1 || q[0].Questions[0].Name.String() != "www.example.com." || q[0].Questions[0].Type != dnsmessage.TypeA || !q[0].RecursionDesired {
		t.Fatalf("upstream queries = %+v", q)
	}
}

func TestUpstreamIDIsFresh(t *testing.T) {
	hs := newHarness(t, answerWith(dnsmessage.RCodeSuccess, rrA("example.com", "93.184.216.34", 60)))
	ids := map[uint16]bool{}
	for range 16 {
		hs.resolve(t, mkQuery(7, "example.com", dnsmessage.TypeA, 0))
	}
	for _, q := range hs.up.received() {
		ids[q.ID] = true
	}
	// 16 draws from 65536 collide to fewer than 12 distinct values with
	// negligible probability; a copied client ID gives one.
	if len(ids) < 12 {
		t.Fatalf("upstream IDs not random: %v", ids)
	}
}

func TestDisallowedNameRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		typ  dnsmessage.Type
		rule string
	}{
		{"evil.org", dnsmessage.TypeA, ""},
		{"evil.org", dnsmessage.TypeAAAA, ""},
		{"evil.org", dnsmessage.TypeTXT, ""},
		{"deny.example.com", dnsmessage.TypeA, "!deny.example.com"},
		{"example.com.evil.org", dnsmessage.TypeA, ""},
	} {
		t.Run(tc.name+"/"+tc.typ.String(), func(t *testing.T) {
			hs := newHarness(t, answerWith(dnsmessage.RCodeSuccess, rrA(tc.name, "93.184.216.34", 60)))
			m := hs.resolve(t, mkQuery(9, tc.name, tc.typ, 0))
			if m.RCode != dnsmessage.RCodeRefused || len(m.Answers) != 0 || m.ID != 9 || len(m.Questions) != 1 {
				t.Fatalf("response = %+v", m)
			}
			if n := hs.up.udp.Load() + hs.up.tcp.Load(); n != 0 {
				t.Fatalf("upstream queried %d times", n)
			}
			if len(hs.pinned()) != 0 {
				t.Fatal("pinned")
			}
			ev := hs.eventsOf(Refused)
			if len(ev) != 1 || ev[0].Name != tc.name || ev[0].Rule != tc.rule {
				t.Fatalf("Refused events = %+v", ev)
			}
		})
	}
}

func TestNamesConsultedLowercased(t *testing.T) {
	hs := newHarness(t, answerWith(dnsmessage.RCodeSuccess, rrA("www.example.com", "93.184.216.34", 60)))
	m := hs.resolve(t, mkQuery(1, "WwW.ExAmple.COM", dnsmessage.TypeA, 0))
	if !slices.Equal(hs.names, []string{"www.example.com"}) {
		t.Fatalf("Names called with %q", hs.names)
	}
	if got := m.Questions[0].Name.String(); got != "WwW.ExAmple.COM." {
		t.Fatalf("question echoed as %q, want the original case", got)
	}
	if len(m.Answers) != 1 || m.Answers[0].Header.Name.String() != "WwW.ExAmple.COM." {
		t.Fatalf("answers = %+v", m.Answers)
	}
	// And the deny decision is reached for the mixed-case spelling too.
	m = hs.resolve(t, mkQuery(2, "DENY.example.com", dnsmessage.TypeA, 0))
	if m.RCode != dnsmessage.RCodeRefused {
		t.Fatalf("DENY.example.com: rcode %v", m.RCode)
	}
}

func TestNonLDHNameRefusedWithoutConsultingNames(t *testing.T) {
	for _, name := range []string{"a_b.example.com", "a\x1b[31m.example.com", "a b.example.com", "caf\xc3\xa9.example.com", "a\x00.example.com"} {
		t.Run(fmt.Sprintf("%q", name), func(t *testing.T) {
			hs := newHarness(t, answerWith(dnsmessage.RCodeSuccess, rrA("x.example.com", "93.184.216.34", 60)))
			m := hs.resolve(t, mkQuery(3, name, dnsmessage.TypeA, 0))
			if m.RCode != dnsmessage.RCodeRefused {
				t.Fatalf("rcode %v", m.RCode)
			}
			if len(hs.names) != 0 {
				t.Fatalf("Names consulted with %q", hs.names)
			}
			if ev := hs.eventsOf(Refused); len(ev) != 1 {
				t.Fatalf("Refused events = %+v", ev)
			}
		})
	}
	// The root name is never allowed either.
	hs := newHarness(t, nil)
	if m := hs.resolve(t, mkQuery(4, ".", dnsmessage.TypeA, 0)); m.RCode != dnsmessage.RCodeRefused {
		t.Fatalf("root: rcode %v", m.RCode)
	}
}

func TestCNAMEChain(t *testing.T) {
	hs := newHarness(t, answerWith(dnsmessage.RCodeSuccess,
		rrA("other.net", "93.184.216.40", 300),           // off chain
		rrCNAME("www.example.com", "A.cdn.net", 600),     // target case differs from owner below
		rrA("www.example.com", "93.184.216.41", 300),     // owned by a chain name, not the final one
		rrCNAME("a.cdn.net", "b.cdn.net", 120),           //
		rrCNAME("unrelated.net", "b.cdn.net", 5),         // off chain: must not lower the TTL
		rrA("a.cdn.net", "93.184.216.42", 300),           // intermediate name
		rrA("B.CDN.NET", "93.184.216.34", 300),           // final name, other case
		rrA("b.cdn.net", "93.184.216.35", 200),           //
		rrCNAME("b.cdn.net.evil.org", "x.evil.org", 300), // off chain
	))
	m := hs.resolve(t, mkQuery(5, "www.example.com", dnsmessage.TypeA, 0))
	if m.RCode != dnsmessage.RCodeSuccess {
		t.Fatalf("rcode %v", m.RCode)
	}
	pins := hs.pinned()
	if len(pins) != 1 || !slices.Equal(pins[0].addrs, addrs("93.184.216.34", "93.184.216.35")) {
		t.Fatalf("pins = %+v", pins)
	}
	if pins[0].ttl != 120*time.Second {
		t.Fatalf("pin ttl = %v, want the chain minimum 2m0s", pins[0].ttl)
	}
	var got []string
	for _, r := range m.Answers {
		got = append(got, r.Header.Name.String()+" "+r.Body.GoString()[len("dnsmessage."):])
		if r.Header.TTL != 120 {
			t.Errorf("%v: TTL %d, want 120", r.Header.Name, r.Header.TTL)
		}
	}
	want := []string{
		`www.example.com. CNAMEResource{CNAME: dnsmessage.MustNewName("A.cdn.net.")}`,
		`A.cdn.net. CNAMEResource{CNAME: dnsmessage.MustNewName("b.cdn.net.")}`,
		`b.cdn.net. AResource{A: [4]byte{93, 184, 216, 34}}`,
		`b.cdn.net. AResource{A: [4]byte{93, 184, 216, 35}}`,
	}
	if !slices.Equal(got, want) {
		t.Fatalf("answers:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestCNAMEChainRefused(t *testing.T) {
	long := func(hops int) []dnsmessage.Resource {
		rs := []dnsmessage.Resource{rrCNAME("www.example.com", "h1.cdn.net", 60)}
		for i := 1; i < hops; i++ {
			rs = append(rs, rrCNAME(fmt.Sprintf("h%d.cdn.net", i), fmt.Sprintf("h%d.cdn.net", i+1), 60))
		}
		return append(rs, rrA(fmt.Sprintf("h%d.cdn.net", hops), "93.184.216.34", 60))
	}
	for _, tc := range []struct {
		name    string
		records []dnsmessage.Resource
		err     error
	}{
		{"loop", []dnsmessage.Resource{
			rrCNAME("www.example.com", "a.cdn.net", 60),
			rrCNAME("a.cdn.net", "b.cdn.net", 60),
			rrCNAME("b.cdn.net", "A.cdn.net", 60),
			rrA("a.cdn.net", "93.184.216.34", 60),
		}, ErrCNAMELoop},
		{"self", []dnsmessage.Resource{rrCNAME("www.example.com", "WWW.example.com", 60)}, ErrCNAMELoop},
		{"ambiguous", []dnsmessage.Resource{
			rrCNAME("www.example.com", "a.cdn.net", 60),
			rrCNAME("www.example.com", "b.cdn.net", 60),
			rrA("a.cdn.net", "93.184.216.34", 60),
		}, ErrCNAMEAmbiguous},
		{"9 hops", long(9), ErrCNAMEChain},
		{"8 hops", long(8), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hs := newHarness(t, answerWith(dnsmessage.RCodeSuccess, tc.records...))
			m := hs.resolve(t, mkQuery(6, "www.example.com", dnsmessage.TypeA, 0))
			if tc.err == nil {
				if m.RCode != dnsmessage.RCodeSuccess || len(hs.pinned()) != 1 || len(m.Answers) != 9 {
					t.Fatalf("rcode %v, %d answers, pins %+v", m.RCode, len(m.Answers), hs.pinned())
				}
				return
			}
			if m.RCode != dnsmessage.RCodeServerFailure || len(m.Answers) != 0 {
				t.Fatalf("rcode %v, answers %v", m.RCode, m.Answers)
			}
			if len(hs.pinned()) != 0 {
				t.Fatalf("pinned %+v", hs.pinned())
			}
			ev := hs.eventsOf(Upstream)
			if len(ev) != 1 || !strings.Contains(ev[0].Reason, tc.err.Error()) {
				t.Fatalf("Upstream events = %+v, want reason %q", ev, tc.err)
			}
		})
	}
}

func TestAuthorityAndAdditionalNeverPinned(t *testing.T) {
	hs := newHarness(t, func(_ bool, q dnsmessage.Message) []byte {
		m := respond(q, dnsmessage.RCodeSuccess)
		m.Authorities = []dnsmessage.Resource{rrA("www.example.com", "93.184.216.50", 60)}
		m.Additionals = []dnsmessage.Resource{rrA("www.example.com", "93.184.216.51", 60), rrA("ns.example.com", "93.184.216.52", 60)}
		return pack(m)
	})
	m := hs.resolve(t, mkQuery(7, "www.example.com", dnsmessage.TypeA, 0))
	if m.RCode != dnsmessage.RCodeSuccess || len(m.Answers) != 0 || len(m.Authorities) != 0 || len(m.Additionals) != 0 {
		t.Fatalf("response = %+v", m)
	}
	if len(hs.pinned()) != 0 {
		t.Fatalf("pinned %+v", hs.pinned())
	}
	if ev := hs.eventsOf(Unpinned); len(ev) != 1 {
		t.Fatalf("Unpinned events = %+v", ev)
	}
}

func TestRebinding(t *testing.T) {
	for _, tc := range []struct {
		name    string
		answer  []string
		pinned  []string
		refused []string
	}{
		{"private only", []string{"10.1.2.3"}, nil, []string{"10.1.2.3"}},
		{"loopback", []string{"127.0.0.1"}, nil, []string{"127.0.0.1"}},
		{"mixed", []string{"192.168.1.1", "93.184.216.34", "127.0.0.1", "169.254.169.254", "93.184.216.35"},
			[]string{"93.184.216.34", "93.184.216.35"}, []string{"192.168.1.1", "127.0.0.1", "169.254.169.254"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var rs []dnsmessage.Resource
			for _, a := range tc.answer {
				rs = append(rs, rrA("www.example.com", a, 300))
			}
			hs := newHarness(t, answerWith(dnsmessage.RCodeSuccess, rs...))
			m := hs.resolve(t, mkQuery(8, "www.example.com", dnsmessage.TypeA, 0))
			if m.RCode != dnsmessage.RCodeSuccess {
				t.Fatalf("rcode %v", m.RCode)
			}
			if got := answerAddrs(m); !slices.Equal(got, addrs(tc.pinned...)) {
				t.Fatalf("answered %v, want %v", got, tc.pinned)
			}
			pins := hs.pinned()
			if len(tc.pinned) == 0 {
				if len(pins) != 0 {
					t.Fatalf("pinned %+v", pins)
				}
			} else if len(pins) != 1 || !slices.Equal(pins[0].addrs, addrs(tc.pinned...)) {
				t.Fatalf("pins = %+v, want %v", pins, tc.pinned)
			}
			var got []netip.Addr
			for _, e := range hs.eventsOf(Rebinding) {
				if e.Name != "www.example.com" || e.Reason == "" || len(e.Addresses) != 1 {
					t.Errorf("Rebinding event %+v", e)
				}
				got = append(got, e.Addresses...)
			}
			if !slices.Equal(got, addrs(tc.refused...)) {
				t.Fatalf("Rebinding addresses %v, want %v", got, tc.refused)
			}
		})
	}
}

func TestDuplicateAddressesPinnedOnce(t *testing.T) {
	hs := newHarness(t, answerWith(dnsmessage.RCodeSuccess,
		rrA("example.com", "93.184.216.34", 300), rrA("example.com", "93.184.216.34", 30), rrA("example.com", "10.0.0.1", 300), rrA("example.com", "10.0.0.1", 300)))
	m := hs.resolve(t, mkQuery(8, "example.com", dnsmessage.TypeA, 0))
	pins := hs.pinned()
	if len(pins) != 1 || !slices.Equal(pins[0].addrs, addrs("93.184.216.34")) || pins[0].ttl != 30*time.Second {
		t.Fatalf("pins = %+v", pins)
	}
	if len(m.Answers) != 1 || len(hs.eventsOf(Rebinding)) != 1 {
		t.Fatalf("answers %v, rebinding events %v", m.Answers, hs.eventsOf(Rebinding))
	}
}

func TestTTLClamp(t *testing.T) {
	for _, tc := range []struct {
		ttl     uint32
		pin     time.Duration
		answer  uint32
		minTTL  time.Duration
		maxTTL  time.Duration
		comment string
	}{
		{0, 10 * time.Second, 10, 0, 0, "TTL 0 raised to DefaultMinTTL"},
		{86400, time.Hour, 3600, 0, 0, "a day lowered to DefaultMaxTTL"},
		{300, 300 * time.Second, 300, 0, 0, "within range"},
		{1, 30 * time.Second, 30, 30 * time.Second, 2 * time.Minute, "configured minimum"},
		{600, 2 * time.Minute, 120, 30 * time.Second, 2 * time.Minute, "configured maximum"},
		{1<<32 - 1, time.Hour, 3600, 0, 0, "largest TTL"},
	} {
		t.Run(tc.comment, func(t *testing.T) {
			hs := newHarness(t, answerWith(dnsmessage.RCodeSuccess, rrA("example.com", "93.184.216.34", tc.ttl)), func(c *Config) {
				c.MinTTL, c.MaxTTL = tc.minTTL, tc.maxTTL
			})
			m := hs.resolve(t, mkQuery(10, "example.com", dnsmessage.TypeA, 0))
			pins := hs.pinned()
			if len(pins) != 1 || pins[0].ttl != tc.pin {
				t.Fatalf("pins = %+v, want ttl %v", pins, tc.pin)
			}
			if len(m.Answers) != 1 || m.Answers[0].Header.TTL != tc.answer {
				t.Fatalf("answers = %+v, want TTL %d", m.Answers, tc.answer)
			}
		})
	}
}

func TestNonATypesAnsweredEmptyNotForwarded(t *testing.T) {
	for _, typ := range []dnsmessage.Type{dnsmessage.TypeAAAA, dnsmessage.TypeTXT, dnsmessage.TypeMX, dnsmessage.TypeNS, dnsmessage.TypeALL, dnsmessage.TypeSRV, dnsmessage.Type(65)} {
		t.Run(typ.String(), func(t *testing.T) {
			hs := newHarness(t, answerWith(dnsmessage.RCodeSuccess, rrA("example.com", "93.184.216.34", 60)))
			m := hs.resolve(t, mkQuery(11, "example.com", typ, 0))
			if m.RCode != dnsmessage.RCodeSuccess || len(m.Answers) != 0 || len(m.Questions) != 1 || m.Questions[0].Type != typ {
				t.Fatalf("response = %+v", m)
			}
			if n := hs.up.udp.Load() + hs.up.tcp.Load(); n != 0 {
				t.Fatalf("forwarded %d times", n)
			}
			if len(hs.pinned()) != 0 || len(hs.eventsOf(Unpinned)) != 1 {
				t.Fatalf("pins %v events %v", hs.pinned(), hs.events)
			}
		})
	}
}

func TestUpstreamRCodePassedThrough(t *testing.T) {
	for _, rc := range []dnsmessage.RCode{dnsmessage.RCodeNameError, dnsmessage.RCodeServerFailure, dnsmessage.RCodeRefused} {
		t.Run(rc.String(), func(t *testing.T) {
			// Records in a failed answer are never used.
			hs := newHarness(t, answerWith(rc, rrA("example.com", "93.184.216.34", 60)))
			m := hs.resolve(t, mkQuery(12, "example.com", dnsmessage.TypeA, 0))
			if m.RCode != rc || len(m.Answers) != 0 {
				t.Fatalf("response = %+v", m)
			}
			if len(hs.pinned()) != 0 {
				t.Fatal("pinned")
			}
		})
	}
}

func TestSpoofResistance(t *testing.T) {
	good := func(q dnsmessage.Message) []byte {
		return pack(respond(q, dnsmessage.RCodeSuccess, rrA("www.example.com", "93.184.216.34", 60)))
	}
	for _, tc := range []struct {
		name  string
		forge func(q dnsmessage.Message) []byte
	}{
		{"ID", func(q dnsmessage.Message) []byte {
			q.ID++
			return good(q)
		}},
		{"question name", func(q dnsmessage.Message) []byte {
			q.Questions = slices.Clone(q.Questions)
			q.Questions[0].Name = mustName("www.example.org")
			return good(q)
		}},
		{"question type", func(q dnsmessage.Message) []byte {
			q.Questions = slices.Clone(q.Questions)
			q.Questions[0].Type = dnsmessage.TypeAAAA
			return good(q)
		}},
		{"no question", func(q dnsmessage.Message) []byte {
			q.Questions = nil
			return good(q)
		}},
		{"not a response", func(q dnsmessage.Message) []byte {
			m := respond(q, dnsmessage.RCodeSuccess, rrA("www.example.com", "93.184.216.34", 60))
			m.Response = false
			return pack(m)
		}},
		{"garbage", func(dnsmessage.Message) []byte { return []byte{1, 2, 3} }},
	} {
		t.Run(tc.name+"/alone", func(t *testing.T) {
			hs := newHarness(t, func(_ bool, q dnsmessage.Message) []byte { return tc.forge(q) })
			start := time.Now()
			m := hs.resolve(t, mkQuery(13, "www.example.com", dnsmessage.TypeA, 0))
			if m.RCode != dnsmessage.RCodeServerFailure || len(m.Answers) != 0 || len(hs.pinned()) != 0 {
				t.Fatalf("response %+v, pins %+v", m, hs.pinned())
			}
			if time.Since(start) < 250*time.Millisecond {
				t.Fatal("gave up before the timeout")
			}
			ev := hs.eventsOf(Upstream)
			if len(ev) != 1 || !strings.Contains(ev[0].Reason, ErrUpstreamMismatch.Error()) {
				t.Fatalf("Upstream events %+v", ev)
			}
		})
		// A forgery arriving first is ignored; the real answer still counts.
		t.Run(tc.name+"/before real answer", func(t *testing.T) {
			hs := newHarness(t, func(_ bool, q dnsmessage.Message) []byte { return good(q) })
			hs.up.mu.Lock()
			hs.up.preface = tc.forge
			hs.up.mu.Unlock()
			m := hs.resolve(t, mkQuery(13, "www.example.com", dnsmessage.TypeA, 0))
			if m.RCode != dnsmessage.RCodeSuccess || len(hs.pinned()) != 1 {
				t.Fatalf("response %+v, pins %+v", m, hs.pinned())
			}
		})
	}
}

func TestTruncatedUpstreamRetriedOverTCP(t *testing.T) {
	hs := newHarness(t, func(tcp bool, q dnsmessage.Message) []byte {
		if !tcp {
			m := respond(q, dnsmessage.RCodeSuccess, rrA("example.com", "93.184.216.99", 60))
			m.Truncated = true
			return pack(m)
		}
		return pack(respond(q, dnsmessage.RCodeSuccess, rrA("example.com", "93.184.216.34", 60), rrA("example.com", "93.184.216.35", 60)))
	})
	m := hs.resolve(t, mkQuery(14, "example.com", dnsmessage.TypeA, 0))
	if got := answerAddrs(m); !slices.Equal(got, addrs("93.184.216.34", "93.184.216.35")) {
		t.Fatalf("answered %v", got)
	}
	if hs.up.udp.Load() != 1 || hs.up.tcp.Load() != 1 {
		t.Fatalf("udp %d tcp %d queries", hs.up.udp.Load(), hs.up.tcp.Load())
	}
	// Nothing from the truncated datagram was pinned.
	if pins := hs.pinned(); len(pins) != 1 || !slices.Equal(pins[0].addrs, addrs("93.184.216.34", "93.184.216.35")) {
		t.Fatalf("pins %+v", pins)
	}
}

func TestTruncatedOverTCPFails(t *testing.T) {
	hs := newHarness(t, func(tcp bool, q dnsmessage.Message) []byte {
		m := respond(q, dnsmessage.RCodeSuccess, rrA("example.com", "93.184.216.34", 60))
		m.Truncated = true
		return pack(m)
	})
	m := hs.resolve(t, mkQuery(14, "example.com", dnsmessage.TypeA, 0))
	if m.RCode != dnsmessage.RCodeServerFailure || len(hs.pinned()) != 0 {
		t.Fatalf("response %+v", m)
	}
	if ev := hs.eventsOf(Upstream); len(ev) != 1 || !strings.Contains(ev[0].Reason, ErrUpstreamTruncated.Error()) {
		t.Fatalf("events %+v", ev)
	}
}

func TestUpstreamTimeout(t *testing.T) {
	hs := newHarness(t, func(bool, dnsmessage.Message) []byte { return nil })
	start := time.Now()
	m := hs.resolve(t, mkQuery(15, "example.com", dnsmessage.TypeA, 0))
	if m.RCode != dnsmessage.RCodeServerFailure || m.ID != 15 || len(m.Questions) != 1 {
		t.Fatalf("response %+v", m)
	}
	if d := time.Since(start); d < 300*time.Millisecond || d > 3*time.Second {
		t.Fatalf("took %v with a 300ms upstream timeout", d)
	}
	ev := hs.eventsOf(Upstream)
	if len(ev) != 1 || !strings.Contains(ev[0].Reason, ErrUpstreamTimeout.Error()) || ev[0].Name != "example.com" {
		t.Fatalf("events %+v", ev)
	}
}

func TestUpstreamUnreachable(t *testing.T) {
	hs := newHarness(t, nil, func(c *Config) {
		c.Dial = func(context.Context, string, string) (net.Conn, error) { return nil, errTest }
	})
	m := hs.resolve(t, mkQuery(16, "example.com", dnsmessage.TypeA, 0))
	if m.RCode != dnsmessage.RCodeServerFailure {
		t.Fatalf("rcode %v", m.RCode)
	}
	if ev := hs.eventsOf(Upstream); len(ev) != 1 || !strings.Contains(ev[0].Reason, errTest.Error()) {
		t.Fatalf("events %+v", ev)
	}
}

func TestPinErrorServfails(t *testing.T) {
	hs := newHarness(t, answerWith(dnsmessage.RCodeSuccess, rrA("example.com", "93.184.216.34", 60)), func(c *Config) {
		c.Pin = func([]netip.Addr, time.Duration) error { return errTest }
	})
	m := hs.resolve(t, mkQuery(17, "example.com", dnsmessage.TypeA, 0))
	if m.RCode != dnsmessage.RCodeServerFailure || len(m.Answers) != 0 {
		t.Fatalf("response %+v", m)
	}
	if ev := hs.eventsOf(PinFailed); len(ev) != 1 || ev[0].Reason != errTest.Error() {
		t.Fatalf("events %+v", hs.events)
	}
}

func manyA(name string, n int) []dnsmessage.Resource {
	rs := make([]dnsmessage.Resource, n)
	for i := range rs {
		rs[i] = rrA(name, fmt.Sprintf("93.184.%d.%d", i/250, 1+i%250), 60)
	}
	return rs
}

func TestResponseSizeLimits(t *testing.T) {
	for _, tc := range []struct {
		name    string
		records int
		edns    int
		udp     bool
		limit   int
		tc      bool
	}{
		{"small fits 512", 5, 0, true, 512, false},
		{"UDP without EDNS", 100, 0, true, 512, true},
		{"EDNS below 512 means 512", 100, 300, true, 512, true},
		{"EDNS 1000", 100, 1000, true, 1000, true},
		{"EDNS 4096 capped at 1232", 100, 4096, true, 1232, true},
		{"EDNS 4096 fits", 60, 4096, true, 1232, false},
		{"stream", 1000, 0, false, 65535, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hs := newHarness(t, answerWith(dnsmessage.RCodeSuccess, manyA("example.com", tc.records)...))
			resolve := hs.s.Resolve
			if tc.udp {
				resolve = hs.s.ResolveUDP
			}
			resp, err := resolve(context.Background(), mkQuery(18, "example.com", dnsmessage.TypeA, tc.edns))
			if err != nil {
				t.Fatal(err)
			}
			if len(resp) > tc.limit {
				t.Fatalf("response of %d bytes exceeds %d", len(resp), tc.limit)
			}
			var m dnsmessage.Message
			if err := m.Unpack(resp); err != nil {
				t.Fatal(err)
			}
			if m.Truncated != tc.tc {
				t.Fatalf("TC = %v, want %v (%d bytes, %d answers)", m.Truncated, tc.tc, len(resp), len(m.Answers))
			}
			if !tc.tc && len(m.Answers) != tc.records {
				t.Fatalf("%d answers, want %d", len(m.Answers), tc.records)
			}
			if tc.tc {
				// As many whole records as fit: one more would not.
				if len(m.Answers) == 0 || len(resp)+16 <= tc.limit {
					t.Fatalf("%d answers in %d bytes under a limit of %d", len(m.Answers), len(resp), tc.limit)
				}
			}
			if tc.edns > 0 {
				if len(m.Additionals) != 1 || m.Additionals[0].Header.Type != dnsmessage.TypeOPT || m.Additionals[0].Header.Class != 1232 {
					t.Fatalf("additionals %+v, want one OPT advertising 1232", m.Additionals)
				}
			}
			// Everything is pinned whatever fits the datagram.
			if pins := hs.pinned(); len(pins) != 1 || len(pins[0].addrs) != tc.records {
				t.Fatalf("pins %d", len(pins))
			}
		})
	}
}

// TestLostUpstreamDatagramResent: the first query to the upstream is
// lost; the same query, resent within the attempt, is answered, and the
// answer counts.
func TestLostUpstreamDatagramResent(t *testing.T) {
	var seen atomic.Int32
	answer := answerWith(dnsmessage.RCodeSuccess, rrA("www.example.com", "93.184.216.34", 300))
	hs := newHarness(t, func(tcp bool, q dnsmessage.Message) []byte {
		if seen.Add(1) == 1 {
			return nil
		}
		return answer(tcp, q)
	}, func(c *Config) { c.UpstreamTimeout = 2 * time.Second })
	m := hs.resolve(t, mkQuery(0x4321, "www.example.com", dnsmessage.TypeA, 0))
	if got := answerAddrs(m); !slices.Equal(got, addrs("93.184.216.34")) {
		t.Fatalf("answer addresses = %v (rcode %v)", got, m.RCode)
	}
	q := hs.up.received()
	if len(q) != 2 || q[0].ID != q[1].ID {
		t.Fatalf("upstream got %d queries, want the same query twice", len(q))
	}
}

// TestLocalNamesAnsweredWithoutUpstream: a name Config.Local claims is
// answered with its address alone, without forwarding or pinning; other
// names and other types of that name take the usual path.
func TestLocalNamesAnsweredWithoutUpstream(t *testing.T) {
	broker := netip.MustParseAddr("10.255.255.1")
	hs := newHarness(t, answerWith(dnsmessage.RCodeSuccess, rrA("www.example.com", "93.184.216.34", 300)), func(c *Config) {
		c.Local = func(name string) (netip.Addr, bool) { return broker, name == "api.example.com" }
	})
	m := hs.resolve(t, mkQuery(1, "API.example.com", dnsmessage.TypeA, 0))
	if got := answerAddrs(m); m.RCode != dnsmessage.RCodeSuccess || !slices.Equal(got, []netip.Addr{broker}) {
		t.Fatalf("local answer: rcode %v, addresses %v", m.RCode, got)
	}
	if ttl := m.Answers[0].Header.TTL; ttl != uint32(LocalTTL/time.Second) {
		t.Errorf("local answer TTL = %d", ttl)
	}
	if ev := hs.eventsOf(Local); len(ev) != 1 || ev[0].Name != "api.example.com" || ev[0].Kind.String() != "brokered" {
		t.Fatalf("Local events = %+v", ev)
	}
	if m := hs.resolve(t, mkQuery(2, "api.example.com", dnsmessage.TypeAAAA, 0)); len(m.Answers) != 0 {
		t.Fatalf("AAAA of a local name answered %+v", m.Answers)
	}
	if len(hs.up.received()) != 0 || len(hs.pinned()) != 0 {
		t.Fatalf("a local name reached the upstream (%d) or was pinned (%d)", len(hs.up.received()), len(hs.pinned()))
	}
	// A name Local does not claim is forwarded and pinned as usual.
	hs.resolve(t, mkQuery(3, "www.example.com", dnsmessage.TypeA, 0))
	if len(hs.up.received()) != 1 || len(hs.pinned()) != 1 {
		t.Fatal("a name Local does not claim was not forwarded and pinned")
	}
	// A disallowed name is refused before Local is asked.
	hs = newHarness(t, nil, func(c *Config) {
		c.Local = func(string) (netip.Addr, bool) { return broker, true }
	})
	if m := hs.resolve(t, mkQuery(4, "evil.test", dnsmessage.TypeA, 0)); m.RCode != dnsmessage.RCodeRefused {
		t.Fatalf("disallowed name with Local: rcode %v", m.RCode)
	}
}
