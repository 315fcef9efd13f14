// Package testgate decides whether a test that needs a host capability
// (root, user namespaces, runsc, FUSE, nftables) runs, skips, or fails.
//
// Without LAZARET_TEST_ROOT=1 a missing capability skips the test with the
// reason. With LAZARET_TEST_ROOT=1 (set by CI) a missing capability fails the
// test: CI must never turn a privileged test into a silent skip.
package testgate

import (
	"os"
	"os/exec"
	"testing"
)

// EnvRoot is the variable that makes privileged tests mandatory.
const EnvRoot = "LAZARET_TEST_ROOT"

// EnvUnprivileged marks the run of the suite as an unprivileged user: tests
// that need root itself skip, while every capability a user can have (user
// namespaces, FUSE, runsc) stays mandatory under EnvRoot.
const EnvUnprivileged = "LAZARET_TEST_UNPRIVILEGED"

// Mandatory reports whether privileged tests must run here.
func Mandatory() bool { return os.Getenv(EnvRoot) == "1" }

// Require runs check; if it reports a missing capability, the test is skipped
// with the reason, or failed when Mandatory.
func Require(t testing.TB, capability string, check func() error) {
	t.Helper()
	if err := check(); err != nil {
		if Mandatory() {
			t.Fatalf("%s required (%s=1) but unavailable: %v", capability, EnvRoot, err)
		}
		t.Skipf("skipping: %s unavailable: %v (set %s=1 to make this a failure)", capability, err, EnvRoot)
	}
}

// Root requires an effective UID of 0. In the unprivileged run
// (EnvUnprivileged=1) a root-only test skips instead of failing.
func Root(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 && os.Getenv(EnvUnprivileged) == "1" {
		t.Skipf("skipping: needs root; this is the unprivileged run (%s=1)", EnvUnprivileged)
	}
	Require(t, "root", func() error {
		if os.Geteuid() != 0 {
			return errNotRoot
		}
		return nil
	})
}

// Opted requires LAZARET_TEST_ROOT=1 itself: for tests that change host
// state (mounts, namespaces, nftables) and must never run by accident.
func Opted(t testing.TB) {
	t.Helper()
	if !Mandatory() {
		t.Skipf("skipping: changes host state; set %s=1 to run", EnvRoot)
	}
}

// Command requires an executable on PATH.
func Command(t testing.TB, name string) string {
	t.Helper()
	var path string
	Require(t, "command "+name, func() error {
		p, err := exec.LookPath(name)
		path = p
		return err
	})
	return path
}

// UserNamespaces requires that this process can create a user namespace.
func UserNamespaces(t testing.TB) {
	t.Helper()
	Require(t, "user namespaces", probeUserNamespace)
}

// FUSE requires a /dev/fuse this process can open and, unless it is root,
// fusermount3 on PATH to mount with it.
func FUSE(t testing.TB) {
	t.Helper()
	Require(t, "FUSE", probeFUSE)
}
