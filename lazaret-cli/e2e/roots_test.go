//go:build e2e

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestImageInDataRootThenExec: with storage.data_root in the default
// configuration file, `image build-dir` (as scripts/make-test-image runs
// it, with neither --config nor --storage-root) stores the image under
// data_root, and exec, with neither --profile nor --config, finds it
// there: one resolution of the storage root for every command, and the
// configuration's only profile as the default.
func TestImageInDataRootThenExec(t *testing.T) {
	s := newSandbox(t)
	store := filepath.Join(s.home, "store")
	doc, err := os.ReadFile(s.config)
	if err != nil {
		t.Fatal(err)
	}
	withRoot := strings.Replace(string(doc), "\n[profiles.dev]\n", "\n[storage]\ndata_root = \""+store+"\"\n[profiles.dev]\n", 1)
	if err := os.WriteFile(s.config, []byte(withRoot), 0o600); err != nil {
		t.Fatal(err)
	}
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(repo, "scripts", "make-test-image"))
	cmd.Env = append(os.Environ(), append(s.env, "LAZARET_CLI="+filepath.Join(binDir(t), "lazaret-cli"))...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make-test-image: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(store, "images")); err != nil {
		t.Fatalf("image build-dir did not store under storage.data_root: %v", err)
	}
	out, errOut, code := s.cli("image", "ls")
	if code != 0 || !strings.Contains(out, "localhost/lazaret-busybox:1") {
		t.Fatalf("image ls: code %d\n%s\n%s", code, out, errOut)
	}
	// The XDG default root holds only what newSandbox stored there; take
	// it away, so exec can only find the image under data_root.
	if err := os.RemoveAll(filepath.Join(s.home, "data")); err != nil {
		t.Fatal(err)
	}
	out, errOut, code = s.cli("exec", "--workspace", s.workspace, "--linger", "2s", "--", "/bin/echo", "hi")
	if code != 0 || out != "hi\n" {
		s.dumpLogs()
		t.Fatalf("exec without --profile or --config: code %d, stdout %q, stderr %q", code, out, errOut)
	}
	if _, err := os.Stat(filepath.Join(store, "domains")); err != nil {
		t.Errorf("the Domain's state is not under storage.data_root: %v", err)
	}
	if _, err := os.Stat(filepath.Join(s.home, "data")); err == nil {
		t.Errorf("exec created the XDG default storage root although the configuration names another")
	}
}
