package gitignore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// ErrIgnoreCase means core.ignoreCase is true: git then matches ignore
// patterns without regard to case, which this package does not do, so
// classification refuses rather than expose a path git would ignore.
var ErrIgnoreCase = errors.New("core.ignoreCase is true; case-insensitive ignore matching is not supported")

// Config is what classification needs from git's configuration.
type Config struct {
	// ExcludesFile is core.excludesFile with "~/" expanded, or the default
	// $XDG_CONFIG_HOME/git/ignore ($HOME/.config/git/ignore when
	// XDG_CONFIG_HOME is unset or empty). A relative value is relative to
	// the workspace root.
	ExcludesFile string
	// ObjectFormat is extensions.objectFormat ("" means sha1).
	ObjectFormat string
	// IgnoreCase is core.ignoreCase.
	IgnoreCase bool
	// Named holds the paths inside the workspace, relative to it with
	// forward slashes, that a setting names as a file git reads or a
	// program it runs (namedPaths), sorted and without duplicates; the
	// view seals each one and everything below it.
	Named []string
}

// Env is the part of the environment that locates configuration.
type Env struct {
	Home          string
	XDGConfigHome string
}

// ErrCommonDir means the repository's git directory holds a commondir
// file: git would then read its configuration, hooks and refs from the
// directory it names, which the workspace's own content may choose.
var ErrCommonDir = errors.New("the git directory holds a commondir file (a linked worktree's layout), which the view does not follow")

// ErrWorkspaceConfig means git's configuration includes a file inside the
// workspace other than the repository's own config, a file the sandbox
// may write.
var ErrWorkspaceConfig = errors.New("git configuration is read from a file inside the workspace")

// ErrNamesWorkspaceRoot means a setting names the workspace root itself as
// a file git reads or a program it runs (core.hooksPath = .): the view
// cannot seal the whole workspace from the sandbox.
var ErrNamesWorkspaceRoot = errors.New("the setting names the workspace root, whose files the sandbox writes, as something git reads or runs; point it outside the workspace or at a directory inside it")

// ReadConfig asks git for the merged configuration (system, global and the
// repository's own, includes followed) of the repository whose git
// directory is gitDir and whose work tree is root.
//
// git runs with gitDir and its common directory given explicitly, so no
// repository discovery, ownership check or commondir redirection takes
// place, and with every option that could start a program (fsmonitor,
// hooks, pager, ssh) set on its command line, which no file overrides. A
// gitDir holding a commondir file is refused (ErrCommonDir), and so is a
// configuration read from any file inside root other than gitDir/config
// and gitDir/config.worktree (ErrWorkspaceConfig): an include whose target
// lies in the work tree or elsewhere in the git directory names a file the
// sandbox may write.
func ReadConfig(ctx context.Context, git, gitDir, root string, env Env, extraEnv []string) (Config, error) {
	if _, err := os.Lstat(filepath.Join(gitDir, "commondir")); err == nil {
		return Config{}, fmt.Errorf("%q: %w; remove it or start from the main worktree", filepath.Join(gitDir, "commondir"), ErrCommonDir)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return Config{}, fmt.Errorf("checking for %q: %w", filepath.Join(gitDir, "commondir"), err)
	}
	args := []string{"--no-pager"}
	for _, kv := range noExec {
		args = append(args, "-c", kv)
	}
	args = append(args, "config", "--list", "-z", "--show-origin", "--includes")
	cmd := exec.CommandContext(ctx, git, args...)
	cmd.Dir = root
	cmd.Env = append([]string{"GIT_DIR=" + gitDir, "GIT_COMMON_DIR=" + gitDir, "HOME=" + env.Home,
		"GIT_PAGER=cat", "PAGER=cat", "GIT_TERMINAL_PROMPT=0", "GIT_OPTIONAL_LOCKS=0", "GIT_NO_REPLACE_OBJECTS=1"}, extraEnv...)
	if env.XDGConfigHome != "" {
		cmd.Env = append(cmd.Env, "XDG_CONFIG_HOME="+env.XDGConfigHome)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return Config{}, fmt.Errorf("reading git configuration of %q: %w: %s", gitDir, err, bytes.TrimSpace(stderr.Bytes()))
	}
	list, named, err := checkOrigins(out, gitDir, root, env.Home)
	if err != nil {
		return Config{}, err
	}
	c, err := ParseConfigList(list, root, env)
	if err != nil {
		return Config{}, err
	}
	c.Named = named
	return c, nil
}

// noExec are the command-line settings of ReadConfig's git: every key
// that names a program git could start, set to one that runs nothing.
var noExec = []string{
	"core.fsmonitor=false",
	"core.hooksPath=/dev/null",
	"core.pager=cat",
	"core.sshCommand=false",
	"core.editor=false",
	"protocol.allow=never",
}

