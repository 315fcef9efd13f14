package daemon_test

import (
	"context"
	"errors"
	"io/fs"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"lazaret.dev/pkg/gitroute"
)

// adminNames are the path components random operations under .git draw
// from: what git reads as configuration or code, what it writes, and
// names of no meaning.
var adminNames = []string{
	"config", "config.worktree", "commondir", "gitdir", "hooks", "pre-commit", "info", "attributes",
	"exclude", "alternates", "http-alternates", "objects", "refs", "heads", "logs", "modules", "sub",
	"worktrees", "wt", "HEAD", "index", "packed-refs", "lz-include.cfg", "extra.cfg", "rebase-merge",
	"git-rebase-todo", "description", "branches", "remotes", "shallow", "x", "config.lock", "MERGE_MSG",
}

// evilConfigText changes git's configuration wherever git reads it from.
const evilConfigText = "[core]\n\tfsmonitor = \"touch /nonexistent/pwned; false\"\n\tpager = lzpager\n[lz]\n\tplanted = yes\n[extensions]\n\tworktreeConfig = true\n"

// TestAdminWritesLeaveConfig makes random changes under .git through a
// mounted view (create, write, append, truncate, rename, hard link,
// unlink, mkdir, rmdir, symlink, FIFO, chmod, xattr) and checks that
// host git's configuration (`git config --list --show-origin --includes`,
// with a scratch HOME and no system file) never changes, and that no
// symbolic link, FIFO or device node appears under the host's .git.
// LZ_ADMIN_SEED and LZ_ADMIN_OPS repeat or lengthen a run.
func TestAdminWritesLeaveConfig(t *testing.T) {
	e := setup(t, baseFiles, "")
	h, v := e.host, e.mnt
	// Dangling includes and the worktree-config extension make files
	// the sandbox might create part of the configuration.
	e.git(t, h, "config", "include.path", "lz-include.cfg")
	e.git(t, h, "config", "includeIf.gitdir:/.path", "info/extra.cfg")
	e.git(t, h, "config", "extensions.worktreeConfig", "true")
	configList := func() string { t.Helper(); return e.configList(t) }
	baseline := configList()
	special := func() []string {
		var found []string
		filepath.WalkDir(filepath.Join(h, ".git"), func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.Type()&(fs.ModeSymlink|fs.ModeNamedPipe|fs.ModeDevice|fs.ModeSocket|fs.ModeCharDevice) != 0 {
				found = append(found, p)
			}
			return nil
		})
		return found
	}
	if s := special(); len(s) != 0 {
		t.Fatalf("host .git holds links or special files before the run: %q", s)
	}

	// A new seed each run, so that runs add up to more coverage; every
	// failure names it, and LZ_ADMIN_SEED repeats it.
	seed := time.Now().UnixNano()
	if s := os.Getenv("LZ_ADMIN_SEED"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("LZ_ADMIN_SEED %q: %v", s, err)
		}
		seed = n
	}
	ops := 2000
	if s := os.Getenv("LZ_ADMIN_OPS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("LZ_ADMIN_OPS %q: %v", s, err)
		}
		ops = n
	}
	rng := rand.New(rand.NewSource(seed))
	randPath := func() string {
		parts := []string{".git"}
		for i, n := 0, 1+rng.Intn(3); i < n; i++ {
			parts = append(parts, adminNames[rng.Intn(len(adminNames))])
		}
		return strings.Join(parts, "/")
	}
	var succeeded []string
	for i := 0; i < ops; i++ {
		p, q := randPath(), randPath()
		vp, vq := filepath.Join(v, p), filepath.Join(v, q)
		var op string
		var err error
		switch rng.Intn(13) {
		case 0:
			op, err = "write "+p, os.WriteFile(vp, []byte(evilConfigText), 0o644)
		case 1:
			op = "append " + p
			var f *os.File
			if f, err = os.OpenFile(vp, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644); err == nil {
				_, err = f.WriteString(evilConfigText)
				f.Close()
			}
		case 2:
			op, err = "truncate "+p, os.Truncate(vp, 0)
		case 3:
			op, err = "rename "+p+" "+q, os.Rename(vp, vq)
		case 4:
			op, err = "rename from outside to "+p, os.Rename(filepath.Join(v, "README.md"), vp)
		case 5:
			op, err = "link "+p+" "+q, os.Link(vp, vq)
		case 6:
			op, err = "unlink "+p, os.Remove(vp)
		case 7:
			op, err = "mkdir "+p, os.Mkdir(vp, 0o755)
		case 8:
			op, err = "symlink "+p, os.Symlink("../config", vp)
		case 9:
			op, err = "mkfifo "+p, unix.Mkfifo(vp, 0o644)
		case 10:
			op, err = "chmod "+p, os.Chmod(vp, 0o777)
		case 11:
			op, err = "setxattr "+p, unix.Setxattr(vp, "user.lz", []byte("1"), 0)
		case 12:
			op = "write evil config into a new file, rename onto " + p
			tmp := filepath.Join(v, "lz-staged")
			if err = os.WriteFile(tmp, []byte(evilConfigText), 0o644); err == nil {
				err = os.Rename(tmp, vp)
				os.Remove(tmp)
			}
		}
		if err == nil {
			succeeded = append(succeeded, op)
		}
		if i%100 == 99 || i == ops-1 {
			// A sandbox that breaks HEAD makes host git stop finding
			// the repository, and its configuration disappears: that is
			// a denial, not a configuration of the sandbox's. So HEAD is
			// repaired from the host side for the look and put back as
			// the sandbox left it, and the configuration must be exactly
			// the baseline. Where HEAD is not a file any more, every
			// entry host git shows must at least be one it showed before.
			head := filepath.Join(h, ".git", "HEAD")
			st, herr := os.Lstat(head)
			switch {
			case herr == nil && st.Mode().IsRegular(), errors.Is(herr, fs.ErrNotExist):
				saved, rerr := os.ReadFile(head)
				writeFile(t, head, "ref: refs/heads/main\n")
				got := configList()
				if rerr == nil {
					if err := os.WriteFile(head, saved, st.Mode().Perm()); err != nil {
						t.Fatal(err)
					}
				} else if err := os.Remove(head); err != nil {
					t.Fatal(err)
				}
				if got != baseline {
					t.Fatalf("seed %d: after %d operations host git config changed\nfrom %s\nto %s\nsucceeded: %q", seed, i+1, baseline, got, succeeded)
				}
			default:
				if extra := notIn(configList(), baseline); len(extra) != 0 {
					t.Fatalf("seed %d: after %d operations host git config has new entries %q\nsucceeded: %q", seed, i+1, extra, succeeded)
				}
			}
			if s := special(); len(s) != 0 {
				t.Fatalf("seed %d: after %d operations host .git holds %q\nsucceeded: %q", seed, i+1, s, succeeded)
			}
		}
	}
	if len(succeeded) == 0 {
		t.Fatalf("seed %d: no operation succeeded; the run tested nothing but refusals", seed)
	}
	// Repaired from the host side, the repository's configuration is
	// exactly what it was.
	// (The sandbox may have made HEAD a directory.)
	if err := os.RemoveAll(filepath.Join(h, ".git", "HEAD")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(h, ".git", "HEAD"), "ref: refs/heads/main\n")
	if got := configList(); got != baseline {
		t.Fatalf("seed %d: host git config changed\nfrom %s\nto %s\nsucceeded: %q", seed, baseline, got, succeeded)
	}
	t.Logf("seed %d: %d of %d operations succeeded; configuration unchanged", seed, len(succeeded), ops)
}

