package main

import (
	"testing"

	"lazaret.dev/pkg/testbin"
	"lazaret.dev/pkg/testgate"
)

// TestDependencyBudget keeps out of this helper's executable, which every
// live Domain keeps mapped, what package helpermain exists to avoid, with
// one exception: net/http, which the credential broker is built on (an
// HTTP server toward the sandbox and an HTTPS client toward the brokered
// destinations; docs/NETWORK.md, "Credential broker"). The registry
// client stays out.
func TestDependencyBudget(t *testing.T) {
	testgate.Command(t, "go")
	var forbidden []string
	for _, p := range testbin.HelperForbidden {
		if p != "net/http" {
			forbidden = append(forbidden, p)
		}
	}
	if len(forbidden) != len(testbin.HelperForbidden)-1 {
		t.Fatalf("net/http is no longer in testbin.HelperForbidden %q: drop this exception", testbin.HelperForbidden)
	}
	testbin.ForbidDeps(t, ".", forbidden...)
}
