//go:build e2e

// Package e2e drives the built Lazaret binaries as a user would. It runs
// only with the e2e build tag and needs LAZARET_E2E_BIN, the directory that
// `make build` filled (make e2e sets both).
package e2e

import (
	"bytes"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"lazaret.dev/pkg/netlab"
)

// TestMain runs the suite where the test internet of netlab is routed:
// every sandbox proves its network readiness against it before use.
func TestMain(m *testing.M) { os.Exit(netlab.RunInInternet(m)) }

var binaries = []string{
	"lazaret-cli", "lazaret-coordinator", "lazaret-supervisor", "lazaret-anchor",
	"lazaret-gitroute", "lazaret-netsidecar", "lazaret-guest",
}

func binDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("LAZARET_E2E_BIN")
	if dir == "" {
		t.Fatal("LAZARET_E2E_BIN is not set; run the end-to-end suite with `make e2e`")
	}
	return dir
}

// run executes a built binary and returns stdout, stderr and the exit code.
func run(t *testing.T, env []string, name string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(filepath.Join(binDir(t), name), args...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("running %s: %v", name, err)
		}
		code = ee.ExitCode()
	}
	return stdout.String(), stderr.String(), code
}

func TestEveryBinaryAnswersVersion(t *testing.T) {
	for _, b := range binaries {
		t.Run(b, func(t *testing.T) {
			out, errOut, code := run(t, nil, b, "--version")
			if code != 0 || !strings.HasPrefix(out, b+" version ") {
				t.Fatalf("%s --version: code %d, stdout %q, stderr %q", b, code, out, errOut)
			}
			if strings.Contains(out, "version devel") {
				t.Errorf("%s is not version-stamped: %q", b, out)
			}
		})
	}
}

func TestBinariesAreStatic(t *testing.T) {
	for _, b := range binaries {
		f, err := elf.Open(filepath.Join(binDir(t), b))
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP {
				t.Errorf("%s is dynamically linked (has PT_INTERP)", b)
			}
		}
		f.Close()
	}
}