// notIn returns the lines of got that are not lines of want.
func notIn(got, want string) []string {
	have := map[string]bool{}
	for _, l := range strings.Split(want, "\n") {
		have[l] = true
	}
	var extra []string
	for _, l := range strings.Split(got, "\n") {
		if !have[l] {
			extra = append(extra, l)
		}
	}
	return extra
}

// TestStartRefusesSandboxConfig checks that the daemon does not start on a
// repository whose configuration would come from a file the sandbox may
// have written: a commondir file, or an include of a workspace file. The
// failure names the file.
func TestStartRefusesSandboxConfig(t *testing.T) {
	requireFUSE(t)
	cases := map[string]func(e *env){
		"commondir": func(e *env) {
			writeFile(t, filepath.Join(e.host, ".git", "lzevil", "config"), evilConfigText)
			writeFile(t, filepath.Join(e.host, ".git", "commondir"), "lzevil\n")
		},
		"include of a work-tree file": func(e *env) {
			writeFile(t, filepath.Join(e.host, "project.gitconfig"), evilConfigText)
			e.git(t, e.host, "config", "include.path", "../project.gitconfig")
		},
		"a setting naming the workspace root": func(e *env) {
			e.git(t, e.host, "config", "core.hooksPath", ".")
		},
		"a file named HEAD at the root": func(e *env) {
			writeFile(t, filepath.Join(e.host, "HEAD"), "ref: refs/heads/main\n")
		},
	}
	for name, plant := range cases {
		t.Run(name, func(t *testing.T) {
			e := newRepo(t)
			plant(e)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			d, err := gitroute.Start(ctx, gitroute.Spec{Binary: binary, HostRoot: e.host, IsolatedRoot: e.iso, Mountpoint: e.mnt, Stderr: e.log,
				Env: []string{"PATH=" + os.Getenv("PATH"), "HOME=" + e.home}})
			if err == nil {
				d.Kill()
				t.Fatalf("Start succeeded on a repository with a planted %s", name)
			}
			if !errors.Is(err, gitroute.ErrDaemonFailed) || !strings.Contains(err.Error(), e.host) {
				t.Fatalf("Start: %v; want a daemon failure naming a file under %q\n%s", err, e.host, e.log)
			}
			t.Logf("refused: %v", err)
		})
	}
}

