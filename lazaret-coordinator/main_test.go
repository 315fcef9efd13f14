package main

import (
	"testing"

	"lazaret.dev/pkg/testbin"
	"lazaret.dev/pkg/testgate"
)

// TestDependencyBudget keeps out of this helper's executable, which every
// live Domain keeps mapped, what package helpermain exists to avoid.
func TestDependencyBudget(t *testing.T) {
	testgate.Command(t, "go")
	testbin.ForbidDeps(t, ".", testbin.HelperForbidden...)
}
