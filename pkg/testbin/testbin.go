// Package testbin builds a command of the workspace for the tests that run
// it as a process of its own.
package testbin

import (
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"testing"
)

// Main builds the command at import path pkg into a new temporary
// directory (go build with the extra flags), sets *bin to the binary's
// path, runs the tests of m and returns their exit code, having removed
// the directory. A failed build is reported on stderr and returns 1
// without running any test. It is meant for TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(testbin.Main(m, &binary, "lazaret.dev/lazaret-gitroute")) }
func Main(m *testing.M, bin *string, pkg string, flags ...string) int {
	dir, err := os.MkdirTemp("", path.Base(pkg)+"-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if *bin, err = Build(dir, pkg, flags...); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// Build builds the command at import path pkg with go build and the extra
// flags into dir, named as the last element of pkg, and returns the
// binary's path. The error carries go build's output.
func Build(dir, pkg string, flags ...string) (string, error) {
	bin := filepath.Join(dir, path.Base(pkg))
	args := append(append([]string{"build"}, flags...), "-o", bin, pkg)
	if out, err := exec.Command("go", args...).CombinedOutput(); err != nil {
		return "", fmt.Errorf("building %s: %w\n%s", path.Base(pkg), err, out)
	}
	return bin, nil
}

// HelperForbidden are the packages no helper binary may depend on
// (docs/OPERATIONS.md, "Memory of a Domain's helpers"): the command-line
// framework package helpermain replaces and the template engines it
// brought, whose use of reflection keeps every exported method of every
// linked type in the executable; and the HTTP and registry clients, which
// only `lazaret-cli image pull` needs (package image/registry).
var HelperForbidden = []string{
	"github.com/urfave/cli", "text/template", "html/template",
	"net/http", "github.com/google/go-containerregistry/pkg/v1/remote",
}

// ForbidDeps fails t for each package at or below a forbidden import path
// that the package pkg (as go list takes it, "." for the test's own)
// depends on, directly or not.
func ForbidDeps(t testing.TB, pkg string, forbidden ...string) {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", pkg).Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", pkg, err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list -deps %s listed only %q", pkg, deps)
	}
	for _, d := range deps {
		for _, bad := range forbidden {
			if d == bad || strings.HasPrefix(d, bad+"/") {
				t.Errorf("%s depends on %s", pkg, d)
			}
		}
	}
}
