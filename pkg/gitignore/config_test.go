package gitignore

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestReadConfigRefusesWorkspaceSources checks that ReadConfig takes no
// configuration from a file the sandbox could write: a commondir file is
// refused, an include whose target is inside the workspace is refused
// with the file named, and one outside the workspace is read.
// configFixture makes repositories for ReadConfig with the host's git, a
// scratch HOME and no system configuration file.
type configFixture struct {
	git   string
	env   Env
	extra []string
}

func newConfigFixture(t *testing.T) configFixture {
	t.Helper()
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git is not installed")
	}
	return configFixture{git: git, env: Env{Home: t.TempDir()}, extra: []string{"GIT_CONFIG_NOSYSTEM=1", "PATH=" + os.Getenv("PATH")}}
}

// repo makes a new repository and returns its work tree.
func (f configFixture) repo(t *testing.T) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), "ws")
	if out, err := exec.Command(f.git, "init", "-q", root).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v: %s", err, out)
	}
	return root
}

// config runs git config with args in the repository at root.
func (f configFixture) config(t *testing.T, root string, args ...string) {
	t.Helper()
	cmd := exec.Command(f.git, append([]string{"-C", root, "config"}, args...)...)
	cmd.Env = append([]string{"HOME=" + f.env.Home}, f.extra...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git config %q: %v: %s", args, err, out)
	}
}

func TestReadConfigRefusesWorkspaceSources(t *testing.T) {
	f := newConfigFixture(t)
	git, env, extra := f.git, f.env, f.extra
	setup, gitConfig := f.repo, f.config
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

// TestReadConfigNamesWorkspacePaths checks that ReadConfig reports every
// workspace path that a setting names as a file git reads or a program
// it runs, a dangling include's target among them, and nothing for
// settings that name files outside the workspace or programs in PATH.
func TestReadConfigNamesWorkspacePaths(t *testing.T) {
	f := newConfigFixture(t)
	git, env, extra := f.git, f.env, f.extra
	setup := func(t *testing.T, settings ...[2]string) string {
		t.Helper()
		root := f.repo(t)
		for _, kv := range settings {
			f.config(t, root, "--add", kv[0], kv[1])
		}
		return root
	}
	root := setup(t,
		[2]string{"core.hooksPath", ".githooks"},
		[2]string{"core.attributesFile", "conf/attributes"},
		[2]string{"include.path", "../team.gitconfig"},
		[2]string{"includeIf.onbranch:release.path", "release.config"},
		[2]string{"filter.fmt.clean", "./tools/clean.sh --quiet"},
		[2]string{"diff.img.textconv", `"tools/img diff" -x`},
		[2]string{"alias.deploy", "!sh scripts/deploy.sh"},
		[2]string{"alias.lg", "log --graph ./not/a/command"},
		[2]string{"core.fsmonitor", "true"},
		[2]string{"core.pager", "less -R"},
		[2]string{"core.editor", "/usr/bin/vi"},
		[2]string{"credential.helper", "store --file ~/creds"},
	)
	c, err := ReadConfig(context.Background(), git, filepath.Join(root, ".git"), root, env, extra)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{".git/release.config", ".githooks", "conf/attributes", "scripts/deploy.sh", "team.gitconfig", "tools/clean.sh", "tools/img"}
	if !reflect.DeepEqual(c.Named, want) {
		t.Errorf("Named = %q, want %q", c.Named, want)
	}
	t.Run("the workspace root is refused", func(t *testing.T) {
		root := setup(t, [2]string{"core.hooksPath", "."})
		_, err := ReadConfig(context.Background(), git, filepath.Join(root, ".git"), root, env, extra)
		if !errors.Is(err, ErrNamesWorkspaceRoot) || !strings.Contains(err.Error(), "core.hookspath") {
			t.Fatalf("ReadConfig = %v, want ErrNamesWorkspaceRoot naming core.hookspath", err)
		}
	})
}

func TestNamedPaths(t *testing.T) {
	for _, tc := range []struct {
		key, value, origin string
		want               []string
	}{
		{"core.hooksPath", "hooks", "", []string{"hooks"}},
		{"core.hooksPath", "/ws/a/../b", "", []string{"b"}},
		{"core.hooksPath", "/elsewhere", "", nil},
		{"core.excludesFile", "~/ignore", "", nil},
		{"core.excludesFile", "~/../../ws/ign", "", []string{"ign"}},
		{"include.path", "x.cfg", "/ws/.git", []string{".git/x.cfg"}},
		{"includeIf.gitdir:/ws/.path", "../y.cfg", "/ws/.git", []string{"y.cfg"}},
		{"include.path", "x.cfg", "/etc", nil},
		{"core.fsmonitor", "false", "", nil},
		{"core.fsmonitor", "./fsmon", "", []string{"fsmon"}},
		{"core.sshCommand", "ssh -F ./ssh/config -i key", "", []string{"ssh/config"}},
		{"pager.log", "bin/pg", "", []string{"bin/pg"}},
		{"pager.log", "false", "", nil},
		{"gpg.ssh.program", "tools/sign", "", []string{"tools/sign"}},
		{"merge.ours.driver", "true", "", nil},
		{"mergetool.x.path", "./mt", "", []string{"mt"}},
		{"alias.x", "!./run.sh", "", []string{"run.sh"}},
		{"alias.x", "status ./sub", "", nil},
		{"user.name", "a/b", "", nil},
		{"diff.textconv", "./x", "", nil},
	} {
		got := namedPaths(tc.key, tc.value, tc.origin, "/ws", "/home/u")
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("namedPaths(%q, %q, %q) = %q, want %q", tc.key, tc.value, tc.origin, got, tc.want)
		}
	}
}
