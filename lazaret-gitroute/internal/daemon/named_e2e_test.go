package daemon_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestConfigNamedPathsSealed starts the view on a repository whose
// configuration names work-tree files (a hooks directory, the dangling
// target of an include, a filter's program) and which holds an untracked
// bare repository, and checks that none of them can be written, created,
// removed or replaced through the view, that the directories on the way
// to them cannot be renamed, that their siblings stay writable, and that
// host git's configuration and those files are unchanged.
func TestConfigNamedPathsSealed(t *testing.T) {
	requireFUSE(t)
	e := newRepo(t)
	h, v := e.host, e.mnt
	const hook = "#!/bin/sh\nexit 0\n"
	writeFile(t, filepath.Join(h, ".githooks/pre-commit"), hook)
	writeFile(t, filepath.Join(h, "tools/clean.sh"), "#!/bin/sh\ncat\n")
	writeFile(t, filepath.Join(h, "README.md"), "hello\n")
	e.git(t, h, "add", ".")
	e.git(t, h, "commit", "-q", "-m", "initial")
	e.git(t, h, "config", "core.hooksPath", ".githooks")
	e.git(t, h, "config", "include.path", "../team.gitconfig")
	e.git(t, h, "config", "filter.lz.clean", "./tools/clean.sh")
	// An untracked bare repository present at start.
	writeFile(t, filepath.Join(h, "backup.git/HEAD"), "ref: refs/heads/main\n")
	writeFile(t, filepath.Join(h, "backup.git/objects/info/.keep"), "")
	writeFile(t, filepath.Join(h, "backup.git/refs/heads/.keep"), "")
	configList := func() string { t.Helper(); return e.configList(t) }
	before := configList()
	e.start(t, "")

	refused := []struct {
		name string
		op   func() error
	}{
		{"write a hook", func() error {
			return os.WriteFile(filepath.Join(v, ".githooks/pre-commit"), []byte(evilConfigText), 0o755)
		}},
		{"create a hook", func() error { return os.WriteFile(filepath.Join(v, ".githooks/post-checkout"), []byte(hook), 0o755) }},
		{"remove a hook", func() error { return os.Remove(filepath.Join(v, ".githooks/pre-commit")) }},
		{"rename the hooks directory", func() error { return os.Rename(filepath.Join(v, ".githooks"), filepath.Join(v, "hooks.old")) }},
		{"chmod the hooks directory", func() error { return unix.Chmod(filepath.Join(v, ".githooks"), 0o777) }},
		{"create the include's target", func() error { return os.WriteFile(filepath.Join(v, "team.gitconfig"), []byte(evilConfigText), 0o644) }},
		{"link the include's target", func() error { return os.Symlink("README.md", filepath.Join(v, "team.gitconfig")) }},
		{"write the filter's program", func() error { return os.WriteFile(filepath.Join(v, "tools/clean.sh"), []byte(evilConfigText), 0o755) }},
		{"rename the filter's directory", func() error { return os.Rename(filepath.Join(v, "tools"), filepath.Join(v, "tools.old")) }},
		{"rename a file onto the filter's program", func() error {
			return os.Rename(filepath.Join(v, "README.md"), filepath.Join(v, "tools/clean.sh"))
		}},
		{"write the bare repository's config", func() error {
			return os.WriteFile(filepath.Join(v, "backup.git/config"), []byte(evilConfigText), 0o644)
		}},
		{"make the bare repository's hooks", func() error { return os.Mkdir(filepath.Join(v, "backup.git/hooks"), 0o755) }},
	}
	for _, r := range refused {
		if err := r.op(); !errors.Is(err, unix.EROFS) && !errors.Is(err, unix.EPERM) && !errors.Is(err, unix.EXDEV) {
			t.Errorf("%s through the view: %v, want EROFS, EPERM or EXDEV", r.name, err)
		}
	}
	// The siblings stay the sandbox's to write.
	writeFile(t, filepath.Join(v, "tools/other.sh"), "echo\n")
	writeFile(t, filepath.Join(v, "README.md"), "changed\n")
	writeFile(t, filepath.Join(v, "backup.git/HEAD"), "ref: refs/heads/other\n")

	if after := configList(); after != before {
		t.Errorf("host git configuration changed:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if got := readFile(t, filepath.Join(h, ".githooks/pre-commit")); got != hook {
		t.Errorf("host hook = %q", got)
	}
	for _, p := range []string{"team.gitconfig", ".githooks/post-checkout", "backup.git/config", "backup.git/hooks"} {
		if _, err := os.Lstat(filepath.Join(h, p)); err == nil {
			t.Errorf("%s exists on the host", p)
		}
	}
	if got := readFile(t, filepath.Join(h, "tools/other.sh")); got != "echo\n" {
		t.Errorf("host tools/other.sh = %q", got)
	}
}
