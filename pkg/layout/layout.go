// Package layout defines SandboxLayoutV1, the set of sandbox destinations
// that Lazaret itself mounts or owns and that no configured persistent
// directory or volume may cover, shadow or sit beneath.
//
// The only constructor is Production. It is checked when the package
// initializes: every member is a normalized absolute non-root path, there are
// no duplicates, and /workspace is present. The zero value has no
// destinations and configuration resolution refuses it.
package layout

import (
	"fmt"
	"slices"
	"strings"
)

// Workspace is the sandbox path of the git workspace view, fixed by the
// specification.
const Workspace = "/workspace"

// Control is the sandbox directory holding the credential bundle, the
// mailbox inbox and outbox and the guest binary.
const Control = "/run/lazaret"

// production lists every destination the production sandbox mounts or owns:
//
//   - /workspace: the git routing view of the workspace.
//   - /run/lazaret: credential bundle, mailbox, guest binary.
//   - /proc, /sys, /dev: kernel interfaces supplied by gVisor.
//   - /etc/resolv.conf, /etc/hosts, /etc/hostname: written by Lazaret so
//     that name resolution follows the network policy.
//   - /tmp: the sandbox's private tmpfs, fresh for every generation.
var production = []string{
	Workspace,
	Control,
	"/proc",
	"/sys",
	"/dev",
	"/etc/resolv.conf",
	"/etc/hosts",
	"/etc/hostname",
	"/tmp",
}

// SandboxLayoutV1 is the closed set of protected sandbox destinations. It
// is a runtime value: it has no serialized form.
type SandboxLayoutV1 struct {
	protected []string
}

var productionLayout = mustBuild(production)

// Production returns the production layout.
func Production() *SandboxLayoutV1 {
	return &SandboxLayoutV1{protected: slices.Clone(productionLayout.protected)}
}

func mustBuild(dests []string) *SandboxLayoutV1 {
	l, err := build(dests)
	if err != nil {
		panic(fmt.Sprintf("production sandbox layout: %v", err))
	}
	return l
}

func build(dests []string) (*SandboxLayoutV1, error) {
	seen := make(map[string]bool, len(dests))
	for _, d := range dests {
		if !IsSandboxPath(d) {
			return nil, fmt.Errorf("destination %q is not a normalized absolute non-root path", d)
		}
		if seen[d] {
			return nil, fmt.Errorf("destination %q is listed twice", d)
		}
		seen[d] = true
	}
	if !seen[Workspace] {
		return nil, fmt.Errorf("destination %q is missing", Workspace)
	}
	out := slices.Clone(dests)
	slices.Sort(out)
	return &SandboxLayoutV1{protected: out}, nil
}

// Valid reports whether l was built by Production: nonnil and containing
// /workspace.
func (l *SandboxLayoutV1) Valid() bool {
	return l != nil && slices.Contains(l.protected, Workspace)
}

// Protected returns the protected destinations, sorted.
func (l *SandboxLayoutV1) Protected() []string {
	if l == nil {
		return nil
	}
	return slices.Clone(l.protected)
}

// Conflicts reports the first protected destination (in sorted order) that
// equals p, is an ancestor of p, or lies beneath p. p must be a normalized
// absolute path.
func (l *SandboxLayoutV1) Conflicts(p string) (dest string, ok bool) {
	if l == nil {
		return "", false
	}
	for _, d := range l.protected {
		if Overlaps(p, d) {
			return d, true
		}
	}
	return "", false
}

// Overlaps reports whether two normalized absolute paths are equal or one is
// an ancestor of the other.
func Overlaps(a, b string) bool {
	return a == b || isBeneath(a, b) || isBeneath(b, a)
}

// isBeneath reports whether p lies strictly beneath dir.
func isBeneath(p, dir string) bool {
	if dir == "/" {
		return p != "/"
	}
	return strings.HasPrefix(p, dir+"/")
}

// IsBeneath reports whether the normalized absolute path p lies strictly
// beneath dir.
func IsBeneath(p, dir string) bool { return isBeneath(p, dir) }

// IsSandboxPath reports whether p is a normalized absolute sandbox path
// other than the root: it begins with "/", has no empty, "." or ".."
// component, no trailing separator, and no NUL byte.
func IsSandboxPath(p string) bool {
	if len(p) < 2 || p[0] != '/' || strings.IndexByte(p, 0) >= 0 {
		return false
	}
	for _, c := range strings.Split(p[1:], "/") {
		if c == "" || c == "." || c == ".." {
			return false
		}
	}
	return true
}