// checkOrigins checks the origin of every entry of `git config --list -z
// --show-origin` ("file:<path>" NUL "key\nvalue" NUL ...) and returns the
// entries without their origins, in the form ParseConfigList reads, and
// the workspace paths the entries name (namedPaths). Our own command-line
// settings are dropped; a file origin inside root must be gitDir/config or
// gitDir/config.worktree. A setting that names the workspace root itself
// is refused: the view cannot seal the whole workspace.
func checkOrigins(out []byte, gitDir, root, home string) ([]byte, []string, error) {
	fields := bytes.Split(out, []byte{0})
	if n := len(fields); n > 0 && len(fields[n-1]) == 0 {
		fields = fields[:n-1]
	}
	if len(fields)%2 != 0 {
		return nil, nil, fmt.Errorf("reading git configuration of %q: unpaired origin in git config --show-origin output", gitDir)
	}
	realRoot := resolved(root, root)
	allowed := map[string]bool{
		resolved(filepath.Join(gitDir, "config"), root):          true,
		resolved(filepath.Join(gitDir, "config.worktree"), root): true,
	}
	var list []byte
	seen := map[string]bool{}
	var named []string
	for i := 0; i < len(fields); i += 2 {
		origin, entry := string(fields[i]), fields[i+1]
		kind, name, _ := strings.Cut(origin, ":")
		switch kind {
		case "command line":
			continue
		case "file":
			p := resolved(name, root)
			if (p == realRoot || strings.HasPrefix(p, realRoot+string(filepath.Separator))) && !allowed[p] {
				key, _, _ := strings.Cut(string(entry), "\n")
				return nil, nil, fmt.Errorf("%q (setting %s): %w; the view reads configuration only from files the sandbox cannot write: move the file out of the workspace or remove the include", name, key, ErrWorkspaceConfig)
			}
			key, value, _ := strings.Cut(string(entry), "\n")
			for _, n := range namedPaths(key, value, filepath.Dir(p), root, home) {
				if n == "." {
					return nil, nil, fmt.Errorf("%q (setting %s = %q): %w", name, key, value, ErrNamesWorkspaceRoot)
				}
				if !seen[n] {
					seen[n] = true
					named = append(named, n)
				}
			}
		default:
			return nil, nil, fmt.Errorf("reading git configuration of %q: unexpected origin %q", gitDir, origin)
		}
		list = append(append(list, entry...), 0)
	}
	slices.Sort(named)
	return list, named, nil
}

// resolved makes name (relative to dir when relative) absolute and
// resolves its symbolic links as far as they exist.
func resolved(name, dir string) string {
	if !filepath.IsAbs(name) {
		name = filepath.Join(dir, name)
	}
	if p, err := filepath.EvalSymlinks(name); err == nil {
		return p
	}
	parent, base := filepath.Split(name)
	if p, err := filepath.EvalSymlinks(parent); err == nil {
		return filepath.Join(p, base)
	}
	return filepath.Clean(name)
}

// ParseConfigList interprets the output of `git config --list -z`: entries
// separated by NUL, each "key\nvalue" (or a bare key meaning true). Later
// entries override earlier ones, as git's scopes do.
func ParseConfigList(out []byte, root string, env Env) (Config, error) {
	var c Config
	excludes := ""
	for _, entry := range bytes.Split(out, []byte{0}) {
		if len(entry) == 0 {
			continue
		}
		key, value, hasValue := strings.Cut(string(entry), "\n")
		switch strings.ToLower(key) {
		case "core.excludesfile":
			excludes = value
		case "extensions.objectformat":
			c.ObjectFormat = value
		case "core.ignorecase":
			b, err := parseBool(value, hasValue)
			if err != nil {
				return Config{}, fmt.Errorf("core.ignoreCase: %w", err)
			}
			c.IgnoreCase = b
		}
	}
	switch {
	case excludes == "":
		base := env.XDGConfigHome
		if base == "" {
			if env.Home == "" {
				break
			}
			base = filepath.Join(env.Home, ".config")
		}
		c.ExcludesFile = filepath.Join(base, "git", "ignore")
	case strings.HasPrefix(excludes, "~/"):
		if env.Home == "" {
			return Config{}, fmt.Errorf("core.excludesFile %q: HOME is not set", excludes)
		}
		c.ExcludesFile = filepath.Join(env.Home, excludes[2:])
	case filepath.IsAbs(excludes):
		c.ExcludesFile = excludes
	default:
		c.ExcludesFile = filepath.Join(root, excludes)
	}
	if _, err := HashSize(c.ObjectFormat); err != nil {
		return Config{}, err
	}
	if c.IgnoreCase {
		return Config{}, ErrIgnoreCase
	}
	return c, nil
}

func parseBool(v string, hasValue bool) (bool, error) {
	if !hasValue {
		return true, nil
	}
	switch strings.ToLower(v) {
	case "true", "yes", "on", "1":
		return true, nil
	case "false", "no", "off", "0", "":
		return false, nil
	}
	return false, fmt.Errorf("value %q is not a boolean", v)
}
