package coordinator

import (
	"strings"
	"testing"
)

func TestCheckSession(t *testing.T) {
	if err := checkSession(""); err != nil {
		t.Errorf("no --session: %v", err)
	}
	if err := checkSession(strings.Repeat("ab", 16)); err != nil {
		t.Errorf("a session ID: %v", err)
	}
	for _, bad := range []string{"abc", strings.Repeat("zz", 16), strings.Repeat("ab", 17)} {
		err := checkSession(bad)
		if err == nil || !strings.Contains(err.Error(), "--session") {
			t.Errorf("checkSession(%q) = %v, want an error naming --session", bad, err)
		}
	}
}
