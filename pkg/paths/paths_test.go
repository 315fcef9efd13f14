package paths

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

func envOf(m map[string]string) Environment {
	return Environment{LookupEnv: func(k string) (string, bool) { v, ok := m[k]; return v, ok }, UID: os.Getuid()}
}

func TestConfigFileOrder(t *testing.T) {
	tests := []struct {
		name string
		flag string
		env  map[string]string
		want string
	}{
		{"flag wins", "/etc/x.toml", map[string]string{"LAZARET_CONFIG": "/a.toml", "HOME": "/h"}, "/etc/x.toml"},
		{"env", "", map[string]string{"LAZARET_CONFIG": "/a.toml", "XDG_CONFIG_HOME": "/c", "HOME": "/h"}, "/a.toml"},
		{"xdg", "", map[string]string{"XDG_CONFIG_HOME": "/c", "HOME": "/h"}, "/c/lazaret/config.toml"},
		{"relative xdg ignored", "", map[string]string{"XDG_CONFIG_HOME": "c", "HOME": "/h"}, "/h/.config/lazaret/config.toml"},
		{"home default", "", map[string]string{"HOME": "/h"}, "/h/.config/lazaret/config.toml"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := envOf(tc.env).ConfigFile(tc.flag)
			if err != nil || got != tc.want {
				t.Fatalf("ConfigFile = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
	if _, err := envOf(nil).ConfigFile(""); !errors.Is(err, ErrNoHome) {
		t.Fatalf("no home: %v", err)
	}
}

func TestDefaultStorageRoot(t *testing.T) {
	if got, _ := envOf(map[string]string{"XDG_DATA_HOME": "/d", "HOME": "/h"}).DefaultStorageRoot(); got != "/d/lazaret" {
		t.Errorf("got %q", got)
	}
	if got, _ := envOf(map[string]string{"HOME": "/h"}).DefaultStorageRoot(); got != "/h/.local/share/lazaret" {
		t.Errorf("got %q", got)
	}
	if _, err := envOf(nil).DefaultStorageRoot(); !errors.Is(err, ErrNoHome) {
		t.Errorf("no home: %v", err)
	}
}

func TestRuntimeRootOrder(t *testing.T) {
	dir := t.TempDir()
	runUser := filepath.Join(dir, "run-user")
	e := envOf(map[string]string{"XDG_RUNTIME_DIR": "/xdg"})
	if got := e.runtimeRoot(runUser, "/tmp"); got != "/xdg/lazaret" {
		t.Errorf("xdg: %q", got)
	}
	e = envOf(nil)
	want := "/tmp/lazaret-" + strconv.Itoa(e.UID)
	if got := e.runtimeRoot(runUser, "/tmp"); got != want {
		t.Errorf("no /run/user: %q, want %q", got, want)
	}
	if err := os.MkdirAll(filepath.Join(runUser, strconv.Itoa(e.UID)), 0o700); err != nil {
		t.Fatal(err)
	}
	if got := e.runtimeRoot(runUser, "/tmp"); got != filepath.Join(runUser, strconv.Itoa(e.UID), "lazaret") {
		t.Errorf("with /run/user: %q", got)
	}
	other := e
	other.UID = e.UID + 12345
	if err := os.MkdirAll(filepath.Join(runUser, strconv.Itoa(other.UID)), 0o700); err != nil {
		t.Fatal(err)
	}
	if got := other.runtimeRoot(runUser, "/tmp"); got != "/tmp/lazaret-"+strconv.Itoa(other.UID) {
		t.Errorf("/run/user dir owned by someone else must be skipped: %q", got)
	}
	if _, err := os.Stat(filepath.Join(runUser, strconv.Itoa(e.UID), "lazaret")); !errors.Is(err, os.ErrNotExist) {
		t.Error("computing the runtime root created it")
	}
}

func TestEnsureRuntimeRoot(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "lazaret")
	if err := EnsureRuntimeRoot(root, os.Getuid()); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(root)
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("mode %v, %v", fi.Mode(), err)
	}
	if err := EnsureRuntimeRoot(root, os.Getuid()); err != nil {
		t.Fatalf("existing private root: %v", err)
	}
	if err := EnsureRuntimeRoot(root, os.Getuid()+1); !errors.Is(err, ErrUnsafeRuntimeRoot) {
		t.Errorf("foreign owner: %v", err)
	}
	if err := os.Chmod(root, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := EnsureRuntimeRoot(root, os.Getuid()); !errors.Is(err, ErrUnsafeRuntimeRoot) {
		t.Errorf("group-accessible root: %v", err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(root, link); err != nil {
		t.Fatal(err)
	}
	if err := EnsureRuntimeRoot(link, os.Getuid()); !errors.Is(err, ErrUnsafeRuntimeRoot) {
		t.Errorf("symlinked root: %v", err)
	}
}

func TestCanonical(t *testing.T) {
	dir, _ := filepath.EvalSymlinks(t.TempDir())
	real := filepath.Join(dir, "real")
	if err := os.Mkdir(real, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(real, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	tests := map[string]string{
		filepath.Join(dir, "link"):                 real,
		filepath.Join(dir, "link", "a", "b"):       filepath.Join(real, "a", "b"),
		filepath.Join(dir, "missing", "x") + "/":   filepath.Join(dir, "missing", "x"),
		filepath.Join(dir, "real", "..", "link/c"): filepath.Join(real, "c"),
	}
	for in, want := range tests {
		got, err := Canonical(in)
		if err != nil || got != want {
			t.Errorf("Canonical(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := os.Stat(filepath.Join(real, "a")); !errors.Is(err, os.ErrNotExist) {
		t.Error("Canonical created a directory")
	}
	if _, err := Canonical("relative"); err == nil {
		t.Error("relative path accepted")
	}
}

func TestWorkspace(t *testing.T) {
	dir, _ := filepath.EvalSymlinks(t.TempDir())
	ws := filepath.Join(dir, "ws")
	if out, err := exec.Command("git", "init", "-q", ws).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
	sub := filepath.Join(ws, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(ws, filepath.Join(dir, "wslink")); err != nil {
		t.Fatal(err)
	}
	plain := filepath.Join(dir, "plain")
	if err := os.Mkdir(plain, 0o755); err != nil {
		t.Fatal(err)
	}
	if got, err := Workspace(ws); err != nil || got != ws {
		t.Errorf("explicit top level: %q, %v", got, err)
	}
	if got, err := Workspace(filepath.Join(dir, "wslink")); err != nil || got != ws {
		t.Errorf("symlinked top level: %q, %v", got, err)
	}
	if _, err := Workspace(sub); !errors.Is(err, ErrNotWorkspace) {
		t.Errorf("explicit subdirectory: %v", err)
	}
	if _, err := Workspace(plain); !errors.Is(err, ErrNotWorkspace) {
		t.Errorf("not a git workspace: %v", err)
	}
	t.Chdir(sub)
	if got, err := Workspace(""); err != nil || got != ws {
		t.Errorf("from working directory: %q, %v", got, err)
	}
	t.Setenv("GIT_DIR", filepath.Join(plain, ".git"))
	if got, err := Workspace(""); err != nil || got != ws {
		t.Errorf("GIT_DIR must be ignored: %q, %v", got, err)
	}
}

func TestWithin(t *testing.T) {
	for _, tc := range []struct {
		p, base string
		want    bool
	}{{"/a/b", "/a", true}, {"/a", "/a", true}, {"/ab", "/a", false}, {"/a", "/", true}, {"/", "/a", false}} {
		if got := Within(tc.p, tc.base); got != tc.want {
			t.Errorf("Within(%q, %q) = %v", tc.p, tc.base, got)
		}
	}
}
