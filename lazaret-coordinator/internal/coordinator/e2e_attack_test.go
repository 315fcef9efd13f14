package coordinator

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"lazaret.dev/pkg/testgate"
)

// attack is one attempt by the sandbox to plant something host git, the
// view or another host tool would run. Its payload touches marker (a file
// beside the workspace, outside it) if it ever runs on the host.
type attack struct {
	name string
	// script is run with /bin/sh -c inside the sandbox; its failures are
	// expected once the view refuses it, so it never stops at an error.
	script string
	// absent are host paths (relative to the workspace) the view must not
	// have let the sandbox create.
	absent []string
}

// evilConfig is a git configuration whose every command-valued key runs
// touch marker: whichever of them host git consults, the marker appears.
func evilConfig(marker, hooks string) string {
	run := "touch " + marker
	return fmt.Sprintf(`[core]
	fsmonitor = "%[1]s; false"
	sshCommand = "%[1]s; false"
	pager = "%[1]s; cat"
	editor = "%[1]s; false"
	hooksPath = %[2]s
[filter "lzevil"]
	clean = "%[1]s; cat"
	smudge = "%[1]s; cat"
	process = "%[1]s; false"
[diff "lzevil"]
	textconv = "%[1]s; cat"
[alias]
	st = "!%[1]s"
`, run, hooks)
}

// writeScript is shell that writes content to path (inside the sandbox),
// through a here-document whose delimiter content never holds.
func writeScript(path, content string) string {
	return fmt.Sprintf("cat > %s <<'LZEOF'\n%sLZEOF\n", path, content)
}

// hooksScript writes executable hooks that touch marker into the workspace
// directory dir (inside the sandbox).
func hooksScript(dir, marker string) string {
	s := "mkdir -p " + dir + "\n"
	for _, h := range []string{"pre-commit", "post-commit", "commit-msg", "post-checkout", "pre-push", "post-merge", "pre-auto-gc", "reference-transaction", "post-index-change"} {
		s += writeScript(dir+"/"+h, "#!/bin/sh\ntouch "+marker+"\n")
		s += "chmod +x " + dir + "/" + h + "\n"
	}
	return s
}

