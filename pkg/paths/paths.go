// Package paths computes where Lazaret keeps its configuration, its stored
// state and its runtime files, and which git workspace a command is bound to.
//
// Computing a path never changes the host: no directory is created and no
// file is written, so `lazaret-cli config check` stays side-effect free.
// EnsureRuntimeRoot is the one function here that creates anything, and it
// refuses a runtime root that another user could reach.
//
// Canonical paths are absolute, clean and free of symbolic links. A path that
// does not exist yet (a storage root before the first start) is canonicalized
// by resolving its deepest existing ancestor and appending the remaining
// components unchanged, so its canonical form is the same before and after
// Lazaret creates it as plain directories.
package paths

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// Environment variables consulted, in the order documented in
// docs/CONFIGURATION.md.
const (
	EnvConfig        = "LAZARET_CONFIG"
	EnvConfigHome    = "XDG_CONFIG_HOME"
	EnvDataHome      = "XDG_DATA_HOME"
	EnvRuntimeDir    = "XDG_RUNTIME_DIR"
	EnvHome          = "HOME"
	configFileName   = "config.toml"
	productDirectory = "lazaret"
)

// Errors callers test with errors.Is.
var (
	// ErrNoHome means $HOME is unset or not absolute while a default path
	// needs it.
	ErrNoHome = errors.New("home directory unknown: $HOME is unset or not an absolute path")
	// ErrNotWorkspace means a directory is not the top level of a git work
	// tree.
	ErrNotWorkspace = errors.New("not a git workspace")
	// ErrUnsafeRuntimeRoot means the runtime root exists but is not a
	// directory private to the invoking user.
	ErrUnsafeRuntimeRoot = errors.New("runtime root is not private to the invoking user")
)

// Environment is what path computation reads from the process. Tests build
// their own; FromProcess reads the real one.
type Environment struct {
	// LookupEnv returns a variable's value and whether it is set.
	LookupEnv func(string) (string, bool)
	// UID is the invoking user's real user ID.
	UID int
}

// FromProcess returns the environment of the running process.
func FromProcess() Environment {
	return Environment{LookupEnv: os.LookupEnv, UID: os.Getuid()}
}

func (e Environment) get(name string) string {
	if e.LookupEnv == nil {
		return ""
	}
	v, _ := e.LookupEnv(name)
	return v
}

// absVar returns the variable's value when it is an absolute path. The XDG
// base directory specification says relative values are invalid and must be
// ignored.
func (e Environment) absVar(name string) string {
	v := e.get(name)
	if v == "" || !filepath.IsAbs(v) {
		return ""
	}
	return filepath.Clean(v)
}

// Home returns $HOME, which must be absolute.
func (e Environment) Home() (string, error) {
	h := e.absVar(EnvHome)
	if h == "" {
		return "", ErrNoHome
	}
	return h, nil
}

// ConfigFile returns the configuration file path: flag when nonempty, else
// $LAZARET_CONFIG, else $XDG_CONFIG_HOME/lazaret/config.toml with
// $XDG_CONFIG_HOME defaulting to ~/.config. A relative flag or
// $LAZARET_CONFIG is made absolute against the working directory.
func (e Environment) ConfigFile(flag string) (string, error) {
	for _, p := range []string{flag, e.get(EnvConfig)} {
		if p != "" {
			abs, err := filepath.Abs(p)
			if err != nil {
				return "", fmt.Errorf("configuration path %q: %w", p, err)
			}
			return abs, nil
		}
	}
	base := e.absVar(EnvConfigHome)
	if base == "" {
		home, err := e.Home()
		if err != nil {
			return "", fmt.Errorf("default configuration path: %w", err)
		}
		base = filepath.Join(home, ".config")
	}
	return filepath.Join(base, productDirectory, configFileName), nil
}

// DefaultStorageRoot returns $XDG_DATA_HOME/lazaret, with $XDG_DATA_HOME
// defaulting to ~/.local/share. It is used when the configuration has no
// storage.data_root.
func (e Environment) DefaultStorageRoot() (string, error) {
	base := e.absVar(EnvDataHome)
	if base == "" {
		home, err := e.Home()
		if err != nil {
			return "", fmt.Errorf("default storage root: %w", err)
		}
		base = filepath.Join(home, ".local", "share")
	}
	return filepath.Join(base, productDirectory), nil
}

// RuntimeRoot returns $XDG_RUNTIME_DIR/lazaret; else /run/user/<uid>/lazaret
// when /run/user/<uid> is a directory owned by the invoking user; else
// /tmp/lazaret-<uid>. It only inspects the host; EnsureRuntimeRoot creates
// the directory.
func (e Environment) RuntimeRoot() string {
	return e.runtimeRoot("/run/user", "/tmp")
}

func (e Environment) runtimeRoot(runUser, tmp string) string {
	if d := e.absVar(EnvRuntimeDir); d != "" {
		return filepath.Join(d, productDirectory)
	}
	userDir := filepath.Join(runUser, strconv.Itoa(e.UID))
	if fi, err := os.Stat(userDir); err == nil && fi.IsDir() {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) == e.UID {
			return filepath.Join(userDir, productDirectory)
		}
	}
	return filepath.Join(tmp, productDirectory+"-"+strconv.Itoa(e.UID))
}

