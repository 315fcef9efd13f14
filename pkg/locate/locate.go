// Package locate finds Lazaret's helper binaries (lazaret-coordinator,
// lazaret-supervisor, ...) from the CLI, in one documented order:
//
//  1. $LAZARET_LIBEXEC_DIR/<name>, when that variable is set (and then only
//     there: an explicit override never falls back to another copy);
//  2. <dir of the running executable>/<name>, so a build tree (bin/) and a
//     flat install work without configuration;
//  3. <dir of the running executable>/../libexec/lazaret/<name>, the layout of
//     `make install` and of distribution packages.
//
// PATH is never searched: a helper must come from where the CLI itself came
// from. A candidate must be a regular file that the user can execute; the
// returned path is absolute with symlinks resolved.
package locate

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// EnvLibexecDir overrides the helper directory.
const EnvLibexecDir = "LAZARET_LIBEXEC_DIR"

// ErrNotFound is returned when no candidate holds the helper.
var ErrNotFound = errors.New("helper binary not found")

// Finder resolves helper names. The zero value is not usable; use New.
type Finder struct {
	override string // value of EnvLibexecDir, "" when unset
	selfDir  string // directory of the running executable
}

// New returns a Finder for the running process.
func New() (*Finder, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("locating the running executable: %w", err)
	}
	self, err = filepath.EvalSymlinks(self)
	if err != nil {
		return nil, fmt.Errorf("resolving the running executable: %w", err)
	}
	return &Finder{override: os.Getenv(EnvLibexecDir), selfDir: filepath.Dir(self)}, nil
}

// Candidates lists where name is looked for, in order.
func (f *Finder) Candidates(name string) []string {
	if f.override != "" {
		return []string{filepath.Join(f.override, name)}
	}
	return []string{
		filepath.Join(f.selfDir, name),
		filepath.Join(f.selfDir, "..", "libexec", "lazaret", name),
	}
}

// Find returns the absolute, symlink-resolved path of helper name.
func (f *Finder) Find(name string) (string, error) {
	if name == "" || strings.ContainsRune(name, '/') {
		return "", fmt.Errorf("finding helper %q: name must be a plain file name", name)
	}
	var tried []string
	for _, c := range f.Candidates(name) {
		p, err := usable(c)
		if err == nil {
			return p, nil
		}
		tried = append(tried, fmt.Sprintf("%s (%v)", c, err))
	}
	hint := "install it beside lazaret-cli or under ../libexec/lazaret"
	if f.override != "" {
		hint = "fix " + EnvLibexecDir
	}
	return "", fmt.Errorf("finding helper %s: %w; tried %s; %s", name, ErrNotFound, strings.Join(tried, ", "), hint)
}

func usable(path string) (string, error) {
	p, err := filepath.EvalSymlinks(path)
	if err != nil {
		return "", errors.Unwrap(err)
	}
	p, err = filepath.Abs(p)
	if err != nil {
		return "", err
	}
	fi, err := os.Stat(p)
	if err != nil {
		return "", errors.Unwrap(err)
	}
	if !fi.Mode().IsRegular() {
		return "", errors.New("not a regular file")
	}
	if err := unix.Access(p, unix.X_OK); err != nil {
		return "", fmt.Errorf("not executable: %w", err)
	}
	return p, nil
}