// TestServeEndToEndWorkspaceAttacks runs, inside a real sandbox on a real
// repository, every way we know for the sandbox to turn bytes it writes
// into something host git or the view executes (docs/WORKSPACE.md,
// "Attacks the end-to-end tests pin"), then runs host git the way a
// developer would (status, diff, log with a pager, commit with an editor,
// fetch over ssh, rebase --continue, submodule update, status in every
// subdirectory the sandbox touched) and a second generation of the view,
// and checks that no payload ran. It also checks that git inside keeps
// working.
func TestServeEndToEndWorkspaceAttacks(t *testing.T) {
	if !enterInternet(t) {
		return
	}
	scriptBin := testgate.Command(t, "script")
	e := newEnv(t)
	e.withGitImage(t)
	e.gitWorkspace(t)
	base := filepath.Dir(e.workspace)
	marks := filepath.Join(base, "marks")
	if err := os.Mkdir(marks, 0o777); err != nil {
		t.Fatal(err)
	}
	marker := func(name string) string { return filepath.Join(marks, name) }
	// A nested repository and a file the developer had before the
	// generation: the nested one keeps working inside.
	e.writeHostFiles(t, map[string]string{"vendored/lib.txt": "lib\n", "src/main.go": "package main\n",
		// The developer's own hooks in the work tree, named by
		// core.hooksPath below: the hook is a control, proving that host
		// git commit runs hooks where the test looks for payloads.
		".githooks/pre-commit": "#!/bin/sh\ntouch " + marker("control-hook") + " 2>/dev/null\nexit 0\n",
		// An untracked bare repository present at start.
		"backup.git/HEAD": "ref: refs/heads/master\n", "backup.git/objects/info/.keep": "", "backup.git/refs/heads/.keep": ""})
	if err := os.Chmod(filepath.Join(e.workspace, ".githooks/pre-commit"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, argv := range [][]string{
		{"init", "-q", filepath.Join(e.workspace, "vendored")},
		{"-C", filepath.Join(e.workspace, "vendored"), "add", "lib.txt"},
		{"-C", filepath.Join(e.workspace, "vendored"), "-c", "user.name=host", "-c", "user.email=host@lazaret.invalid", "commit", "-q", "-m", "vendored"},
		{"-C", e.workspace, "add", "src/main.go", ".githooks/pre-commit"},
		{"-C", e.workspace, "-c", "user.name=host", "-c", "user.email=host@lazaret.invalid", "commit", "-q", "-m", "src"},
		// config.worktree is read once this is set; a dangling include
		// in .git is read once the sandbox creates its target.
		{"-C", e.workspace, "config", "extensions.worktreeConfig", "true"},
		{"-C", e.workspace, "config", "includeIf.gitdir:/.path", "lz-extra.config"},
		// Work-tree files the developer's configuration names: a hooks
		// directory, the dangling target of an include, a filter's
		// program; and a pager that is a control like the hook.
		{"-C", e.workspace, "config", "core.hooksPath", ".githooks"},
		{"-C", e.workspace, "config", "include.path", "../lz-team.gitconfig"},
		{"-C", e.workspace, "config", "filter.lzdev.clean", "./tools/lzclean.sh"},
		{"-C", e.workspace, "config", "core.pager", "touch " + marker("control-pager") + "; cat"},
	} {
		if out, err := exec.Command("git", argv...).CombinedOutput(); err != nil {
			t.Fatalf("git %q: %v: %s", argv, err, out)
		}
	}
	configBefore := readFile(t, filepath.Join(e.workspace, ".git", "config"))
	configMode := mode(t, filepath.Join(e.workspace, ".git", "config"))

	sg := "env GIT_CONFIG_NOSYSTEM=1 HOME=/tmp git -c safe.directory=* -c user.name=sandbox -c user.email=sandbox@lazaret.invalid"
	hostHooks := func(name string) string { return filepath.Join(e.workspace, "lzhooks", name) }
	evil := func(name string) string { return evilConfig(marker(name), hostHooks(name)) }
	bareRepo := func(dir, name string) string {
		return "mkdir -p " + dir + "/objects/info " + dir + "/objects/pack " + dir + "/refs/heads " + dir + "/refs/tags\n" +
			writeScript(dir+"/HEAD", "ref: refs/heads/master\n") +
			writeScript(dir+"/config", evil(name))
	}
	attacks := []attack{
		{name: "commondir-fsmonitor", script: "mkdir -p /workspace/.git/lzevil/objects /workspace/.git/lzevil/refs\n" +
			writeScript("/workspace/.git/lzevil/config", evil("commondir-fsmonitor")) +
			hooksScript("/workspace/lzhooks/commondir-fsmonitor", marker("commondir-fsmonitor")) +
			"echo lzevil > /workspace/.git/commondir\n",
			absent: []string{".git/commondir", ".git/lzevil"}},
		{name: "config-worktree", script: writeScript("/workspace/.git/config.worktree", evil("config-worktree")) +
			hooksScript("/workspace/lzhooks/config-worktree", marker("config-worktree")),
			absent: []string{".git/config.worktree"}},
		{name: "includeif", script: writeScript("/workspace/.git/lz-extra.config", evil("includeif")) +
			hooksScript("/workspace/lzhooks/includeif", marker("includeif")),
			absent: []string{".git/lz-extra.config"}},
		{name: "dotgit-config-write", script: "echo '[core]' >> /workspace/.git/config\n" +
			"echo '\tfsmonitor = \"touch " + marker("dotgit-config-write") + "; false\"' >> /workspace/.git/config\n" +
			sg + " -C /workspace config core.sshCommand 'touch " + marker("dotgit-config-write") + "; false'\n" +
			sg + " -C /workspace config core.pager 'touch " + marker("dotgit-config-write") + "; cat'\n" +
			sg + " -C /workspace config core.editor 'touch " + marker("dotgit-config-write") + "; false'\n" +
			sg + " -C /workspace config core.hooksPath " + hostHooks("dotgit-config-write") + "\n" +
			hooksScript("/workspace/lzhooks/dotgit-config-write", marker("dotgit-config-write")) +
			"cp /workspace/.git/config /workspace/.git/config.new && echo '[core]' >> /workspace/.git/config.new && mv /workspace/.git/config.new /workspace/.git/config\n",
			absent: []string{".git/config.new", ".git/config.lock"}},
		{name: "dotgit-config-chmod", script: "chmod 0666 /workspace/.git/config\n"},
		{name: "hooks", script: hooksScript("/workspace/.git/hooks", marker("hooks")) + "mkdir /workspace/.git/hooks2\n",
			absent: []string{".git/hooks/pre-commit", ".git/hooks2"}},
		{name: "alternates", script: "mkdir -p /workspace/.git/objects/info\necho " + base + " > /workspace/.git/objects/info/alternates\n" +
			"echo http://lazaret.invalid/ > /workspace/.git/objects/info/http-alternates\n" +
			// Assembled elsewhere and moved into place.
			"mkdir /workspace/.git/objects/lzalt && echo " + base + " > /workspace/.git/objects/lzalt/alternates\n" +
			"rmdir /workspace/.git/objects/info; mv /workspace/.git/objects/lzalt /workspace/.git/objects/info\n",
			absent: []string{".git/objects/info/alternates", ".git/objects/info/http-alternates"}},
		{name: "info-attributes-filter", script: "mkdir -p /workspace/.git/info\n" +
			writeScript("/workspace/.git/info/attributes", "* filter=lzevil diff=lzevil\n") +
			writeScript("/workspace/.gitattributes", "tracked filter=lzevil diff=lzevil\n") +
			"echo changed >> /workspace/tracked\n",
			absent: []string{".git/info/attributes"}},
		{name: "sequencer-exec", script: "mkdir -p /workspace/.git/rebase-merge && cd /workspace/.git/rebase-merge && " +
			"echo refs/heads/master > head-name && " + sg + " -C /workspace rev-parse HEAD > onto && cp onto orig-head && : > interactive && : > done && echo 1 > end && echo 0 > msgnum && " +
			"echo 'exec touch " + marker("sequencer-exec") + "' > git-rebase-todo\n" +
			"mkdir -p /workspace/.git/sequencer && echo 'exec touch " + marker("sequencer-exec") + "' > /workspace/.git/sequencer/todo\n",
			absent: []string{".git/rebase-merge", ".git/sequencer"}},
		{name: "gitlink-fsmonitor", script: "mkdir -p /workspace/sub && cd /workspace/sub && " + sg + " init -q && " +
			sg + " commit -q --allow-empty -m sub && sha=$(" + sg + " rev-parse HEAD)\n" +
			writeScript("/workspace/sub/.git/config", "[core]\n\trepositoryformatversion = 0\n\tbare = false\n"+strings.TrimPrefix(evil("gitlink-fsmonitor"), "[core]\n")) +
			hooksScript("/workspace/lzhooks/gitlink-fsmonitor", marker("gitlink-fsmonitor")) +
			"cd /workspace && " + sg + " update-index --add --cacheinfo 160000,$sha,sub\n",
			absent: []string{"sub/.git"}},
		{name: "gitmodules-update", script: "mkdir -p /workspace/mod && " + writeScript("/workspace/.gitmodules",
			"[submodule \"mod\"]\n\tpath = mod\n\turl = ./mod-origin\n\tupdate = !touch "+marker("gitmodules-update")+"\n") +
			bareRepo("/workspace/mod-origin", "gitmodules-update") +
			"cd /workspace && " + sg + " update-index --add --cacheinfo 160000,$(" + sg + " rev-parse HEAD),mod\n",
			absent: []string{"mod-origin/HEAD"}},
		{name: "embedded-bare-repo", script: bareRepo("/workspace/bare", "embedded-bare-repo") +
			hooksScript("/workspace/lzhooks/embedded-bare-repo", marker("embedded-bare-repo")),
			absent: []string{"bare/HEAD"}},
		{name: "symlinked-dotgit", script: "mkdir -p /workspace/sub2 && " + bareRepo("/workspace/sub2-gitdir", "symlinked-dotgit") +
			"ln -s ../sub2-gitdir /workspace/sub2/.git\n",
			absent: []string{"sub2/.git", "sub2-gitdir/HEAD"}},
		{name: "gitfile-subdir", script: "mkdir -p /workspace/sub3 && " + bareRepo("/workspace/.git/lz-sub3", "gitfile-subdir") +
			"echo 'gitdir: ../.git/lz-sub3' > /workspace/sub3/.git\n",
			absent: []string{"sub3/.git", ".git/lz-sub3"}},
		{name: "nested-in-existing", script: writeScript("/workspace/vendored/.git/config.worktree", evil("nested-in-existing")) +
			writeScript("/workspace/vendored/.git/config", "[core]\n\trepositoryformatversion = 0\n\tbare = false\n"+strings.TrimPrefix(evil("nested-in-existing"), "[core]\n")) +
			hooksScript("/workspace/vendored/.git/hooks", marker("nested-in-existing")) +
			hooksScript("/workspace/lzhooks/nested-in-existing", marker("nested-in-existing")),
			absent: []string{"vendored/.git/config.worktree", "vendored/.git/hooks/pre-commit"}},
		{name: "hookspath-worktree", script: hooksScript("/workspace/.githooks", marker("hookspath-worktree")) +
			"mv /workspace/.githooks /workspace/.githooks.old; " + hooksScript("/workspace/.githooks", marker("hookspath-worktree")),
			absent: []string{".githooks/post-commit", ".githooks.old"}},
		{name: "include-dangling-worktree", script: writeScript("/workspace/lz-team.gitconfig", evil("include-dangling-worktree")) +
			hooksScript("/workspace/lzhooks/include-dangling-worktree", marker("include-dangling-worktree")),
			absent: []string{"lz-team.gitconfig"}},
		{name: "filter-program-worktree", script: "mkdir -p /workspace/tools\n" +
			writeScript("/workspace/tools/lzclean.sh", "#!/bin/sh\ntouch "+marker("filter-program-worktree")+"\ncat\n") +
			"chmod +x /workspace/tools/lzclean.sh\necho '*.lzdev filter=lzdev' >> /workspace/.gitattributes\necho data > /workspace/x.lzdev\n",
			absent: []string{"tools/lzclean.sh"}},
		{name: "bare-present-at-start", script: writeScript("/workspace/backup.git/config", evil("bare-present-at-start")) +
			hooksScript("/workspace/backup.git/hooks", marker("bare-present-at-start")) +
			hooksScript("/workspace/lzhooks/bare-present-at-start", marker("bare-present-at-start")),
			absent: []string{"backup.git/config", "backup.git/hooks"}},
		{name: "replace-refs", script: "mkdir -p /workspace/.git/refs/replace && h=$(" + sg + " -C /workspace rev-parse HEAD) && " +
			"echo $h > /workspace/.git/refs/replace/$h\n" +
			// Assembled under another name and moved into place.
			"mkdir -p /workspace/.git/logs/lzr/replace && echo $h > /workspace/.git/logs/lzr/replace/$h && " +
			"mv /workspace/.git/refs /workspace/.git/logs/lzrefs; mv /workspace/.git/logs/lzr /workspace/.git/refs\n",
			absent: []string{".git/refs/replace", ".git/logs/lzrefs"}},
		{name: "fifo-and-links-in-git", script: "mkfifo /workspace/.git/refs/heads/lzfifo\nmkfifo /workspace/.git/lzfifo\n" +
			"ln -s /etc/passwd /workspace/.git/refs/heads/lzlink\nln -s ../../../.git/config /workspace/.git/refs/tags/lzlink\n" +
			"mkfifo /workspace/.git/objects/lzfifo\nmknod /workspace/.git/lzdev c 1 3\n",
			absent: []string{".git/refs/heads/lzfifo", ".git/lzfifo", ".git/refs/heads/lzlink", ".git/refs/tags/lzlink", ".git/objects/lzfifo", ".git/lzdev"}},
	}

	h := e.start(t, time.Second)
	c, session := e.client(t)
	attackOut := map[string]string{}
	for _, a := range attacks {
		out, errs, x := execute(t, c, session(), "/bin/sh", "-c", a.script)
		attackOut[a.name] = fmt.Sprintf("exit %d\nstdout %q\nstderr %q", code(x), out, errs)
	}
	// The view refuses the chmod with EROFS; gVisor's gofer client, with
	// the shared interop mode the workspace mount uses, does not pass a
	// failed setattr on (it returns before checking the failure mask), so
	// inside chmod exits 0. What the sandbox sees afterwards, and the
	// host file, keep the old mode.
	chmodOut, chmodErr, chmodExit := execute(t, c, session(), "/bin/sh", "-c", "chmod 0600 /workspace/.git/config; stat -c %a /workspace/.git/config")
	c.Close()
	waitExit(t, e, h)

	// The developer's git, run as a developer would, in every directory
	// the sandbox touched.
	home := t.TempDir()
	// EDITOR and PAGER rank below core.editor and core.pager: they
	// only stand in when no configuration names one.
	hostEnv := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "GIT_CONFIG_NOSYSTEM=1", "TERM=xterm", "EDITOR=true", "PAGER=cat",
		"GIT_AUTHOR_NAME=host", "GIT_AUTHOR_EMAIL=host@lazaret.invalid", "GIT_COMMITTER_NAME=host", "GIT_COMMITTER_EMAIL=host@lazaret.invalid"}
	var hostLog bytes.Buffer
	hostRun := func(dir string, argv ...string) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
		cmd.Dir = dir
		cmd.Env = hostEnv
		// A payload or an editor may outlive git: kill its whole group.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
		cmd.WaitDelay = 2 * time.Second
		out, err := cmd.CombinedOutput()
		fmt.Fprintf(&hostLog, "$ (%s) %q: %v\n%s\n", dir, argv, err, out)
	}
	pager := func(dir, gitArgs string) { hostRun(dir, scriptBin, "-qec", "git "+gitArgs, "/dev/null") }
	for _, dir := range []string{"", "sub", "mod", "bare", "bare/refs", "sub2", "sub3", "vendored", "mod-origin", "sub2-gitdir", "backup.git"} {
		d := filepath.Join(e.workspace, dir)
		if _, err := os.Stat(d); err != nil {
			continue
		}
		hostRun(d, "git", "status")
		hostRun(d, "git", "diff")
		hostRun(d, "git", "diff", "HEAD")
		hostRun(d, "git", "log", "--oneline")
		pager(d, "log")
		pager(d, "tag")
		pager(d, "diff")
		hostRun(d, "git", "st")
		hostRun(d, "git", "add", "-A")
		hostRun(d, "git", "commit", "-q", "-m", "host commit")
		hostRun(d, "git", "commit", "--allow-empty")
		hostRun(d, "git", "fetch", "ssh://lazaret.invalid/repo")
	}
	hostRun(e.workspace, "git", "rebase", "--continue")
	hostRun(e.workspace, "git", "cherry-pick", "--continue")
	hostRun(e.workspace, "git", "submodule", "update", "--init")
	hostRun(e.workspace, "git", "checkout", "-q", "-b", "after-attacks")
	hostRun(e.workspace, "git", "gc", "--auto")

	// The view's next start reads the configuration again.
	t.Run("attack/second-generation-starts", func(t *testing.T) {
		h2 := e.start(t, time.Second)
		c2, session2 := e.client(t)
		// The sandbox's own .gitmodules (update = !...) makes git
		// status refuse inside; rev-parse reads only refs and objects.
		out, errs, x := execute(t, c2, session2(), sandboxGit("rev-parse", "HEAD")...)
		c2.Close()
		waitExit(t, e, h2)
		if code(x) != 0 || strings.TrimSpace(out) != strings.TrimSpace(e.hostGit(t, "rev-parse", "HEAD")) {
			t.Errorf("git rev-parse HEAD in the second generation: stdout %q stderr %q exit %+v", out, errs, x)
		}
	})

	for _, a := range attacks {
		t.Run("attack/"+a.name, func(t *testing.T) {
			if _, err := os.Lstat(marker(a.name)); err == nil {
				t.Errorf("the payload ran on the host (%s exists)\nsandbox: %s", marker(a.name), attackOut[a.name])
			} else if !errors.Is(err, os.ErrNotExist) {
				t.Fatal(err)
			}
			for _, p := range a.absent {
				if _, err := os.Lstat(filepath.Join(e.workspace, p)); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("the sandbox created host %q (%v)\nsandbox: %s", p, err, attackOut[a.name])
				}
			}
		})
	}
	// The controls: the developer's own hook and pager ran, so host git
	// here does run hooks and pagers, and a payload that had got in
	// would have left its marker.
	t.Run("attack/controls-ran", func(t *testing.T) {
		for _, name := range []string{"control-hook", "control-pager"} {
			if _, err := os.Lstat(marker(name)); err != nil {
				t.Errorf("the developer's own %s did not run on the host (%v): the attack checks prove nothing", name, err)
			}
		}
	})
	t.Run("attack/dotgit-config-unchanged", func(t *testing.T) {
		if got := readFile(t, filepath.Join(e.workspace, ".git", "config")); got != configBefore {
			t.Errorf(".git/config changed from %q to %q", configBefore, got)
		}
		if got := mode(t, filepath.Join(e.workspace, ".git", "config")); got != configMode {
			t.Errorf(".git/config mode changed from %o to %o", configMode, got)
		}
		if want := fmt.Sprintf("%o\n", configMode); chmodOut != want {
			t.Errorf("mode of .git/config inside after chmod 0600 = %q (stderr %q, exit %+v), want %q", chmodOut, chmodErr, chmodExit, want)
		}
	})
	if t.Failed() || os.Getenv("LZ_E2E_DUMP_LOG") != "" {
		t.Log(hostLog.String())
		t.Log(e.log(t))
	}
	checkNothingLeft(t, e)
}

