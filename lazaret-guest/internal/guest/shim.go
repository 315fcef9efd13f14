package guest

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// Shim defaults.
const (
	// DefaultShimDir is where wrappers go: before /usr/bin on the usual
	// PATH, so the wrapper wins over a sandbox copy of the same tool.
	DefaultShimDir = "/usr/local/bin"
	// DefaultHostDir is the host directory a bare NAME is looked up in.
	DefaultHostDir = "/usr/bin"
	// DefaultGuestPath is where lazaret-guest is mounted in the sandbox.
	DefaultGuestPath = "/run/lazaret/lazaret-guest"
	// shimMarker is the second line of every wrapper; only files that
	// carry it are replaced.
	shimMarker = "# lazaret-guest shim"
)

// ErrShim: a wrapper specification or target is refused.
var ErrShim = errors.New("invalid shim")

// Shim is one wrapper: the command name in the sandbox and the absolute
// host path it escalates to.
type Shim struct {
	Name     string
	HostPath string
}

// ParseShim parses a wrapper specification: NAME=/abs/host/path, or a bare
// NAME, which escalates to hostDir/NAME. NAME is a plain file name of
// letters, digits and ._+- not starting with '.' or '-'; the host path is
// absolute and in canonical lexical form (the host runs exactly that path,
// with no PATH lookup, and auto-approval compares it byte for byte).
func ParseShim(spec, hostDir string) (Shim, error) {
	name, host, explicit := strings.Cut(spec, "=")
	if !explicit {
		host = path.Join(hostDir, name)
		if !strings.HasPrefix(hostDir, "/") {
			return Shim{}, fmt.Errorf("%w: host directory %q is not absolute", ErrShim, hostDir)
		}
	}
	if !validShimName(name) {
		return Shim{}, fmt.Errorf("%w: name %q must be a plain file name of letters, digits and ._+- not starting with '.' or '-'", ErrShim, name)
	}
	if !strings.HasPrefix(host, "/") || path.Clean(host) != host || host == "/" {
		return Shim{}, fmt.Errorf("%w: host path %q of %q must be absolute, without empty, '.' or '..' components or a trailing '/'", ErrShim, host, name)
	}
	if strings.ContainsAny(host, "\x00\n") {
		return Shim{}, fmt.Errorf("%w: host path %q of %q contains NUL or a newline", ErrShim, host, name)
	}
	return Shim{Name: name, HostPath: host}, nil
}

func validShimName(s string) bool {
	if s == "" || len(s) > 255 || s[0] == '.' || s[0] == '-' {
		return false
	}
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', strings.ContainsRune("._+-", r):
		default:
			return false
		}
	}
	return true
}

// quote single-quotes s for a POSIX shell.
func quote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Script is the wrapper's content.
func (s Shim) Script(guestPath string) []byte {
	return []byte(fmt.Sprintf("#!/bin/sh\n%s: %s escalates to the host\nexec %s run -- %s \"$@\"\n",
		shimMarker, s.Name, quote(guestPath), quote(s.HostPath)))
}

// InstallShims writes one wrapper per shim into dir, mode 0755, each
// through a temporary file and a rename. An existing file is replaced only
// if it is a wrapper written by this command.
func InstallShims(dir, guestPath string, shims []Shim) error {
	for _, s := range shims {
		target := filepath.Join(dir, s.Name)
		if old, err := os.ReadFile(target); err == nil {
			lines := bytes.SplitN(old, []byte("\n"), 3)
			if len(lines) < 2 || !bytes.HasPrefix(lines[1], []byte(shimMarker)) {
				return fmt.Errorf("%w: %q exists and is not a lazaret-guest shim; remove it first", ErrShim, target)
			}
		} else if !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("inspecting %q: %w", target, err)
		}
		var r [6]byte
		rand.Read(r[:])
		tmp := filepath.Join(dir, ".tmp."+s.Name+"."+hex.EncodeToString(r[:]))
		f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscallNoFollow, 0o755)
		if err != nil {
			return fmt.Errorf("creating shim %q: %w", tmp, err)
		}
		_, werr := f.Write(s.Script(guestPath))
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr == nil {
			werr = os.Chmod(tmp, 0o755)
		}
		if werr == nil {
			werr = os.Rename(tmp, target)
		}
		if werr != nil {
			os.Remove(tmp)
			return fmt.Errorf("writing shim %q: %w", target, werr)
		}
	}
	return nil
}
