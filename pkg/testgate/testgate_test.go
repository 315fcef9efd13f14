package testgate

import (
	"os"
	"testing"
)

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

func TestRootSkipsInUnprivilegedRun(t *testing.T) {
	if Mandatory() && os.Geteuid() == 0 {
		t.Skip("running as root: Root(t) passes here")
	}
	t.Setenv(EnvUnprivileged, "1")
	t.Setenv(EnvRoot, "1")
	ran := false
	t.Run("inner", func(t *testing.T) {
		Root(t)
		ran = true
	})
	if os.Geteuid() != 0 && ran {
		t.Fatal("Root(t) did not skip in the unprivileged run")
	}
}

func TestFUSEProbe(t *testing.T) {
	// The probe itself is exercised; hosts without FUSE skip.
	FUSE(t)
}
