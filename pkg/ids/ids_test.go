package ids

import (
	"strings"
	"testing"
)

func TestNewIsRandom(t *testing.T) {
	a, b := New(), New()
	if a == b || a.IsZero() {
		t.Fatalf("New() returned %v and %v", a, b)
	}
}

func TestParseHexRoundTrip(t *testing.T) {
	id := New()
	var got ID
	if err := ParseHex(got[:], id.String(), "session ID"); err != nil {
		t.Fatal(err)
	}
	if got != id {
		t.Fatalf("round trip: %v != %v", got, id)
	}
	for _, bad := range []string{"", "00", strings.Repeat("zz", 16), strings.Repeat("0", 33)} {
		if err := ParseHex(got[:], bad, "session ID"); err == nil || !strings.Contains(err.Error(), "session ID") {
			t.Errorf("ParseHex(%q) error = %v, want one naming the value", bad, err)
		}
	}
}
