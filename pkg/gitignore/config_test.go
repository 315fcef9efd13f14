package gitignore

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadConfigRefusesWorkspaceSources checks that ReadConfig takes no
// configuration from a file the sandbox could write: a commondir file is
// refused, an include whose target is inside the workspace is refused
// with the file named, and one outside the workspace is read.
func TestReadConfigRefusesWorkspaceSources(t *testing.T) {
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git is not installed")
	}
	home := t.TempDir()
	env := Env{Home: home}
	extra := []string{"GIT_CONFIG_NOSYSTEM=1", "PATH=" + os.Getenv("PATH")}
	setup := func(t *testing.T) string {
		root := filepath.Join(t.TempDir(), "ws")
		if out, err := exec.Command(git, "init", "-q", root).CombinedOutput(); err != nil {
			t.Fatalf("git init: %v: %s", err, out)
		}
		return root
	}
	gitConfig := func(t *testing.T, root string, args ...string) {
		t.Helper()
		cmd := exec.Command(git, append([]string{"-C", root, "config"}, args...)...)
		cmd.Env = append([]string{"HOME=" + home}, extra...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git config %q: %v: %s", args, err, out)
		}
	}
	write := func(t *testing.T, path, content string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("commondir", func(t *testing.T) {
		root := setup(t)
		write(t, filepath.Join(root, ".git", "evil", "config"), "[core]\n\texcludesFile = /evil\n")
		write(t, filepath.Join(root, ".git", "commondir"), "evil\n")
		_, err := ReadConfig(context.Background(), git, filepath.Join(root, ".git"), root, env, extra)
		if !errors.Is(err, ErrCommonDir) || !strings.Contains(err.Error(), filepath.Join(root, ".git", "commondir")) {
			t.Fatalf("ReadConfig = %v, want ErrCommonDir naming the file", err)
		}
	})
	for name, target := range map[string]string{
		"include of a work-tree file":      "../project.gitconfig",
		"include of a file in .git":        "extra.config",
		"includeIf of a file in .git/info": "info/extra",
	} {
		t.Run(name, func(t *testing.T) {
			root := setup(t)
			key := "include.path"
			if strings.HasPrefix(name, "includeIf") {
				key = "includeIf.gitdir:/.path"
			}
			gitConfig(t, root, key, target)
			p := filepath.Join(root, ".git", target)
			write(t, p, "[core]\n\texcludesFile = /elsewhere\n")
			_, err := ReadConfig(context.Background(), git, filepath.Join(root, ".git"), root, env, extra)
			if !errors.Is(err, ErrWorkspaceConfig) || !strings.Contains(err.Error(), "core.excludesfile") {
				t.Fatalf("ReadConfig = %v, want ErrWorkspaceConfig naming the setting", err)
			}
		})
	}
	t.Run("include outside the workspace", func(t *testing.T) {
		root := setup(t)
		outside := filepath.Join(t.TempDir(), "team.gitconfig")
		write(t, outside, "[core]\n\texcludesFile = /team-ignore\n")
		gitConfig(t, root, "include.path", outside)
		c, err := ReadConfig(context.Background(), git, filepath.Join(root, ".git"), root, env, extra)
		if err != nil || c.ExcludesFile != "/team-ignore" {
			t.Fatalf("ReadConfig = %+v, %v; want excludesFile /team-ignore", c, err)
		}
	})
	t.Run("nothing runs", func(t *testing.T) {
		root := setup(t)
		marker := filepath.Join(t.TempDir(), "ran")
		for _, k := range []string{"core.fsmonitor", "core.pager", "core.sshCommand", "core.editor"} {
			gitConfig(t, root, k, "touch "+marker+"; false")
		}
		if _, err := ReadConfig(context.Background(), git, filepath.Join(root, ".git"), root, env, extra); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Lstat(marker); err == nil {
			t.Fatal("a command from the repository's configuration ran")
		}
	})
}
