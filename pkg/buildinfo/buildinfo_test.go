package buildinfo

import (
	"strings"
	"testing"
)

func TestStringStamped(t *testing.T) {
	oldV, oldR := version, revision
	t.Cleanup(func() { version, revision = oldV, oldR })
	version, revision = "1.2.3", "abc123"
	got := String("lazaret-test")
	for _, want := range []string{"lazaret-test version 1.2.3", "revision abc123", "linux/"} {
		if !strings.Contains(got, want) {
			t.Errorf("String() = %q, missing %q", got, want)
		}
	}
}

func TestFallbacks(t *testing.T) {
	oldV, oldR := version, revision
	t.Cleanup(func() { version, revision = oldV, oldR })
	version, revision = "", ""
	if Version() == "" || Revision() == "" {
		t.Fatalf("fallbacks must never be empty: %q %q", Version(), Revision())
	}
}
