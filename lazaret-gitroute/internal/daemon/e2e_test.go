package daemon_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"lazaret.dev/pkg/gitroute"
	"lazaret.dev/pkg/testbin"
	"lazaret.dev/pkg/testgate"
)

var binary string

func TestMain(m *testing.M) {
	// The views these tests mount must not be copied into the mount
	// namespaces of tests running beside them (testbin.InPrivateMounts).
	if code, ran := testbin.InPrivateMounts(); ran {
		os.Exit(code)
	}
	os.Exit(testbin.Main(m, &binary, "lazaret.dev/lazaret-gitroute"))
}

// requireFUSE gates on a usable FUSE and on git, which every test runs.
func requireFUSE(t testing.TB) {
	t.Helper()
	testgate.FUSE(t)
	testgate.Command(t, "git")
}

type env struct {
	host, iso, mnt, home string
	d                    *gitroute.Daemon
	log                  *bytes.Buffer
}

func (e *env) git(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = []string{"HOME=" + e.home, "GIT_CONFIG_NOSYSTEM=1", "PATH=" + os.Getenv("PATH"),
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.invalid", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.invalid"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v in %q: %v\n%s", args, dir, err, out)
	}
	return string(out)
}

// configList is host git's merged configuration of the repository at
// e.host, with its origins and includes followed, as a developer's git
// would read it (a scratch HOME, no system file).
func (e *env) configList(t testing.TB) string {
	t.Helper()
	cmd := exec.Command("git", "config", "--list", "--show-origin", "--includes")
	cmd.Dir = e.host
	cmd.Env = []string{"HOME=" + e.home, "GIT_CONFIG_NOSYSTEM=1", "PATH=" + os.Getenv("PATH")}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("host git config --list: %v\n%s", err, out)
	}
	return string(out)
}

func writeFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readFile(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// newRepo makes the directories of an env (workspace, isolated root,
// mountpoint, home) and an empty repository in the workspace, without
// starting the daemon.
func newRepo(t *testing.T) *env {
	t.Helper()
	base := t.TempDir()
	e := &env{host: filepath.Join(base, "ws"), iso: filepath.Join(base, "iso"), mnt: filepath.Join(base, "mnt"), home: filepath.Join(base, "home"), log: &bytes.Buffer{}}
	for _, d := range []string{e.host, e.iso, e.mnt, e.home} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	e.git(t, e.host, "init", "-q", "-b", "main", ".")
	return e
}

// setup makes a repository with tracked, ignored and nested-ignore content
// and starts the daemon on it.
func setup(t *testing.T, files map[string]string, method string) *env {
	t.Helper()
	requireFUSE(t)
	e := newRepo(t)
	for p, c := range files {
		writeFile(t, filepath.Join(e.host, p), c)
	}
	e.git(t, e.host, "add", ".")
	if _, ok := files["forced/tracked.log"]; ok {
		e.git(t, e.host, "add", "-f", "forced/tracked.log")
	}
	e.git(t, e.host, "commit", "-q", "-m", "initial")
	e.start(t, method)
	return e
}

func (e *env) start(t *testing.T, method string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	spec := gitroute.Spec{Binary: binary, HostRoot: e.host, IsolatedRoot: e.iso, Mountpoint: e.mnt, Stderr: e.log,
		Env: []string{"PATH=" + os.Getenv("PATH"), "HOME=" + e.home}}
	if method != "" {
		spec.Binary = writeWrapper(t, method)
	}
	d, err := gitroute.Start(ctx, spec)
	if err != nil {
		t.Fatalf("Start: %v\n%s", err, e.log)
	}
	e.d = d
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		select {
		case <-d.Done():
		default:
			if err := d.Release(ctx); err != nil {
				t.Errorf("Release: %v\n%s", err, e.log)
			}
		}
	})
}