// TestSubmoduleKeepsWorking checks a gitfile submodule present at start:
// git commits in it through the view, while its administrative directory
// in .git/modules has the same allowlist as the top-level .git, and its
// gitfile is read-only.
func TestSubmoduleKeepsWorking(t *testing.T) {
	e0 := &env{home: t.TempDir()}
	origin := filepath.Join(t.TempDir(), "origin")
	e0.git(t, t.TempDir(), "init", "-q", "-b", "main", origin)
	writeFile(t, filepath.Join(origin, "lib.txt"), "lib\n")
	e0.git(t, origin, "add", "lib.txt")
	e0.git(t, origin, "commit", "-q", "-m", "lib")
	e := setup(t, baseFiles, "")
	// Release the view started on the repository without the submodule
	// and start again once it has one.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := e.d.Release(ctx); err != nil {
		t.Fatal(err)
	}
	e.git(t, e.host, "-c", "protocol.file.allow=always", "submodule", "add", "-q", origin, "sub")
	e.git(t, e.host, "commit", "-q", "-m", "submodule")
	e.start(t, "")
	v := e.mnt
	writeFile(t, filepath.Join(v, "sub", "lib.txt"), "changed inside\n")
	e.git(t, filepath.Join(v, "sub"), "commit", "-q", "-a", "-m", "inside")
	if got := e.git(t, filepath.Join(e.host, "sub"), "log", "--format=%s"); got != "inside\nlib\n" {
		t.Errorf("host git log in sub = %q", got)
	}
	for _, p := range []string{".git/modules/sub/config", ".git/modules/sub/hooks/pre-commit", ".git/modules/sub/info/attributes", "sub/.git", ".git/modules/sub2"} {
		err := os.WriteFile(filepath.Join(v, p), []byte(evilConfigText), 0o644)
		if !errors.Is(err, unix.EROFS) {
			t.Errorf("writing %s through the view: %v, want EROFS", p, err)
		}
	}
	if err := os.Mkdir(filepath.Join(v, ".git/modules/other"), 0o755); !errors.Is(err, unix.EROFS) {
		t.Errorf("mkdir of a new submodule directory through the view: %v, want EROFS", err)
	}
	if err := os.Symlink("../../config", filepath.Join(v, ".git/modules/sub/refs/heads/lz")); !errors.Is(err, unix.EPERM) {
		t.Errorf("symlink among the submodule's refs: %v, want EPERM", err)
	}
}

