package gitignore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
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
}

// Env is the part of the environment that locates configuration.
type Env struct {
	Home          string
	XDGConfigHome string
}

// ReadConfig asks git for the merged configuration (system, global and the
// repository's own, includes followed) of the repository whose git
// directory is gitDir and whose work tree is root. git runs with gitDir given
// explicitly, so no repository discovery or ownership check takes place; it
// executes no hooks.
func ReadConfig(ctx context.Context, git, gitDir, root string, env Env, extraEnv []string) (Config, error) {
	cmd := exec.CommandContext(ctx, git, "config", "--list", "-z", "--includes")
	cmd.Dir = root
	cmd.Env = append([]string{"GIT_DIR=" + gitDir, "HOME=" + env.Home}, extraEnv...)
	if env.XDGConfigHome != "" {
		cmd.Env = append(cmd.Env, "XDG_CONFIG_HOME="+env.XDGConfigHome)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return Config{}, fmt.Errorf("reading git configuration of %q: %w: %s", gitDir, err, bytes.TrimSpace(stderr.Bytes()))
	}
	return ParseConfigList(out, root, env)
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