// EnsureRuntimeRoot creates dir with mode 0700 when it is missing (its
// parent must exist) and then checks that it is a directory, not a symbolic
// link, owned by uid, with no group or other permission bits. It returns
// ErrUnsafeRuntimeRoot, wrapped with the reason, otherwise.
func EnsureRuntimeRoot(dir string, uid int) error {
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("creating runtime root %q: %w", dir, err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("inspecting runtime root %q: %w", dir, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("runtime root %q is not a directory: %w", dir, ErrUnsafeRuntimeRoot)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Errorf("runtime root %q has no ownership data: %w", dir, ErrUnsafeRuntimeRoot)
	}
	if int(st.Uid) != uid {
		return fmt.Errorf("runtime root %q is owned by uid %d, not %d: %w", dir, st.Uid, uid, ErrUnsafeRuntimeRoot)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return fmt.Errorf("runtime root %q has mode %04o; it must be 0700: %w", dir, fi.Mode().Perm(), ErrUnsafeRuntimeRoot)
	}
	return nil
}

// Canonical returns the canonical form of the absolute path p: clean, with
// every symbolic link in its deepest existing ancestor resolved, followed by
// the components that do not exist yet. It creates nothing.
func Canonical(p string) (string, error) {
	if !filepath.IsAbs(p) {
		return "", fmt.Errorf("canonicalizing %q: path is not absolute", p)
	}
	p = filepath.Clean(p)
	var rest []string
	cur := p
	for {
		resolved, err := filepath.EvalSymlinks(cur)
		if err == nil {
			for i := len(rest) - 1; i >= 0; i-- {
				resolved = filepath.Join(resolved, rest[i])
			}
			return resolved, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("canonicalizing %q: %w", p, err)
		}
		parent := filepath.Dir(cur)
		if parent == cur {
			return "", fmt.Errorf("canonicalizing %q: %w", p, err)
		}
		rest = append(rest, filepath.Base(cur))
		cur = parent
	}
}

// Within reports whether p equals base or lies beneath it. Both must be
// clean absolute paths.
func Within(p, base string) bool {
	if p == base || base == "/" {
		return true
	}
	return strings.HasPrefix(p, base+"/")
}

// Workspace returns the canonical git workspace. With dir nonempty, dir must
// be the top level of a git work tree; otherwise the top level of the work
// tree containing the working directory is used. It returns ErrNotWorkspace
// (wrapped with the reason) when there is none.
func Workspace(dir string) (string, error) {
	explicit := dir != ""
	if !explicit {
		wd, err := os.Getwd()
		if err != nil {
			return "", fmt.Errorf("working directory: %w", err)
		}
		dir = wd
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("workspace %q: %w", dir, err)
	}
	canon, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", fmt.Errorf("workspace %q: %w", dir, err)
	}
	fi, err := os.Stat(canon)
	if err != nil {
		return "", fmt.Errorf("workspace %q: %w", dir, err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("workspace %q is not a directory: %w", dir, ErrNotWorkspace)
	}
	top, err := gitTopLevel(canon)
	if err != nil {
		return "", fmt.Errorf("workspace %q: %w", dir, err)
	}
	topCanon, err := filepath.EvalSymlinks(top)
	if err != nil {
		return "", fmt.Errorf("workspace %q: git top level %q: %w", dir, top, err)
	}
	if explicit && topCanon != canon {
		return "", fmt.Errorf("workspace %q is inside the git work tree %q but is not its top level; name the top level: %w", dir, topCanon, ErrNotWorkspace)
	}
	return topCanon, nil
}

// GitEnviron is the environment Lazaret runs host git in: this process's,
// with every GIT_* variable removed (an inherited GIT_DIR, GIT_CONFIG_*
// or GIT_EXEC_PATH cannot redirect git), optional locks off and the C
// locale, so output is parsed as written.
func GitEnviron() []string {
	env := []string{"GIT_OPTIONAL_LOCKS=0", "LC_ALL=C"}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GIT_") && !strings.HasPrefix(kv, "LC_ALL=") {
			env = append(env, kv)
		}
	}
	return env
}

// gitTopLevel runs `git rev-parse --show-toplevel` in dir with every GIT_*
// variable removed, so an inherited GIT_DIR cannot redirect the answer.
func gitTopLevel(dir string) (string, error) {
	cmd := exec.Command("git", "rev-parse", "--show-toplevel")
	cmd.Dir = dir
	cmd.Env = GitEnviron()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			msg := strings.TrimSpace(stderr.String())
			if i := strings.IndexByte(msg, '\n'); i >= 0 {
				msg = msg[:i]
			}
			return "", fmt.Errorf("git rev-parse --show-toplevel: %s: %w", msg, ErrNotWorkspace)
		}
		return "", fmt.Errorf("running git: %w", err)
	}
	top := strings.TrimSuffix(stdout.String(), "\n")
	if top == "" || !filepath.IsAbs(top) {
		return "", fmt.Errorf("directory is not inside a git work tree: %w", ErrNotWorkspace)
	}
	return top, nil
}