// TestAdminDirectoryRenames checks that no directory rename inside .git
// brings a file to a sealed path or takes a sealed file out of its place:
// objects/info/alternates assembled in another directory and renamed onto
// objects/info, or objects/info renamed away from a host alternates file.
func TestAdminDirectoryRenames(t *testing.T) {
	e := setup(t, baseFiles, "")
	h, v := e.host, e.mnt
	staged := filepath.Join(v, ".git/objects/lzalt")
	if err := os.Mkdir(staged, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(staged, "alternates"), h+"\n")
	// git init leaves objects/info empty; the allowlist lets it go.
	if err := os.Remove(filepath.Join(v, ".git/objects/info")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(staged, filepath.Join(v, ".git/objects/info")); !errors.Is(err, unix.EXDEV) {
		t.Errorf("renaming a directory holding alternates onto objects/info: %v, want EXDEV", err)
	}
	if err := os.Rename(filepath.Join(v, ".git/objects"), filepath.Join(v, ".git/refs/lzobjects")); !errors.Is(err, unix.EXDEV) {
		t.Errorf("renaming objects: %v, want EXDEV", err)
	}
	if _, err := os.Lstat(filepath.Join(h, ".git/objects/info/alternates")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("host has objects/info/alternates (%v)", err)
	}
	// A host alternates file stays where git reads it, read-only.
	if err := os.Rename(staged, filepath.Join(v, ".git/objects/info-lz")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(h, ".git/objects/info"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(h, ".git/objects/info/alternates"), "/host/objects\n")
	// The view removed objects/info itself, so the kernel holds a negative
	// entry for it until the watcher reports the host's new one.
	within(t, "objects/info/alternates made on the host", shows(filepath.Join(v, ".git/objects/info/alternates"), "/host/objects\n", false))
	if err := os.Rename(filepath.Join(v, ".git/objects/info"), filepath.Join(v, ".git/objects/lzinfo")); !errors.Is(err, unix.EXDEV) {
		t.Errorf("renaming objects/info away from its alternates: %v, want EXDEV", err)
	}
	if got := readFile(t, filepath.Join(h, ".git/objects/info/alternates")); got != "/host/objects\n" {
		t.Errorf("host alternates = %q", got)
	}
}

// TestTrackedBareLayout checks a directory that holds a tracked HEAD at
// start (a committed fixture repository): git may take it for a bare
// repository, so its config, hooks and commondir are read-only through the
// view, it cannot be renamed away from its place in the index, and git in
// it reads the configuration it had.
func TestTrackedBareLayout(t *testing.T) {
	files := map[string]string{
		"README.md":                           "hello\n",
		"testdata/fixture/HEAD":               "ref: refs/heads/main\n",
		"testdata/fixture/config":             "[core]\n\tbare = true\n",
		"testdata/fixture/objects/info/.keep": "",
		"testdata/fixture/refs/heads/.keep":   "",
		"testdata/fixture/description":        "fixture\n",
	}
	e := setup(t, files, "")
	h, v := e.host, e.mnt
	for _, p := range []string{"testdata/fixture/config", "testdata/fixture/commondir", "testdata/fixture/config.worktree", "testdata/fixture/hooks", "testdata/fixture/description"} {
		var err error
		if p == "testdata/fixture/hooks" {
			err = os.Mkdir(filepath.Join(v, p), 0o755)
		} else {
			err = os.WriteFile(filepath.Join(v, p), []byte(evilConfigText), 0o644)
		}
		if !errors.Is(err, unix.EROFS) {
			t.Errorf("writing %s through the view: %v, want EROFS", p, err)
		}
	}
	writeFile(t, filepath.Join(v, "testdata/fixture/HEAD"), "ref: refs/heads/other\n")
	if err := os.Rename(filepath.Join(v, "testdata/fixture"), filepath.Join(v, "testdata/fixture2")); !errors.Is(err, unix.EROFS) {
		t.Errorf("renaming the fixture: %v, want EROFS", err)
	}
	if err := os.Rename(filepath.Join(v, "testdata"), filepath.Join(v, "testdata2")); !errors.Is(err, unix.EXDEV) {
		t.Errorf("renaming the directory holding the fixture: %v, want EXDEV", err)
	}
	cmd := exec.Command("git", "config", "--list", "--show-origin")
	cmd.Dir = filepath.Join(h, "testdata/fixture")
	cmd.Env = []string{"HOME=" + e.home, "GIT_CONFIG_NOSYSTEM=1", "PATH=" + os.Getenv("PATH")}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git config in the fixture: %v\n%s", err, out)
	}
	if strings.Contains(string(out), "fsmonitor") || !strings.Contains(string(out), "core.bare=true") {
		t.Errorf("git config in the fixture = %q, want the committed configuration", out)
	}
}
