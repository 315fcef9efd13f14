package coordinator

import (
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"lazaret.dev/pkg/testgate"
	"lazaret.dev/pkg/testtree"
)

// gitTestImage is the busybox image with the host's git added.
const gitTestImage = "localhost/lazaret-coordinator-git:1"

// gitImage stores gitTestImage in the image store of storage: Debian's
// busybox-static with one link per applet, and the host's git binary with
// the shared objects `ldd` lists for it, each at the path the dynamic
// loader looks for it. Only git's builtins work in it (no libexec/git-core,
// no templates), which is what the tests use.
func gitImage(t testing.TB, storage string) {
	t.Helper()
	bb := testgate.Command(t, "busybox")
	if dynamic, err := elfInterpreter(bb); err != nil || dynamic != "" {
		testgate.Require(t, "a static busybox (apt-get install busybox-static)", func() error {
			if err != nil {
				return err
			}
			return fmt.Errorf("%s is dynamically linked", bb)
		})
	}
	gitPath := testgate.Command(t, "git")
	tree := t.TempDir()
	for _, d := range []string{"bin", "sbin", "usr/bin", "usr/sbin", "etc", "root", "tmp", "home/agent", "workspace"} {
		if err := os.MkdirAll(filepath.Join(tree, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(tree, "tmp"), 0o1777); err != nil {
		t.Fatal(err)
	}
	copyInto(t, tree, bb, "/bin/busybox")
	list, err := exec.Command(bb, "--list-full").Output()
	if err != nil {
		t.Fatalf("busybox --list-full: %v", err)
	}
	for _, applet := range strings.Fields(string(list)) {
		if applet == "bin/busybox" {
			continue
		}
		if err := os.Symlink("/bin/busybox", filepath.Join(tree, applet)); err != nil {
			t.Fatal(err)
		}
	}
	copyInto(t, tree, gitPath, "/usr/bin/git")
	for _, so := range sharedObjects(t, gitPath) {
		copyInto(t, tree, so, so)
	}
	for name, content := range map[string]string{
		"etc/passwd": "root:x:0:0:root:/root:/bin/sh\n",
		"etc/group":  "root:x:0:\n",
	} {
		if err := os.WriteFile(filepath.Join(tree, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	storeTreeImage(t, tree, storage, gitTestImage)
}

// elfInterpreter returns the program interpreter an ELF file requests, ""
// for a static executable.
func elfInterpreter(path string) (string, error) {
	f, err := elf.Open(path)
	if err != nil {
		return "", fmt.Errorf("reading %q as ELF: %w", path, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type != elf.PT_INTERP {
			continue
		}
		b := make([]byte, p.Filesz)
		if _, err := p.ReadAt(b, 0); err != nil {
			return "", fmt.Errorf("reading the interpreter of %q: %w", path, err)
		}
		return string(bytes.TrimRight(b, "\x00")), nil
	}
	return "", nil
}

// sharedObjects lists the absolute paths of the shared objects the dynamic
// loader maps for bin, the loader itself included, as `ldd` prints them;
// none for a static executable.
func sharedObjects(t testing.TB, bin string) []string {
	t.Helper()
	interp, err := elfInterpreter(bin)
	if err != nil {
		t.Fatal(err)
	}
	if interp == "" {
		return nil
	}
	ldd := testgate.Command(t, "ldd")
	out, err := exec.Command(ldd, bin).Output()
	if err != nil {
		t.Fatalf("ldd %s: %v", bin, err)
	}
	var paths []string
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) >= 3 && f[1] == "=>" && strings.HasPrefix(f[2], "/"):
			paths = append(paths, f[2])
		case len(f) >= 1 && strings.HasPrefix(f[0], "/"):
			paths = append(paths, f[0])
		case len(f) >= 3 && f[1] == "=>" && f[2] == "not":
			t.Fatalf("ldd %s: %q is not found", bin, f[0])
		}
	}
	found := false
	for _, p := range paths {
		found = found || p == interp
	}
	if !found {
		t.Fatalf("ldd %s does not list its interpreter %q:\n%s", bin, interp, out)
	}
	return paths
}

// copyInto copies the file src (following links) to dst inside tree, mode
// 0755, creating dst's directories.
func copyInto(t testing.TB, tree, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(tree, dst)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o755); err != nil {
		t.Fatal(err)
	}
}

// withGitImage stores gitTestImage and makes it the test profile's image.
func (e *env) withGitImage(t *testing.T) {
	t.Helper()
	gitImage(t, e.storage)
	b, err := os.ReadFile(e.cfgFile)
	if err != nil {
		t.Fatal(err)
	}
	line := fmt.Sprintf("image = %q\n", testImage)
	if !bytes.Contains(b, []byte(line)) {
		t.Fatalf("configuration %q has no %q line", e.cfgFile, strings.TrimSpace(line))
	}
	b = bytes.Replace(b, []byte(line), []byte(fmt.Sprintf("image = %q\n", gitTestImage)), 1)
	if err := os.WriteFile(e.cfgFile, b, 0o600); err != nil {
		t.Fatal(err)
	}
	e.resolve(t)
}

// sandboxGit is the argv of a git command run on /workspace inside the
// sandbox: no system configuration, a scratch HOME, an identity given on
// the command line, and the workspace marked safe whatever uid owns it
// there.
func sandboxGit(args ...string) []string {
	return append([]string{"env", "GIT_CONFIG_NOSYSTEM=1", "HOME=/tmp", "git", "-C", "/workspace",
		"-c", "safe.directory=/workspace",
		"-c", "user.name=sandbox", "-c", "user.email=sandbox@lazaret.invalid"}, args...)
}

// hostGit runs git in the host workspace and returns its standard output.
func (e *env) hostGit(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", e.workspace}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("host git %q: %v: %s", args, err, stderr.Bytes())
	}
	return string(out)
}

// writeHostFiles writes files (path relative to the workspace → content)
// on the host, creating directories.
func (e *env) writeHostFiles(t *testing.T, files map[string]string) {
	t.Helper()
	testtree.Write(t, e.workspace, files)
}

func TestServeEndToEndGitInsideView(t *testing.T) {
	if !enterInternet(t) {
		return
	}
	e := newEnv(t)
	e.withGitImage(t)
	e.gitWorkspace(t)
	hostSecret := "SECRET=" + e.secret + "-dotenv\n"
	e.writeHostFiles(t, map[string]string{
		".env":        hostSecret,
		"src/main.go": "package main\n",
		"README":      "readme\n",
	})
	e.hostGit(t, "add", "src/main.go", "README")
	e.hostGit(t, "-c", "user.name=host", "-c", "user.email=host@lazaret.invalid", "commit", "-q", "-m", "host files")
	configBefore := readFile(t, filepath.Join(e.workspace, ".git", "config"))
	h := e.start(t, time.Second)
	c, session := e.client(t)

	// run executes argv in the sandbox and fails the test unless it exits
	// 0 and never mentions the host's secret.
	run := func(t *testing.T, argv ...string) string {
		t.Helper()
		out, errs, x := execute(t, c, session(), argv...)
		if code(x) != 0 {
			t.Fatalf("%q: stdout %q stderr %q exit %+v", argv, out, errs, x)
		}
		if strings.Contains(out+errs, e.secret) {
			t.Fatalf("%q shows the host's .env: %q %q", argv, out, errs)
		}
		return out
	}

	t.Run("status of the clean checkout", func(t *testing.T) {
		if out := run(t, sandboxGit("status", "--porcelain")...); out != "" {
			t.Errorf("git status --porcelain = %q, want a clean tree", out)
		}
	})
	t.Run("ignored host files are invisible to git", func(t *testing.T) {
		// The host's .env and build/ are hidden, so not even reported
		// as ignored.
		if out := run(t, sandboxGit("status", "--porcelain", "--ignored")...); out != "" {
			t.Errorf("git status --porcelain --ignored = %q, want nothing", out)
		}
	})
	t.Run("status sees changes made after an earlier status", func(t *testing.T) {
		run(t, "/bin/sh", "-c", "echo sandbox-edit >> /workspace/tracked && echo new > /workspace/new.txt")
		if out := run(t, sandboxGit("status", "--porcelain")...); out != " M tracked\n?? new.txt\n" {
			t.Errorf("git status --porcelain = %q, want %q", out, " M tracked\n?? new.txt\n")
		}
	})
	t.Run("the sandbox's own ignored files are reported ignored", func(t *testing.T) {
		run(t, "/bin/sh", "-c", "echo SECRET=sandbox > /workspace/.env && mkdir -p /workspace/build && echo sb > /workspace/build/out.o")
		out := run(t, sandboxGit("status", "--porcelain", "--ignored")...)
		for _, want := range []string{"!! .env\n", "!! build/\n"} {
			if !strings.Contains(out, want) {
				t.Errorf("git status --porcelain --ignored = %q, lacks %q", out, want)
			}
		}
		if out := run(t, sandboxGit("status", "--porcelain")...); strings.Contains(out, ".env") || strings.Contains(out, "build") {
			t.Errorf("git status --porcelain = %q mentions an ignored path", out)
		}
	})
	t.Run("git add refuses an ignored path", func(t *testing.T) {
		out, errs, x := execute(t, c, session(), sandboxGit("add", ".env")...)
		if code(x) != 1 || !strings.Contains(errs, "ignored by one of your .gitignore files") {
			t.Errorf("git add .env: stdout %q stderr %q exit %+v; want exit 1, an ignored-path refusal", out, errs, x)
		}
	})
	t.Run("commit", func(t *testing.T) {
		run(t, sandboxGit("add", "tracked", "new.txt")...)
		run(t, sandboxGit("commit", "-q", "-m", "sandbox commit")...)
		if out := run(t, sandboxGit("status", "--porcelain")...); out != "" {
			t.Errorf("git status --porcelain after the commit = %q, want a clean tree", out)
		}
		if out := run(t, sandboxGit("log", "--format=%s")...); out != "sandbox commit\nhost files\ninit\n" {
			t.Errorf("git log = %q", out)
		}
		if out := run(t, sandboxGit("diff", "--name-only", "HEAD~1", "HEAD")...); out != "new.txt\ntracked\n" {
			t.Errorf("git diff --name-only HEAD~1 HEAD = %q, want new.txt and tracked", out)
		}
	})
	t.Run("checkout -b", func(t *testing.T) {
		run(t, sandboxGit("checkout", "-q", "-b", "feature")...)
		if out := run(t, sandboxGit("rev-parse", "--abbrev-ref", "HEAD")...); out != "feature\n" {
			t.Errorf("HEAD after checkout -b = %q, want feature", out)
		}
		if out := run(t, sandboxGit("diff", "HEAD")...); out != "" {
			t.Errorf("git diff HEAD on the new branch = %q, want nothing", out)
		}
	})
	c.Close()
	waitExit(t, e, h)

	t.Run("the host sees the commit and the branch", func(t *testing.T) {
		if got := e.hostGit(t, "log", "--format=%s %an", "feature"); got != "sandbox commit sandbox\nhost files host\ninit e2e\n" {
			t.Errorf("host git log feature = %q", got)
		}
		if got := e.hostGit(t, "rev-parse", "--abbrev-ref", "HEAD"); got != "feature\n" {
			t.Errorf("host HEAD = %q, want feature", got)
		}
		if got := e.hostGit(t, "branch", "--list", "feature", "--format=%(refname:short)"); got != "feature\n" {
			t.Errorf("host git branch --list feature = %q", got)
		}
		if got := e.hostGit(t, "show", "--name-only", "--format=", "HEAD"); got != "new.txt\ntracked\n" {
			t.Errorf("files of the sandbox's commit = %q, want new.txt and tracked", got)
		}
		if got := e.hostGit(t, "show", "HEAD:tracked"); got != "tracked-host\nsandbox-edit\n" {
			t.Errorf("committed tracked = %q", got)
		}
		tree := e.hostGit(t, "ls-tree", "-r", "--name-only", "HEAD")
		if tree != ".gitignore\nREADME\nnew.txt\nsrc/main.go\ntracked\n" {
			t.Errorf("tree of HEAD = %q", tree)
		}
		e.hostGit(t, "fsck", "--no-progress", "--strict")
		if got := e.hostGit(t, "status", "--porcelain"); got != "" {
			t.Errorf("host git status --porcelain = %q, want a clean tree", got)
		}
	})
	t.Run("the host's ignored files are untouched", func(t *testing.T) {
		if got := readFile(t, filepath.Join(e.workspace, ".env")); got != hostSecret {
			t.Errorf("host .env = %q", got)
		}
		if got := readFile(t, filepath.Join(e.workspace, "build", "out.o")); got != "host-build\n" {
			t.Errorf("host build/out.o = %q", got)
		}
		if got := readFile(t, filepath.Join(e.isolatedRoot(), ".env")); got != "SECRET=sandbox\n" {
			t.Errorf("isolated .env = %q", got)
		}
		if got := readFile(t, filepath.Join(e.workspace, ".git", "config")); got != configBefore {
			t.Errorf(".git/config changed from %q to %q", configBefore, got)
		}
	})
	checkNothingLeft(t, e)
	if t.Failed() || os.Getenv("LZ_E2E_DUMP_LOG") != "" {
		t.Log(e.log(t))
	}
}

func TestServeEndToEndViewEscapes(t *testing.T) {
	if !enterInternet(t) {
		return
	}
	e := newEnv(t)
	e.withGitImage(t)
	e.gitWorkspace(t)
	// A secret outside the workspace, beside it, and links to it.
	outside := filepath.Join(filepath.Dir(e.workspace), "outside-secret")
	outsideSecret := "outside-" + e.secret + "\n"
	if err := os.WriteFile(outside, []byte(outsideSecret), 0o600); err != nil {
		t.Fatal(err)
	}
	hostEnv := "SECRET=" + e.secret + "-dotenv\n"
	e.writeHostFiles(t, map[string]string{
		".env":             hostEnv,
		"moveme":           "moveme-host\n",
		"dir/f":            "f\n",
		"dir/build/hidden": "hidden-host\n",
	})
	for name, target := range map[string]string{
		"abs":       outside,
		"rel":       "../outside-secret",
		"envlink":   ".env",
		"buildlink": "build",
	} {
		if err := os.Symlink(target, filepath.Join(e.workspace, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Link(outside, filepath.Join(e.workspace, "hardlinked")); err != nil {
		t.Fatal(err)
	}
	e.hostGit(t, "add", "moveme", "dir/f", "abs", "rel", "envlink", "buildlink")
	e.hostGit(t, "-c", "user.name=host", "-c", "user.email=host@lazaret.invalid", "commit", "-q", "-m", "links")
	h := e.start(t, time.Second)
	c, session := e.client(t)

	// fails runs argv in the sandbox, wants it to fail with wantErr in its
	// standard error, and never to show a secret of the host.
	fails := func(t *testing.T, wantErr string, argv ...string) {
		t.Helper()
		out, errs, x := execute(t, c, session(), argv...)
		if code(x) == 0 || !strings.Contains(errs, wantErr) {
			t.Errorf("%q: stdout %q stderr %q exit %+v; want a failure with %q", argv, out, errs, x, wantErr)
		}
		if strings.Contains(out+errs, e.secret) {
			t.Errorf("%q shows a host secret: %q %q", argv, out, errs)
		}
	}
	succeeds := func(t *testing.T, argv ...string) string {
		t.Helper()
		out, errs, x := execute(t, c, session(), argv...)
		if code(x) != 0 {
			t.Fatalf("%q: stdout %q stderr %q exit %+v", argv, out, errs, x)
		}
		if strings.Contains(out+errs, e.secret) {
			t.Errorf("%q shows a host secret: %q %q", argv, out, errs)
		}
		return out
	}
	hostMissing := func(t *testing.T, names ...string) {
		t.Helper()
		for _, name := range names {
			if _, err := os.Lstat(filepath.Join(e.workspace, name)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("host workspace has %q (%v)", name, err)
			}
		}
	}

	t.Run("host links resolve inside the sandbox", func(t *testing.T) {
		for name, target := range map[string]string{"abs": outside, "rel": "../outside-secret"} {
			if out := succeeds(t, "readlink", "/workspace/"+name); out != target+"\n" {
				t.Errorf("readlink %s = %q, want the stored target %q", name, out, target)
			}
		}
		for _, p := range []string{"/workspace/abs", "/workspace/rel", "/workspace/envlink", outside} {
			fails(t, "No such file or directory", "cat", p)
		}
		fails(t, "No such file or directory", "ls", "/workspace/buildlink/")
	})
	t.Run("links made inside do not reach the host", func(t *testing.T) {
		targets := map[string]string{
			"l-proc-self": "/proc/self/root" + outside,
			"l-dotdot":    strings.Repeat("../", 8) + strings.TrimPrefix(outside, "/"),
			"l-through":   "/workspace/../.." + outside,
			"l-proc-one":  "/proc/1/root" + outside,
		}
		for name, target := range targets {
			succeeds(t, "ln", "-s", target, "/workspace/"+name)
			out, errs, x := execute(t, c, session(), "cat", "/workspace/"+name)
			if code(x) == 0 || strings.Contains(out+errs, e.secret) {
				t.Errorf("cat %s (-> %s): stdout %q stderr %q exit %+v; want a failure", name, target, out, errs, x)
			}
			if got, err := os.Readlink(filepath.Join(e.workspace, name)); err != nil || got != target {
				t.Errorf("host link %s = %q, %v; want the stored target %q", name, got, err, target)
			}
		}
		fails(t, "No such file or directory", "cat", "/proc/self/root"+outside)
	})
	t.Run("hard links across roots are refused", func(t *testing.T) {
		succeeds(t, "mkdir", "-p", "/workspace/build")
		fails(t, "Invalid cross-device link", "ln", "/workspace/tracked", "/workspace/build/x")
		fails(t, "Invalid cross-device link", "ln", "/workspace/tracked", "/workspace/.env")
		// The host's .env is not there to link from; the sandbox's own
		// .env cannot be linked to a host path.
		fails(t, "No such file or directory", "ln", "/workspace/.env", "/workspace/leak")
		succeeds(t, "/bin/sh", "-c", "echo SECRET=sandbox > /workspace/.env")
		fails(t, "Invalid cross-device link", "ln", "/workspace/.env", "/workspace/leak")
		fails(t, "Invalid cross-device link", "ln", "/etc/passwd", "/workspace/passwd")
		hostMissing(t, "leak", "passwd")
		if _, err := os.Lstat(filepath.Join(e.isolatedRoot(), "build", "x")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("isolated build/x exists (%v)", err)
		}
		if got := readFile(t, filepath.Join(e.workspace, ".env")); got != hostEnv {
			t.Errorf("host .env = %q", got)
		}
	})
	t.Run("a host file linked elsewhere is not writable", func(t *testing.T) {
		fails(t, "Operation not permitted", "/bin/sh", "-c", "echo changed >> /workspace/hardlinked")
		fails(t, "Operation not permitted", "/bin/sh", "-c", "exec 3<>/workspace/hardlinked; echo changed >&3")
		// The view refuses the truncation with EPERM. truncate(1) first
		// opens the file for writing, which the kernel grants without
		// asking the view (regular files have no open handles), and
		// gVisor's gofer client does not pass a failed setattr on (see
		// the chmod case of TestServeEndToEndWorkspaceAttacks), so inside
		// it may exit 0. No byte may change: the host file and what the
		// sandbox reads afterwards.
		out, errs, _ := execute(t, c, session(), "/bin/sh", "-c", "truncate -s 0 /workspace/hardlinked; cat /workspace/hardlinked")
		if out != outsideSecret {
			t.Errorf("after truncate inside: the sandbox reads %q (stderr %q), want the unchanged file", out, errs)
		}
		if got := readFile(t, outside); got != outsideSecret {
			t.Errorf("outside file = %q", got)
		}
	})
	t.Run("renames across roots are refused", func(t *testing.T) {
		// git mv renames with rename(2) and reports its error.
		fails(t, "fatal: renaming 'moveme' failed: Invalid cross-device link", sandboxGit("mv", "moveme", "build/moved")...)
		fails(t, "fatal: renaming 'moveme' failed: Invalid cross-device link", sandboxGit("mv", "-f", "moveme", ".env")...)
		// dir holds the host-ignored dir/build/hidden.
		fails(t, "fatal: renaming 'dir' failed: Invalid cross-device link", sandboxGit("mv", "dir", "dir2")...)
		hostMissing(t, "dir2")
		if got := readFile(t, filepath.Join(e.workspace, "moveme")); got != "moveme-host\n" {
			t.Errorf("host moveme = %q", got)
		}
	})
	t.Run("mv copies across roots through the view", func(t *testing.T) {
		// busybox mv falls back to copy and remove on EXDEV: the
		// content crosses only as the sandbox sees it.
		succeeds(t, "/bin/sh", "-c", "echo iso-build > /workspace/build/out.o && mv /workspace/build/out.o /workspace/from-isolated")
		if got := readFile(t, filepath.Join(e.workspace, "from-isolated")); got != "iso-build\n" {
			t.Errorf("host from-isolated = %q, want the sandbox's content", got)
		}
		if got := readFile(t, filepath.Join(e.workspace, "build", "out.o")); got != "host-build\n" {
			t.Errorf("host build/out.o = %q", got)
		}
		succeeds(t, "mv", "-f", "/workspace/moveme", "/workspace/.env")
		if got := readFile(t, filepath.Join(e.workspace, ".env")); got != hostEnv {
			t.Errorf("host .env = %q", got)
		}
		if got := readFile(t, filepath.Join(e.isolatedRoot(), ".env")); got != "moveme-host\n" {
			t.Errorf("isolated .env = %q, want the moved file", got)
		}
		hostMissing(t, "moveme")
		// Copying dir leaves dir/build/hidden behind: removing dir
		// fails, and nothing of it reaches dir2.
		fails(t, "mv: can't remove '/workspace/dir': Directory not empty", "mv", "/workspace/dir", "/workspace/dir2")
		if got := readFile(t, filepath.Join(e.workspace, "dir", "build", "hidden")); got != "hidden-host\n" {
			t.Errorf("host dir/build/hidden = %q", got)
		}
		if got := readFile(t, filepath.Join(e.workspace, "dir2", "f")); got != "f\n" {
			t.Errorf("host dir2/f = %q, want the copied file", got)
		}
		hostMissing(t, "dir2/build")
		// Out of the view: the sandbox's kernel copies it to /tmp.
		succeeds(t, "mv", "/workspace/tracked", "/tmp/tracked")
		if out := succeeds(t, "cat", "/tmp/tracked"); out != "tracked-host\n" {
			t.Errorf("/tmp/tracked = %q", out)
		}
		hostMissing(t, "tracked")
	})
	t.Run(".git/config, .git/hooks and .git stay", func(t *testing.T) {
		fails(t, "Read-only file system", "ln", "-s", "/bin/sh", "/workspace/.git/hooks/pre-commit")
		fails(t, "Read-only file system", "/bin/sh", "-c", "echo '#!/bin/sh' > /workspace/.git/hooks/post-checkout")
		fails(t, "Read-only file system", "mv", "/workspace/.git", "/workspace/.git2")
		fails(t, "Read-only file system", "mv", "/workspace/.git/config", "/workspace/.git/config.old")
		hostMissing(t, ".git/hooks/pre-commit", ".git/hooks/post-checkout", ".git2", ".git/config.old")
	})
	t.Run("no host secret is readable anywhere in the view", func(t *testing.T) {
		out, errs, x := execute(t, c, session(), "grep", "-r", "-l", e.secret, "/workspace", "/tmp", "/home", "/root")
		if code(x) < 0 {
			t.Fatalf("grep -r: %+v", x)
		}
		// hardlinked is a host file that shares its inode with the
		// outside file: reading it is allowed (docs/WORKSPACE.md).
		for _, f := range strings.Fields(out) {
			if f != "/workspace/hardlinked" {
				t.Errorf("%s holds a host secret (grep -r: %q, stderr %q)", f, out, errs)
			}
		}
	})
	t.Run("no set-ID bit, owner or outside metadata changes through the view", func(t *testing.T) {
		var before unix.Stat_t
		if err := unix.Stat(outside, &before); err != nil {
			t.Fatal(err)
		}
		// Each is refused twice over: the sandbox's processes lack the
		// capabilities (gVisor answers the chown with EPERM and drops the
		// set-ID bits of the chmod), and the view gives no file a set-ID
		// bit, changes no owner, and changes nothing of an unlinked file
		// another name still reaches (TestKillPriv and
		// TestFilesWithoutHandles in lazaret-gitroute reach the view
		// without gVisor in between).
		//
		// A set-user-ID program written into the workspace, and one
		// given away to another user: the host file has neither.
		execute(t, c, session(), "/bin/sh", "-c", "cp /bin/busybox /workspace/suid; chmod 6755 /workspace/suid; chown 4321:4321 /workspace/suid")
		var st unix.Stat_t
		if err := unix.Stat(filepath.Join(e.workspace, "suid"), &st); err != nil {
			t.Fatal(err)
		}
		if st.Mode&(unix.S_ISUID|unix.S_ISGID) != 0 || st.Uid == 4321 || st.Gid == 4321 {
			t.Errorf("host workspace/suid: mode %o owner %d:%d, want no set-ID bit and no owner 4321", st.Mode, st.Uid, st.Gid)
		}
		// The workspace name of a file linked elsewhere, unlinked while
		// open: what has it open changes no metadata of the other link.
		execute(t, c, session(), "/bin/sh", "-c", "exec 3</workspace/hardlinked; rm /workspace/hardlinked; "+
			"chmod 6777 /proc/self/fd/3; chown 4321:4321 /proc/self/fd/3; touch -d 2001-01-01 /proc/self/fd/3; true")
		var after unix.Stat_t
		if err := unix.Stat(outside, &after); err != nil {
			t.Fatal(err)
		}
		if after.Mode != before.Mode || after.Uid != before.Uid || after.Gid != before.Gid || after.Mtim != before.Mtim {
			t.Errorf("the file outside: mode %o owner %d:%d mtime %v, was mode %o owner %d:%d mtime %v",
				after.Mode, after.Uid, after.Gid, after.Mtim, before.Mode, before.Uid, before.Gid, before.Mtim)
		}
	})
	c.Close()
	waitExit(t, e, h)
	if got := readFile(t, outside); got != outsideSecret {
		t.Errorf("outside file = %q", got)
	}
	checkNothingLeft(t, e)
	if t.Failed() || os.Getenv("LZ_E2E_DUMP_LOG") != "" {
		t.Log(e.log(t))
	}
}
