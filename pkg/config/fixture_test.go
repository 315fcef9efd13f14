package config

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"lazaret.dev/pkg/layout"
	"lazaret.dev/pkg/paths"
)

// fixture is a private host for one test: a git workspace, a home, XDG
// directories and a few source objects of every type.
type fixture struct {
	dir, ws, home, data, run string
	env                      map[string]string
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{
		dir:  dir,
		ws:   filepath.Join(dir, "ws"),
		home: filepath.Join(dir, "home"),
		data: filepath.Join(dir, "data"),
		run:  filepath.Join(dir, "run"),
	}
	for _, d := range []string{f.ws, f.home, f.run, filepath.Join(dir, "src", "dir"), filepath.Join(dir, "bin"), filepath.Join(f.ws, "sub")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := exec.Command("git", "init", "-q", f.ws).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v: %s", err, out)
	}
	write := func(name string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\nexit 0\n"), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("src/file", 0o644)
	write("bin/tool", 0o755)
	write("bin/hard", 0o755)
	if err := os.Link(filepath.Join(dir, "bin/hard"), filepath.Join(dir, "bin/hard2")); err != nil {
		t.Fatal(err)
	}
	write("bin/gw", 0o775)
	write("bin/noexec", 0o644)
	write("ws/tool", 0o755)
	if err := os.Symlink("dir", filepath.Join(dir, "src", "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("tool", filepath.Join(dir, "bin", "toollink")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "src", "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", filepath.Join(dir, "src", "sock"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	f.env = map[string]string{
		"HOME":            f.home,
		"XDG_DATA_HOME":   f.data,
		"XDG_RUNTIME_DIR": f.run,
		"API_TOKEN":       "s3cr3t-value-never-printed",
		// Brokered values: API_KEY fits a placeholder; the others do not.
		"API_KEY":   "sk-live-Zq8vN3pL5tR7wX2yB4mK",
		"SPACE_KEY": "sk-live Zq8vN3pL5tR7wX2yB4mK",
		"LONG_KEY":  strings.Repeat("k", MaxCredentialValue+1),
		"EMPTY_KEY": "",
	}
	writeCAFiles(t, filepath.Join(dir, "ca"))
	return f
}

func (f *fixture) options(profile string) Options {
	return Options{
		Profile:   profile,
		Workspace: f.ws,
		Layout:    layout.Production(),
		Environment: paths.Environment{
			LookupEnv: func(k string) (string, bool) { v, ok := f.env[k]; return v, ok },
			UID:       os.Getuid(),
		},
		File: "config.toml",
	}
}

// expand replaces @DIR@ and @WS@ in a document.
func (f *fixture) expand(doc string) string {
	return strings.NewReplacer("@DIR@", f.dir, "@WS@", f.ws).Replace(doc)
}

func (f *fixture) resolve(t testing.TB, doc string) (*ResolvedDomainConfiguration, error) {
	t.Helper()
	cfg, err := Resolve([]byte(f.expand(doc)), f.options("dev"))
	if cfg != nil {
		t.Cleanup(func() { cfg.Close() })
	}
	return cfg, err
}

const readinessTail = `
[profiles.dev.readiness]
denied = [{ address = "198.51.100.1", port = 443 }]
permitted = [{ address = "192.0.2.1", port = 443 }]
dns = [{ resolver = "192.0.2.53", query = "example.com" }]
`

// testDoc returns a valid document whose profile dev carries the extra
// keys, followed by tail (tables after the readiness table).
func testDoc(extra, tail string) string {
	return `schema = "lazaret-trusted-host-config-v1"

[profiles.dev]
image = "docker.io/library/debian:bookworm"
allow_egress = ["192.0.2.0/24"]
persistent_dirs = ["/home/agent"]
` + extra + "\n" + readinessTail + tail
}

func problemsOf(t testing.TB, err error) []Problem {
	t.Helper()
	var ie *InvalidError
	if !errors.As(err, &ie) {
		t.Fatalf("error %v is not an *InvalidError", err)
	}
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("errors.Is(%v, ErrInvalid) is false", err)
	}
	return ie.Problems
}

func dumpProblems(ps []Problem) string {
	var b strings.Builder
	for _, p := range ps {
		fmt.Fprintf(&b, "\n  [%s] %s", p.Rule, p.String())
	}
	return b.String()
}
