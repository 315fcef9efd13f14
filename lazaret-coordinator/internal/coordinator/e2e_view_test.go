package coordinator

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// gitWorkspace makes e's workspace a repository with a committed tracked
// file and a .gitignore'd .env and build/ holding host-only content.
func (e *env) gitWorkspace(t *testing.T) {
	t.Helper()
	files := map[string]string{
		".gitignore":  ".env\nbuild/\n",
		"tracked":     "tracked-host\n",
		".env":        "SECRET=host-only\n",
		"build/out.o": "host-build\n",
	}
	e.writeHostFiles(t, files)
	for _, argv := range [][]string{
		{"add", ".gitignore", "tracked"},
		{"-c", "user.email=e2e@lazaret.invalid", "-c", "user.name=e2e", "commit", "-q", "-m", "init"},
	} {
		cmd := exec.Command("git", argv...)
		cmd.Dir = e.workspace
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %q: %v: %s", argv, err, out)
		}
	}
}

// withoutIsolation sets isolate_gitignored = false in the test profile
// and resolves the configuration again.
func (e *env) withoutIsolation(t *testing.T) {
	t.Helper()
	b, err := os.ReadFile(e.cfgFile)
	if err != nil {
		t.Fatal(err)
	}
	const line = "persistent_dirs = [\"/home/agent\"]\n"
	if !bytes.Contains(b, []byte(line)) {
		t.Fatalf("configuration %q has no %q line", e.cfgFile, strings.TrimSpace(line))
	}
	b = bytes.Replace(b, []byte(line), []byte(line+"isolate_gitignored = false\n"), 1)
	if err := os.WriteFile(e.cfgFile, b, 0o600); err != nil {
		t.Fatal(err)
	}
	e.resolve(t)
}

// isolatedRoot is where the Domain's git-ignored paths live.
func (e *env) isolatedRoot() string {
	return filepath.Join(e.storage, "state", e.domain.String(), "isolated")
}

// gitrouteDaemons returns the PIDs of the lazaret-gitroute processes
// serving e's workspace.
func gitrouteDaemons(e *env) []int {
	var pids []int
	list, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range list {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		argv := strings.Split(string(b), "\x00")
		if filepath.Base(argv[0]) != "lazaret-gitroute" || !bytes.Contains(b, []byte(e.storage)) {
			continue
		}
		if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p))); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestServeEndToEndWorkspaceView(t *testing.T) {
	if !enterInternet(t) {
		return
	}
	e := newEnv(t)
	e.gitWorkspace(t)
	h := e.start(t, time.Second)
	c, session := e.client(t)
	if n := len(gitrouteDaemons(e)); n != 1 {
		t.Fatalf("%d lazaret-gitroute daemons serve the workspace, want 1", n)
	}

	t.Run("ignored host files are invisible", func(t *testing.T) {
		out, _, x := execute(t, c, session(), "ls", "-a", "/workspace")
		if code(x) != 0 {
			t.Fatalf("ls: %+v", x)
		}
		names := strings.Fields(out)
		for _, hidden := range []string{".env", "build"} {
			for _, n := range names {
				if n == hidden {
					t.Errorf("/workspace lists %q: %q", hidden, names)
				}
			}
		}
		for _, shown := range []string{".git", ".gitignore", "tracked"} {
			if !strings.Contains(" "+strings.Join(names, " ")+" ", " "+shown+" ") {
				t.Errorf("/workspace does not list %q: %q", shown, names)
			}
		}
		out, _, x = execute(t, c, session(), "/bin/sh", "-c", "cat /workspace/.env /workspace/build/out.o")
		if code(x) == 0 || strings.Contains(out, "host") {
			t.Errorf("reading the host's ignored files: %q, %+v", out, x)
		}
	})
	t.Run("tracked file reads and writes through", func(t *testing.T) {
		out, _, x := execute(t, c, session(), "/bin/sh", "-c", "cat /workspace/tracked && echo from-sandbox >> /workspace/tracked")
		if out != "tracked-host\n" || code(x) != 0 {
			t.Fatalf("tracked: %q %+v", out, x)
		}
		if got := readFile(t, filepath.Join(e.workspace, "tracked")); got != "tracked-host\nfrom-sandbox\n" {
			t.Errorf("host tracked file = %q", got)
		}
	})
	t.Run(".git/config is read-only", func(t *testing.T) {
		before := readFile(t, filepath.Join(e.workspace, ".git", "config"))
		_, errs, x := execute(t, c, session(), "/bin/sh", "-c", "echo '[core]' >> /workspace/.git/config")
		if code(x) == 0 || !strings.Contains(errs, "Read-only file system") {
			t.Errorf("writing .git/config: stderr %q, %+v; want EROFS", errs, x)
		}
		if after := readFile(t, filepath.Join(e.workspace, ".git", "config")); after != before {
			t.Errorf("host .git/config changed to %q", after)
		}
	})
	t.Run("new ignored file lands in the isolated root", func(t *testing.T) {
		_, errs, x := execute(t, c, session(), "/bin/sh", "-c", "echo SECRET=sandbox > /workspace/.env && mkdir -p /workspace/build && echo sb > /workspace/build/out.o")
		if code(x) != 0 {
			t.Fatalf("writing ignored files: %q %+v", errs, x)
		}
		if got := readFile(t, filepath.Join(e.workspace, ".env")); got != "SECRET=host-only\n" {
			t.Errorf("host .env = %q, want it untouched", got)
		}
		if got := readFile(t, filepath.Join(e.isolatedRoot(), ".env")); got != "SECRET=sandbox\n" {
			t.Errorf("isolated .env = %q", got)
		}
		st, err := os.Stat(e.isolatedRoot())
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o700 {
			t.Errorf("isolated root mode %v, want 0700", st.Mode().Perm())
		}
	})
	c.Close()
	waitExit(t, e, h)
	log := e.log(t)
	for _, want := range []string{"role=GitRouting state=Intent", "role=GitRouting state=Prepared", "role=GitRouting state=ReleaseIntent", "role=GitRouting state=Clean"} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q", want)
		}
	}
	// The view is released after the sandbox and before the State Anchor.
	iSandbox, iView, iAnchor := strings.Index(log, "step=sandbox\n"), strings.Index(log, "step=workspace\n"), strings.Index(log, "step=anchor\n")
	if iSandbox < 0 || iView < iSandbox || iAnchor < iView {
		t.Errorf("release order: sandbox at %d, workspace at %d, anchor at %d", iSandbox, iView, iAnchor)
	}
	if n := len(gitrouteDaemons(e)); n != 0 {
		t.Errorf("%d lazaret-gitroute daemons left", n)
	}
	checkNothingLeft(t, e)

	t.Run("isolated copies persist across generations", func(t *testing.T) {
		h2 := e.start(t, 0)
		c2, session2 := e.client(t)
		out, _, x := execute(t, c2, session2(), "cat", "/workspace/.env", "/workspace/build/out.o")
		if out != "SECRET=sandbox\nsb\n" || code(x) != 0 {
			t.Errorf("second generation reads %q, %+v", out, x)
		}
		c2.Close()
		waitExit(t, e, h2)
		checkNothingLeft(t, e)
	})
	if t.Failed() || os.Getenv("LZ_E2E_DUMP_LOG") != "" {
		t.Log(e.log(t))
	}
}