// writeWrapper returns an executable that runs the daemon with a mount
// method flag.
func writeWrapper(t *testing.T, method string) string {
	p := filepath.Join(t.TempDir(), "gitroute-wrapper")
	script := "#!/bin/sh\nexec " + binary + " --mount-method " + method + " \"$@\"\n"
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

var baseFiles = map[string]string{
	".gitignore":         "*.log\n.env\nnode_modules/\nbuild/\n!keep.log\n",
	"README.md":          "hello\n",
	"src/main.go":        "package main\n",
	"src/.gitignore":     "generated/\n!important.log\n",
	"keep.log":           "kept\n",
	"src/important.log":  "important\n",
	".git/hooks/.keep":   "",
	"docs/guide.txt":     "guide\n",
	"forced/tracked.log": "tracked though ignored\n",
}

func TestView(t *testing.T) {
	e := setup(t, baseFiles, "")
	// Host-only ignored content, made after the commit.
	writeFile(t, filepath.Join(e.host, ".env"), "SECRET=host\n")
	writeFile(t, filepath.Join(e.host, "node_modules/dep/index.js"), "host dep\n")
	writeFile(t, filepath.Join(e.host, "debug.log"), "host log\n")
	writeFile(t, filepath.Join(e.host, "src/generated/x.go"), "host gen\n")
	// The daemon froze its classification at start; these host files
	// exist now and must stay invisible because they route by path.
	h, v := e.host, e.mnt

	t.Run("tracked read and write through", func(t *testing.T) {
		if got := readFile(t, filepath.Join(v, "README.md")); got != "hello\n" {
			t.Fatalf("README through view = %q", got)
		}
		writeFile(t, filepath.Join(v, "src/main.go"), "package main // edited\n")
		if got := readFile(t, filepath.Join(h, "src/main.go")); got != "package main // edited\n" {
			t.Fatalf("host copy after view write = %q", got)
		}
		writeFile(t, filepath.Join(h, "docs/guide.txt"), "host edit\n")
		time.Sleep(1100 * time.Millisecond) // attribute cache
		if got := readFile(t, filepath.Join(v, "docs/guide.txt")); got != "host edit\n" {
			t.Fatalf("view copy after host write = %q", got)
		}
	})

	t.Run("ignored host files invisible", func(t *testing.T) {
		for _, p := range []string{".env", "node_modules/dep/index.js", "debug.log", "src/generated/x.go", "node_modules"} {
			if _, err := os.Lstat(filepath.Join(v, p)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s visible in view: %v", p, err)
			}
		}
		ents, err := os.ReadDir(v)
		if err != nil {
			t.Fatal(err)
		}
		for _, de := range ents {
			if de.Name() == ".env" || de.Name() == "debug.log" || de.Name() == "node_modules" {
				t.Errorf("readdir shows %s", de.Name())
			}
		}
	})

	t.Run("ignored view copies separate", func(t *testing.T) {
		writeFile(t, filepath.Join(v, ".env"), "SECRET=sandbox\n")
		writeFile(t, filepath.Join(v, "node_modules/dep/index.js"), "sandbox dep\n")
		writeFile(t, filepath.Join(v, "src/generated/x.go"), "sandbox gen\n")
		writeFile(t, filepath.Join(v, "new.log"), "new log\n")
		for p, want := range map[string]string{".env": "SECRET=", "node_modules/dep/index.js": "", "src/generated/x.go": "", "new.log": ""} {
			_ = want
			if got := readFile(t, filepath.Join(e.iso, p)); !strings.Contains(got, "sandbox") && !strings.Contains(got, "new log") {
				t.Errorf("isolated %s = %q", p, got)
			}
		}
		if got := readFile(t, filepath.Join(h, ".env")); got != "SECRET=host\n" {
			t.Errorf("host .env changed to %q", got)
		}
		if _, err := os.Stat(filepath.Join(h, "new.log")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("new ignored file reached the host: %v", err)
		}
		if got := readFile(t, filepath.Join(v, ".env")); got != "SECRET=sandbox\n" {
			t.Errorf("view .env = %q", got)
		}
	})

	t.Run("negations and nested ignore files", func(t *testing.T) {
		if got := readFile(t, filepath.Join(v, "keep.log")); got != "kept\n" {
			t.Errorf("keep.log (negated) = %q", got)
		}
		if got := readFile(t, filepath.Join(v, "src/important.log")); got != "important\n" {
			t.Errorf("src/important.log (nested negation) = %q", got)
		}
		if got := readFile(t, filepath.Join(v, "forced/tracked.log")); got != "tracked though ignored\n" {
			t.Errorf("tracked ignored-pattern file = %q", got)
		}
	})

	t.Run("editing gitignore does not expose", func(t *testing.T) {
		writeFile(t, filepath.Join(v, ".gitignore"), "# nothing ignored now\n")
		writeFile(t, filepath.Join(v, "src/.gitignore"), "")
		if got := readFile(t, filepath.Join(h, ".gitignore")); got != "# nothing ignored now\n" {
			t.Fatalf("tracked .gitignore did not reach the host: %q", got)
		}
		if got := readFile(t, filepath.Join(v, ".env")); got != "SECRET=sandbox\n" {
			t.Errorf("after un-ignoring, view .env = %q (host value must never show)", got)
		}
		for _, p := range []string{"debug.log", "node_modules/dep/index.js"} {
			if b, err := os.ReadFile(filepath.Join(v, p)); strings.Contains(string(b), "host") {
				t.Errorf("after un-ignoring, %s shows host content %q (%v)", p, b, err)
			}
		}
		if _, err := os.Stat(filepath.Join(v, "debug.log")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("host-only ignored debug.log visible after un-ignoring: %v", err)
		}
		// A new path the edited rules no longer ignore still routes by
		// the frozen rules.
		writeFile(t, filepath.Join(v, "later.log"), "later\n")
		if _, err := os.Stat(filepath.Join(h, "later.log")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("new path ignored at start reached the host: %v", err)
		}
		writeFile(t, filepath.Join(v, ".gitignore"), baseFiles[".gitignore"])
		writeFile(t, filepath.Join(v, "src/.gitignore"), baseFiles["src/.gitignore"])
	})

	t.Run("read-only git paths", func(t *testing.T) {
		for _, p := range []string{".git/config", ".git/hooks/pre-commit", ".git/hooks/.keep"} {
			err := os.WriteFile(filepath.Join(v, p), []byte("#!/bin/sh\n"), 0o755)
			if !errors.Is(err, syscall.EROFS) {
				t.Errorf("writing %s: %v, want EROFS", p, err)
			}
		}
		checks := []struct {
			name string
			err  error
		}{
			{"chmod config", os.Chmod(filepath.Join(v, ".git/config"), 0o777)},
			{"rename config", os.Rename(filepath.Join(v, ".git/config"), filepath.Join(v, ".git/config2"))},
			{"replace config", os.Rename(filepath.Join(v, "README.md"), filepath.Join(v, ".git/config"))},
			{"unlink keep", os.Remove(filepath.Join(v, ".git/hooks/.keep"))},
			{"rename hooks", os.Rename(filepath.Join(v, ".git/hooks"), filepath.Join(v, ".git/hooks2"))},
			{"rename .git", os.Rename(filepath.Join(v, ".git"), filepath.Join(v, "dotgit"))},
			{"symlink in hooks", os.Symlink("/bin/sh", filepath.Join(v, ".git/hooks/post-checkout"))},
			{"mkdir in hooks", os.Mkdir(filepath.Join(v, ".git/hooks/d"), 0o755)},
			{"link config", os.Link(filepath.Join(v, ".git/config"), filepath.Join(v, "cfg"))},
			{"access W_OK config", unix.Access(filepath.Join(v, ".git/config"), unix.W_OK)},
		}
		for _, c := range checks {
			if !errors.Is(c.err, syscall.EROFS) {
				t.Errorf("%s: %v, want EROFS", c.name, c.err)
			}
		}
		// The view serves no extended attributes at all.
		if err := unix.Setxattr(filepath.Join(v, ".git/config"), "user.x", []byte("1"), 0); !errors.Is(err, unix.EOPNOTSUPP) {
			t.Errorf("setxattr config: %v, want EOPNOTSUPP", err)
		}
		if _, err := os.ReadFile(filepath.Join(v, ".git/config")); err != nil {
			t.Errorf("reading .git/config: %v", err)
		}
	})

	t.Run("git works inside the view", func(t *testing.T) {
		e.git(t, v, "status", "--porcelain")
		writeFile(t, filepath.Join(v, "src/feature.go"), "package main\n")
		e.git(t, v, "checkout", "-q", "-b", "feature")
		e.git(t, v, "add", "src/feature.go", "src/main.go")
		e.git(t, v, "commit", "-q", "-m", "feature")
		if diff := e.git(t, v, "diff", "main", "--stat"); !strings.Contains(diff, "src/feature.go") {
			t.Errorf("git diff in view: %q", diff)
		}
		if br := e.git(t, h, "branch", "--list", "feature"); !strings.Contains(br, "feature") {
			t.Errorf("branch made in view not on host: %q", br)
		}
		st := e.git(t, v, "status", "--porcelain", "--ignored")
		if strings.Contains(st, "?? .env") {
			t.Errorf("status shows sandbox .env as untracked: %q", st)
		}
	})

	t.Run("symlink escapes", func(t *testing.T) {
		outside := t.TempDir()
		writeFile(t, filepath.Join(outside, "secret"), "outside\n")
		if err := os.Symlink(outside, filepath.Join(h, "esc")); err != nil {
			t.Fatal(err)
		}
		target, err := os.Readlink(filepath.Join(v, "esc"))
		if err != nil || target != outside {
			t.Fatalf("readlink esc = %q, %v", target, err)
		}
		// A directory the view has looked up, swapped on the host for a
		// link out of the workspace: the server must not follow it.
		if err := os.Mkdir(filepath.Join(h, "swap"), 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(h, "swap/secret"), "inside\n")
		fd, err := unix.Open(filepath.Join(v, "swap"), unix.O_PATH|unix.O_DIRECTORY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(fd)
		if err := os.RemoveAll(filepath.Join(h, "swap")); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(outside, filepath.Join(h, "swap")); err != nil {
			t.Fatal(err)
		}
		if _, err := unix.Openat(fd, "secret", unix.O_RDONLY, 0); err == nil {
			t.Fatal("read through a swapped-in symlink succeeded")
		}
		if err := os.Symlink("../..", filepath.Join(h, "up")); err != nil {
			t.Fatal(err)
		}
		ufd, err := unix.Open(filepath.Join(v, "src"), unix.O_PATH|unix.O_DIRECTORY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(ufd)
		if err := os.Rename(filepath.Join(h, "src"), filepath.Join(h, "src.real")); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("..", filepath.Join(h, "src")); err != nil {
			t.Fatal(err)
		}
		if _, err := unix.Openat(ufd, "README.md", unix.O_RDONLY, 0); err == nil {
			t.Error("resolution through a swapped-in relative symlink succeeded")
		}
		os.Remove(filepath.Join(h, "src"))
		os.Rename(filepath.Join(h, "src.real"), filepath.Join(h, "src"))
	})

	t.Run("rename and hard link escapes", func(t *testing.T) {
		if err := os.Rename(filepath.Join(v, "README.md"), filepath.Join(v, "moved.log")); !errors.Is(err, syscall.EXDEV) {
			t.Errorf("rename tracked -> ignored: %v, want EXDEV", err)
		}
		if err := os.Rename(filepath.Join(v, ".env"), filepath.Join(v, "env.txt")); !errors.Is(err, syscall.EXDEV) {
			t.Errorf("rename ignored -> tracked: %v, want EXDEV", err)
		}
		if err := os.Link(filepath.Join(v, ".env"), filepath.Join(v, "env-link.txt")); !errors.Is(err, syscall.EXDEV) {
			t.Errorf("link ignored -> tracked: %v, want EXDEV", err)
		}
		// A host directory holding a hidden ignored file may not move.
		writeFile(t, filepath.Join(h, "docs/private.log"), "host private\n")
		if err := os.Rename(filepath.Join(v, "docs"), filepath.Join(v, "docs2")); !errors.Is(err, syscall.EXDEV) {
			t.Errorf("rename of a directory hiding an ignored host file: %v, want EXDEV", err)
		}
		// A host file with a second link (possibly outside) is read-only.
		if err := os.Link(filepath.Join(h, "keep.log"), filepath.Join(t.TempDir(), "outside-link")); err != nil {
			t.Skipf("cannot hard-link across test dirs: %v", err)
		}
		time.Sleep(1100 * time.Millisecond)
		if err := os.WriteFile(filepath.Join(v, "keep.log"), []byte("x"), 0o644); !errors.Is(err, syscall.EPERM) {
			t.Errorf("writing a multiply-linked host file: %v, want EPERM", err)
		}
	})
}

func TestKillLeavesNoMount(t *testing.T) {
	for _, method := range []string{"fusermount", "direct"} {
		t.Run(method, func(t *testing.T) {
			if method == "direct" && os.Geteuid() != 0 {
				t.Skip("a direct mount needs root")
			}
			e := setup(t, map[string]string{"a.txt": "a\n", ".gitignore": "*.log\n"}, method)
			before := e.d.Mount()
			if got := readFile(t, filepath.Join(e.mnt, "a.txt")); got != "a\n" {
				t.Fatalf("a.txt = %q", got)
			}
			if err := syscall.Kill(int(e.d.Process().HostPID), syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err := e.d.Wait(ctx)
			if !errors.Is(err, gitroute.ErrDaemonExited) {
				t.Fatalf("Wait after kill -9: %v, want ErrDaemonExited", err)
			}
			if present, err := gitroute.Mounted(e.mnt, before); err != nil || present {
				t.Fatalf("mount still present after kill -9: %v, %v", present, err)
			}
			mi, _ := os.ReadFile("/proc/self/mountinfo")
			if bytes.Contains(mi, []byte(" "+e.mnt+" ")) {
				t.Fatalf("mountinfo still lists %s", e.mnt)
			}
		})
	}
}

func TestReleaseUnmounts(t *testing.T) {
	e := setup(t, map[string]string{"a.txt": "a\n"}, "")
	m := e.d.Mount()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := e.d.Release(ctx); err != nil {
		t.Fatalf("Release: %v\n%s", err, e.log)
	}
	if present, err := gitroute.Mounted(e.mnt, m); err != nil || present {
		t.Fatalf("mount present after Release: %v %v", present, err)
	}
}

func TestIsolatedPersistsAcrossGenerations(t *testing.T) {
	e := setup(t, map[string]string{".gitignore": ".env\n"}, "")
	writeFile(t, filepath.Join(e.mnt, ".env"), "gen1\n")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := e.d.Release(ctx); err != nil {
		t.Fatal(err)
	}
	e.start(t, "")
	if got := readFile(t, filepath.Join(e.mnt, ".env")); got != "gen1\n" {
		t.Fatalf(".env in the next generation = %q", got)
	}
}

func TestStartFailures(t *testing.T) {
	requireFUSE(t)
	base := t.TempDir()
	notRepo := filepath.Join(base, "plain")
	for _, d := range []string{notRepo, filepath.Join(base, "iso"), filepath.Join(base, "mnt")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name string
		spec gitroute.Spec
		want error
	}{
		{"relative path", gitroute.Spec{Binary: binary, HostRoot: "ws", IsolatedRoot: "/i", Mountpoint: "/m"}, gitroute.ErrSpec},
		{"no git dir", gitroute.Spec{Binary: binary, HostRoot: notRepo, IsolatedRoot: filepath.Join(base, "iso"), Mountpoint: filepath.Join(base, "mnt")}, gitroute.ErrDaemonFailed},
		{"isolated inside workspace", gitroute.Spec{Binary: binary, HostRoot: base, IsolatedRoot: filepath.Join(base, "iso"), Mountpoint: filepath.Join(base, "mnt")}, gitroute.ErrDaemonFailed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			var log bytes.Buffer
			tc.spec.Stderr = &log
			d, err := gitroute.Start(ctx, tc.spec)
			if !errors.Is(err, tc.want) {
				if d != nil {
					d.Kill()
				}
				t.Fatalf("Start: %v, want %v\n%s", err, tc.want, log.String())
			}
		})
	}
}
