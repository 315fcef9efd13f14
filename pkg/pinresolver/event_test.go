package pinresolver

import (
	"strings"
	"testing"
	"time"
)

func TestEventString(t *testing.T) {
	for _, tc := range []struct {
		e    Event
		want string
	}{
		{
			Event{Kind: Pinned, Name: "www.example.com", Rule: "*.example.com", Addresses: addrs("93.184.216.34", "93.184.216.35"), TTL: 5 * time.Minute},
			`pinned name=www.example.com rule="*.example.com" addrs=93.184.216.34,93.184.216.35 ttl=5m0s`,
		},
		{
			Event{Kind: Refused, Name: "a\x1b[31m\n.example.com", Reason: "name not allowed"},
			`refused name=a\x1b\x5b31m\x0a.example.com reason="name not allowed"`,
		},
		{
			Event{Kind: Rebinding, Name: "x_y*.Z\\", Addresses: addrs("10.0.0.1"), Reason: "private\nrange \x1b[0m\xff"},
			`rebinding name=x_y*.\x5a\x5c addrs=10.0.0.1 reason="private\nrange \x1b[0m\xff"`,
		},
		{Event{Kind: Malformed, Reason: "dropped: header does not parse"}, `malformed name= reason="dropped: header does not parse"`},
		{Event{Kind: EventKind(99)}, `kind-99 name=`},
	} {
		got := tc.e.String()
		if got != tc.want {
			t.Errorf("String() =\n%s\nwant\n%s", got, tc.want)
		}
		for i := 0; i < len(got); i++ {
			if got[i] < 0x20 || got[i] >= 0x7f {
				t.Errorf("%q: byte %#x at %d", got, got[i], i)
			}
		}
	}
}

func TestEscapeNameAllBytes(t *testing.T) {
	var all strings.Builder
	for c := range 256 {
		all.WriteByte(byte(c))
	}
	got := EscapeName(all.String())
	for i := 0; i < len(got); i++ {
		c := got[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || strings.IndexByte(`.-_*\`, c) >= 0) {
			t.Fatalf("unescaped byte %#x in %q", c, got)
		}
	}
	// 40 bytes pass through, 216 become four bytes each.
	if len(got) != 40+216*4 {
		t.Fatalf("len %d", len(got))
	}
}