func TestServeEndToEndWorkspaceViewLost(t *testing.T) {
	if !enterInternet(t) {
		return
	}
	e := newEnv(t)
	e.gitWorkspace(t)
	h := e.start(t, time.Minute)
	c, session := e.client(t)
	if out, _, x := execute(t, c, session(), "cat", "/workspace/tracked"); out != "tracked-host\n" || code(x) != 0 {
		t.Fatalf("cat tracked: %q %+v", out, x)
	}
	c.Close()
	pids := gitrouteDaemons(e)
	if len(pids) != 1 {
		t.Fatalf("lazaret-gitroute daemons %v, want one", pids)
	}
	if err := syscall.Kill(pids[0], syscall.SIGKILL); err != nil {
		t.Fatalf("kill -9 %d: %v", pids[0], err)
	}
	t0 := time.Now()
	select {
	case <-h.done:
	case <-time.After(90 * time.Second):
		t.Fatalf("coordinator still runs 90s after its gitroute daemon was killed\n%s", e.log(t))
	}
	t.Logf("coordinator exited %v after the kill: %v", time.Since(t0), h.err)
	var ee *exec.ExitError
	if !errors.As(h.err, &ee) || ee.ExitCode() != 1 {
		t.Errorf("coordinator exit %v, want exit status 1 (generation failed)", h.err)
	}
	log := e.log(t)
	for _, want := range []string{"workspace view ended", "role=GitRouting state=Clean", "generation ended"} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q", want)
		}
	}
	checkNothingLeft(t, e)
	if t.Failed() || os.Getenv("LZ_E2E_DUMP_LOG") != "" {
		t.Log(log)
	}
}

func TestServeEndToEndPlainWorkspace(t *testing.T) {
	if !enterInternet(t) {
		return
	}
	e := newEnv(t)
	e.gitWorkspace(t)
	e.withoutIsolation(t)
	h := e.start(t, time.Second)
	c, session := e.client(t)
	if n := len(gitrouteDaemons(e)); n != 0 {
		t.Errorf("%d lazaret-gitroute daemons run with isolate_gitignored = false", n)
	}
	out, _, x := execute(t, c, session(), "cat", "/workspace/.env")
	if out != "SECRET=host-only\n" || code(x) != 0 {
		t.Errorf("plain bind: cat .env = %q, %+v; want the host file", out, x)
	}
	c.Close()
	waitExit(t, e, h)
	if log := e.log(t); strings.Contains(log, "role=GitRouting") {
		t.Errorf("a GitRouting participant was recorded for the plain bind")
	}
	if _, err := os.Stat(e.isolatedRoot()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("isolated root %q exists with isolate_gitignored = false (%v)", e.isolatedRoot(), err)
	}
	checkNothingLeft(t, e)
}

func TestEnsurePrivateDir(t *testing.T) {
	base := t.TempDir()
	tests := []struct {
		name    string
		setup   func(p string) error
		wantErr bool
	}{
		{"created when missing", func(string) error { return nil }, false},
		{"existing private directory", func(p string) error { return os.Mkdir(p, 0o700) }, false},
		{"group-readable directory", func(p string) error {
			if err := os.Mkdir(p, 0o700); err != nil {
				return err
			}
			return os.Chmod(p, 0o750)
		}, true},
		{"symbolic link to a directory", func(p string) error { return os.Symlink(base, p) }, true},
		{"regular file", func(p string) error { return os.WriteFile(p, nil, 0o600) }, true},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(base, strconv.Itoa(i))
			if err := tc.setup(p); err != nil {
				t.Fatal(err)
			}
			err := ensurePrivateDir(p)
			if (err != nil) != tc.wantErr {
				t.Fatalf("ensurePrivateDir(%q) = %v, want error %v", p, err, tc.wantErr)
			}
			if err == nil {
				st, err := os.Lstat(p)
				if err != nil || !st.IsDir() || st.Mode().Perm() != 0o700 {
					t.Fatalf("%q after ensurePrivateDir: %v, %v", p, st, err)
				}
			}
		})
	}
}