// mode returns the permission bits of path.
func mode(t *testing.T, path string) os.FileMode {
	t.Helper()
	st, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Mode().Perm()
}

// TestServeEndToEndGitInsideAllowlist checks that git inside the sandbox
// does all it needs under the administrative allowlist: status, add,
// commit, checkout -b, merge, rebase, stash, gc, in the repository and in
// a nested one present at start, and a repository of its own made inside;
// and that the host sees the commits.
func TestServeEndToEndGitInsideAllowlist(t *testing.T) {
	if !enterInternet(t) {
		return
	}
	e := newEnv(t)
	e.withGitImage(t)
	e.gitWorkspace(t)
	e.writeHostFiles(t, map[string]string{"vendored/lib.txt": "lib\n"})
	for _, argv := range [][]string{
		{"init", "-q", filepath.Join(e.workspace, "vendored")},
		{"-C", filepath.Join(e.workspace, "vendored"), "add", "lib.txt"},
		{"-C", filepath.Join(e.workspace, "vendored"), "-c", "user.name=host", "-c", "user.email=host@lazaret.invalid", "commit", "-q", "-m", "vendored"},
	} {
		if out, err := exec.Command("git", argv...).CombinedOutput(); err != nil {
			t.Fatalf("git %q: %v: %s", argv, err, out)
		}
	}
	base := strings.TrimSpace(e.hostGit(t, "rev-parse", "--abbrev-ref", "HEAD"))
	h := e.start(t, time.Second)
	c, session := e.client(t)
	run := func(t *testing.T, argv ...string) string {
		t.Helper()
		out, errs, x := execute(t, c, session(), argv...)
		if code(x) != 0 {
			t.Fatalf("%q: stdout %q stderr %q exit %+v", argv, out, errs, x)
		}
		return out
	}
	g := func(t *testing.T, args ...string) string { t.Helper(); return run(t, sandboxGit(args...)...) }
	sh := func(t *testing.T, script string) { t.Helper(); run(t, "/bin/sh", "-c", script) }

	t.Run("status", func(t *testing.T) {
		// vendored is a repository of its own inside the work tree.
		if out := g(t, "status", "--porcelain"); out != "?? vendored/\n" {
			t.Errorf("git status --porcelain = %q", out)
		}
	})
	t.Run("add and commit", func(t *testing.T) {
		sh(t, "echo one > /workspace/one.txt")
		g(t, "add", "one.txt")
		g(t, "commit", "-q", "-m", "one")
	})
	t.Run("checkout -b and commit", func(t *testing.T) {
		g(t, "checkout", "-q", "-b", "feature")
		sh(t, "echo feature > /workspace/feature.txt")
		g(t, "add", "feature.txt")
		g(t, "commit", "-q", "-m", "feature")
		g(t, "checkout", "-q", base)
	})
	t.Run("merge", func(t *testing.T) {
		sh(t, "echo base > /workspace/base.txt")
		g(t, "add", "base.txt")
		g(t, "commit", "-q", "-m", "base")
		g(t, "merge", "-q", "--no-ff", "-m", "merge feature", "feature")
	})
	t.Run("rebase", func(t *testing.T) {
		g(t, "checkout", "-q", "-b", "topic", "HEAD~1")
		sh(t, "echo topic > /workspace/topic.txt")
		g(t, "add", "topic.txt")
		g(t, "commit", "-q", "-m", "topic")
		g(t, "rebase", "-q", base)
		if out := g(t, "log", "--format=%s", "-1", "HEAD~1"); out != "merge feature\n" {
			t.Errorf("parent of the rebased commit = %q, want the merge", out)
		}
		g(t, "checkout", "-q", base)
		g(t, "merge", "-q", "--ff-only", "topic")
	})
	t.Run("stash", func(t *testing.T) {
		sh(t, "echo stashed >> /workspace/tracked")
		g(t, "stash", "-q")
		if out := g(t, "status", "--porcelain"); out != "?? vendored/\n" {
			t.Errorf("git status after stash = %q", out)
		}
		g(t, "stash", "pop", "-q")
		if out := g(t, "status", "--porcelain"); out != " M tracked\n?? vendored/\n" {
			t.Errorf("git status after stash pop = %q", out)
		}
		g(t, "checkout", "--", "tracked")
	})
	t.Run("gc", func(t *testing.T) {
		g(t, "gc", "-q")
		if out := g(t, "count-objects", "-v"); !strings.Contains(out, "packs: 1") {
			t.Errorf("git count-objects -v after gc = %q, want one pack", out)
		}
	})
	t.Run("nested repository present at start", func(t *testing.T) {
		sh(t, "echo more >> /workspace/vendored/lib.txt")
		run(t, sandboxGit("-C", "/workspace/vendored", "commit", "-q", "-a", "-m", "inner")...)
	})
	t.Run("a repository made inside stays inside", func(t *testing.T) {
		run(t, sandboxGit("init", "-q", "/workspace/mine")...)
		sh(t, "echo mine > /workspace/mine/f")
		run(t, sandboxGit("-C", "/workspace/mine", "add", "f")...)
		run(t, sandboxGit("-C", "/workspace/mine", "commit", "-q", "-m", "mine")...)
		if _, err := os.Lstat(filepath.Join(e.workspace, "mine", ".git")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("host has mine/.git (%v)", err)
		}
		if _, err := os.Lstat(filepath.Join(e.isolatedRoot(), "mine", ".git", "HEAD")); err != nil {
			t.Errorf("isolated root lacks mine/.git/HEAD: %v", err)
		}
	})
	c.Close()
	waitExit(t, e, h)

	t.Run("the host sees the commits", func(t *testing.T) {
		if got := e.hostGit(t, "log", "--format=%s", base); got != "topic\nmerge feature\nbase\nfeature\none\ninit\n" {
			t.Errorf("host git log %s = %q", base, got)
		}
		if got := e.hostGit(t, "-C", "vendored", "log", "--format=%s"); got != "inner\nvendored\n" {
			t.Errorf("host git log in vendored = %q", got)
		}
		e.hostGit(t, "fsck", "--no-progress", "--strict")
		if got := e.hostGit(t, "status", "--porcelain"); got != "?? mine/\n?? vendored/\n" {
			t.Errorf("host git status --porcelain = %q, want only the sandbox's own repository's work tree", got)
		}
		for _, p := range []string{".git/rebase-merge", ".git/rebase-apply", ".git/sequencer"} {
			if _, err := os.Lstat(filepath.Join(e.workspace, p)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("host has %s (%v)", p, err)
			}
		}
	})
	checkNothingLeft(t, e)
	if t.Failed() || os.Getenv("LZ_E2E_DUMP_LOG") != "" {
		t.Log(e.log(t))
	}
}
