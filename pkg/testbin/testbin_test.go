package testbin

import (
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
