package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"lazaret.dev/lazaret-cli/internal/session"
)

// twoProfiles writes a configuration declaring the profiles dev and
// claude and returns its path.
func twoProfiles(t *testing.T, h *host) string {
	t.Helper()
	p := filepath.Join(h.dir, "two.toml")
	doc := explainConfig + "\n[profiles.claude]\nimage = \"localhost/agent:2\"\n"
	if err := os.WriteFile(p, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// writeConfig writes the default configuration file of h: explainConfig
// with storage lines after the schema.
func writeConfig(t *testing.T, h *host, storage string) {
	t.Helper()
	doc := strings.Replace(explainConfig, "\n\n", "\n"+storage+"\n\n", 1)
	if err := os.MkdirAll(filepath.Dir(h.file), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(h.file, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
}

// jsonField runs the command and returns one string field of its JSON.
func jsonField(t *testing.T, field string, args ...string) string {
	t.Helper()
	stdout, stderr, err := runApp(t, args...)
	if err != nil {
		t.Fatalf("%v: %v\n%s", args, err, stderr)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(stdout), &m); err != nil {
		t.Fatalf("%v: %v\n%s", args, err, stdout)
	}
	s, _ := m[field].(string)
	return s
}

func TestStorageRootFromConfiguration(t *testing.T) {
	h := newHost(t)
	store := filepath.Join(h.dir, "store")
	writeConfig(t, h, "[storage]\ndata_root = \""+store+"\"")
	tree := t.TempDir()
	if err := os.WriteFile(filepath.Join(tree, "hello"), []byte("hi\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, stderr, err := runApp(t, "image", "build-dir", "--tag", "localhost/agent:1", tree); err != nil {
		t.Fatalf("build-dir: %v\n%s", err, stderr)
	}
	if _, err := os.Stat(filepath.Join(store, "images")); err != nil {
		t.Fatalf("image store not under storage.data_root: %v", err)
	}
	if _, err := os.Stat(filepath.Join(h.dir, "data")); !os.IsNotExist(err) {
		t.Fatalf("the XDG default storage root was used: %v", err)
	}
	for _, args := range [][]string{{"image", "ls"}, {"image", "ls", "--config", h.file}, {"image", "--config", h.file, "ls"}} {
		if stdout, stderr, err := runApp(t, args...); err != nil || !strings.Contains(stdout, "localhost/agent:1") {
			t.Errorf("%v: %v\nstdout %s\nstderr %s", args, err, stdout, stderr)
		}
	}
	// --storage-root still overrides the configuration, before or after
	// the subcommand.
	other := filepath.Join(h.dir, "other")
	for _, args := range [][]string{{"image", "ls", "--storage-root", other}, {"image", "--storage-root", other, "ls"}} {
		if stdout, stderr, err := runApp(t, args...); err != nil || strings.Contains(stdout, "localhost/agent:1") {
			t.Errorf("%v: %v\nstdout %s\nstderr %s", args, err, stdout, stderr)
		}
	}
	run := filepath.Join(h.dir, "run", "lazaret")
	if got := jsonField(t, "storage_root", "status", "--json"); got != store {
		t.Errorf("status storage root %q, want %q", got, store)
	}
	if got := jsonField(t, "runtime_root", "status", "--json"); got != run {
		t.Errorf("status runtime root %q, want %q", got, run)
	}
	if got := jsonField(t, "storage_root", "store", "inspect"); got != store {
		t.Errorf("store inspect storage root %q, want %q", got, store)
	}
	// config check agrees, without --profile: the configuration has one.
	if got := jsonField(t, "storage_root", "config", "check", "--workspace", h.ws, "--json"); got != store {
		t.Errorf("config check storage root %q, want %q", got, store)
	}
}

func TestStorageRootWithoutConfiguration(t *testing.T) {
	h := newHost(t)
	def := filepath.Join(h.dir, "data", "lazaret")
	if got := jsonField(t, "storage_root", "status", "--json"); got != def {
		t.Errorf("status storage root %q, want the XDG default %q", got, def)
	}
	if _, stderr, err := runApp(t, "image", "ls"); err != nil || stderr != "" {
		t.Errorf("image ls without a configuration: %v %q", err, stderr)
	}
	// A file --config names must exist.
	missing := filepath.Join(h.dir, "nope.toml")
	_, stderr, err := runApp(t, "image", "ls", "--config", missing)
	if exitCode(err) != 1 || !strings.HasPrefix(stderr, missing+": opening configuration") || !strings.Contains(stderr, "lazaret-cli config init") {
		t.Errorf("exit %d, stderr %q", exitCode(err), stderr)
	}
}

func TestInvalidConfigurationNamesFileAndField(t *testing.T) {
	h := newHost(t)
	writeConfig(t, h, "[storage]\ndata_root = \"relative/store\"")
	for _, args := range [][]string{{"image", "ls"}, {"status"}, {"store", "inspect"}} {
		_, stderr, err := runApp(t, args...)
		if exitCode(err) != 1 || !strings.HasPrefix(stderr, h.file+":3:") || !strings.Contains(stderr, "storage.data_root: ") {
			t.Errorf("%v: exit %d, stderr %q", args, exitCode(err), stderr)
		}
	}
	_, stderr, err := runApp(t, "stop", "--workspace", h.ws)
	if exitCode(err) != session.ExitFailure || !strings.Contains(stderr, h.file+":3:") || !strings.Contains(stderr, "storage.data_root: ") {
		t.Errorf("stop: exit %d, stderr %q", exitCode(err), stderr)
	}
	if err := os.Chmod(h.file, 0o666); err != nil {
		t.Fatal(err)
	}
	_, stderr, err = runApp(t, "image", "ls")
	if exitCode(err) != 1 || !strings.HasPrefix(stderr, h.file+": ") || !strings.Contains(stderr, "chmod go-w") {
		t.Errorf("writable configuration: exit %d, stderr %q", exitCode(err), stderr)
	}
}

func TestProfileDefault(t *testing.T) {
	h := stopHost(t)
	two := twoProfiles(t, h)
	// One profile: it is the default of every command acting on a Domain.
	want := `no running generation of profile "dev" in ` + h.ws + "\n"
	if stdout, stderr, err := runApp(t, "stop", "--workspace", h.ws); err != nil || stdout != want {
		t.Errorf("stop: %v\nstdout %q\nstderr %q", err, stdout, stderr)
	}
	if stdout, stderr, err := runApp(t, "net", "explain", "--workspace", h.ws, "203.0.113.10"); err != nil || !strings.Contains(stdout, `profile "dev"`) {
		t.Errorf("net explain: %v\nstdout %q\nstderr %q", err, stdout, stderr)
	}
	// Several: the error lists them, and --profile chooses.
	wantErr := "lazaret-cli: --profile is required: the configuration " + two + " defines claude, dev\n"
	for _, args := range [][]string{{"stop"}, {"log"}, {"recover"}, {"workspace", "isolated"}, {"config", "check"}} {
		_, stderr, err := runApp(t, append(args, "--config", two, "--workspace", h.ws)...)
		if exitCode(err) == 0 || stderr != wantErr {
			t.Errorf("%v: exit %d, stderr %q, want %q", args, exitCode(err), stderr, wantErr)
		}
	}
	if stdout, stderr, err := runApp(t, "stop", "--config", two, "--workspace", h.ws, "--profile", "dev"); err != nil || stdout != want {
		t.Errorf("stop --profile dev: %v\nstdout %q\nstderr %q", err, stdout, stderr)
	}
}

func TestStatusProfileFilter(t *testing.T) {
	h := stopHost(t)
	stdout, stderr, err := runApp(t, "status", "--profile", "dev", "--json")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	var rep statusReport
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil || rep.StorageRoot != filepath.Join(h.dir, "data", "lazaret") {
		t.Fatalf("%v %+v", err, rep)
	}
}
