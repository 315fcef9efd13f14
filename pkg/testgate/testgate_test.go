package testgate

import "testing"

func TestUserNamespaceProbe(t *testing.T) {
	// The probe itself is exercised; hosts without user namespaces skip.
	UserNamespaces(t)
}

func TestMandatoryFollowsEnv(t *testing.T) {
	t.Setenv(EnvRoot, "1")
	if !Mandatory() {
		t.Fatal("Mandatory() = false with LAZARET_TEST_ROOT=1")
	}
	t.Setenv(EnvRoot, "")
	if Mandatory() {
		t.Fatal("Mandatory() = true without LAZARET_TEST_ROOT")
	}
}
