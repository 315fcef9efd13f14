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

// TestDomainCommandsOneConfiguration: with the configuration outside the
// default place, status, log and stop find the Domain through --config and
// through $LAZARET_CONFIG, and take the configuration's only profile when
// --profile is absent; with two profiles, a command that needs one names
// both.
func TestDomainCommandsOneConfiguration(t *testing.T) {
	s := newSandbox(t)
	doc, err := os.ReadFile(s.config)
	if err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(s.home, "elsewhere.toml")
	if err := os.WriteFile(other, doc, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(s.config); err != nil {
		t.Fatal(err)
	}
	if out, errOut, code := s.cli("exec", "--config", other, "--workspace", s.workspace, "--linger", "60s", "--", "/bin/true"); code != 0 {
		s.dumpLogs()
		t.Fatalf("exec --config: code %d\n%s\n%s", code, out, errOut)
	}
	out, errOut, code := s.cli("status", "--config", other, "--json")
	if code != 0 || !strings.Contains(out, `"dev"`) {
		t.Fatalf("status --config: code %d\n%s\n%s", code, out, errOut)
	}
	if out, errOut, code := s.cli("log", "--config", other, "--workspace", s.workspace); code != 0 {
		t.Fatalf("log --config without --profile: code %d\n%s\n%s", code, out, errOut)
	}
	twoPath := filepath.Join(s.home, "two.toml")
	if err := os.WriteFile(twoPath, []byte(string(doc)+"\n[profiles.second]"+strings.SplitN(strings.ReplaceAll(string(doc), "[profiles.dev.", "[profiles.second."), "[profiles.dev]", 2)[1]), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := s.cli("stop", "--config", twoPath, "--workspace", s.workspace); code == 0 || !strings.Contains(errOut, "--profile is required") || !strings.Contains(errOut, "dev, second") {
		t.Fatalf("stop with two profiles and no --profile: code %d, stderr %q; want a refusal naming both", code, errOut)
	}
	env := append(append([]string(nil), s.env...), "LAZARET_CONFIG="+other)
	if out, errOut, code := run(t, env, "lazaret-cli", "stop", "--workspace", s.workspace); code != 0 {
		t.Fatalf("stop with $LAZARET_CONFIG and no --profile: code %d\n%s\n%s", code, out, errOut)
	}
}
