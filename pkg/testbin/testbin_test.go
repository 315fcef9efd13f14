package testbin

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"lazaret.dev/pkg/testgate"
)

func TestBuild(t *testing.T) {
	testgate.Command(t, "go")
	dir := t.TempDir()
	bin, err := Build(dir, "lazaret.dev/pkg/netlab/cmd/testinternet", "-trimpath")
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(bin); err != nil || fi.Mode()&0o111 == 0 || !strings.HasSuffix(bin, "/testinternet") {
		t.Fatalf("built %q: %v, %v", bin, fi, err)
	}
	if _, err := Build(dir, "lazaret.dev/pkg/no-such-command"); err == nil || !strings.Contains(err.Error(), "building no-such-command") {
		t.Fatalf("building a missing package: %v, want an error naming it", err)
	}
}

// TestForbidDeps: a forbidden package fails the check, naming it; an
// allowed graph passes (package helpermain itself, which every helper's
// main imports, within the helpers' budget).
func TestForbidDeps(t *testing.T) {
	testgate.Command(t, "go")
	ForbidDeps(t, "lazaret.dev/pkg/helpermain", HelperForbidden...)
	ft := &fakeT{TB: t}
	ForbidDeps(ft, "lazaret.dev/pkg/helpermain", "os", "golang.org/x/sys")
	if !strings.Contains(ft.errs, "depends on os\n") || !strings.Contains(ft.errs, "depends on golang.org/x/sys/unix\n") {
		t.Fatalf("errors %q, want os and golang.org/x/sys/unix named", ft.errs)
	}
}

// fakeT records Errorf instead of failing.
type fakeT struct {
	testing.TB
	errs string
}

func (f *fakeT) Helper() {}

func (f *fakeT) Errorf(format string, args ...any) { f.errs += fmt.Sprintf(format, args...) + "\n" }
