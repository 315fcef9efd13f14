package gitignore

import (
	"path/filepath"
	"strings"
)

// Files that the host's git configuration names inside the workspace are
// files git reads or runs on the host: a hooks directory, an excludes or
// attributes file, the target of an include, a program a command setting
// starts. The sandbox must not be able to write them, whatever the
// allowlist of the administrative area says, so ReadConfig reports them
// (Config.Named) and the view seals each one.

// pathKeys are the settings whose value is a path git reads (hooksPath:
// a directory of programs it runs).
var pathKeys = map[string]bool{
	"core.hookspath":      true,
	"core.excludesfile":   true,
	"core.attributesfile": true,
}

// commandKeys are the settings whose value is a command line git starts;
// commandPatterns the same for keys with a user-chosen middle part
// ("diff.<driver>.textconv"), as prefix and suffix.
var commandKeys = map[string]bool{
	"core.fsmonitor":         true,
	"core.sshcommand":        true,
	"core.pager":             true,
	"core.editor":            true,
	"core.askpass":           true,
	"core.gitproxy":          true,
	"sequence.editor":        true,
	"gpg.program":            true,
	"credential.helper":      true,
	"diff.external":          true,
	"interactive.difffilter": true,
}

var commandPatterns = [][2]string{
	{"pager.", ""},
	{"gpg.", ".program"},
	{"diff.", ".command"},
	{"diff.", ".textconv"},
	{"difftool.", ".cmd"},
	{"difftool.", ".path"},
	{"mergetool.", ".cmd"},
	{"mergetool.", ".path"},
	{"merge.", ".driver"},
	{"filter.", ".clean"},
	{"filter.", ".smudge"},
	{"filter.", ".process"},
	{"credential.", ".helper"},
}

// isCommandKey reports whether key (lower case) names a command git
// starts. An alias is one only when its value begins with "!".
func isCommandKey(key, value string) bool {
	if commandKeys[key] {
		return true
	}
	if strings.HasPrefix(key, "alias.") {
		return strings.HasPrefix(strings.TrimSpace(value), "!")
	}
	for _, p := range commandPatterns {
		if strings.HasPrefix(key, p[0]) && strings.HasSuffix(key, p[1]) && len(key) > len(p[0])+len(p[1]) {
			return true
		}
	}
	return false
}

// isIncludeKey reports whether key (lower case) is include.path or
// includeIf.<condition>.path.
func isIncludeKey(key string) bool {
	return key == "include.path" || strings.HasPrefix(key, "includeif.") && strings.HasSuffix(key, ".path")
}

// namedPaths returns the paths that the setting key = value names inside
// root, relative to root with forward slashes. origin is the directory of
// the file the setting came from ("" for none), against which an include
// path is resolved; other relative paths are resolved against root, where
// git runs hooks, filters and most commands. A command line is split into
// words at white space and quotes are dropped; each word that holds a "/"
// is taken as a path. A word without one is looked up in PATH by the
// shell and names nothing in the workspace.
func namedPaths(key, value, origin, root, home string) []string {
	key = strings.ToLower(key)
	var words []string
	base := root
	switch {
	case isIncludeKey(key):
		words = []string{value}
		if origin != "" {
			base = origin
		}
	case pathKeys[key]:
		words = []string{value}
	case isCommandKey(key, value):
		for _, w := range strings.Fields(strings.TrimPrefix(strings.TrimSpace(value), "!")) {
			w = strings.Trim(w, `'"`)
			if strings.Contains(w, "/") {
				words = append(words, w)
			}
		}
	default:
		return nil
	}
	var out []string
	for _, w := range words {
		if w == "" {
			continue
		}
		if strings.HasPrefix(w, "~/") {
			if home == "" {
				continue
			}
			w = filepath.Join(home, w[2:])
		}
		rel, ok := within(root, resolved(w, base))
		if ok {
			out = append(out, rel)
		}
	}
	return out
}

// within returns p relative to root, with forward slashes, when p is root
// or below it (root itself is returned as "."); both are resolved as far
// as they exist.
func within(root, p string) (string, bool) {
	r := resolved(root, root)
	if p == r {
		return ".", true
	}
	if !strings.HasPrefix(p, r+string(filepath.Separator)) {
		return "", false
	}
	return filepath.ToSlash(p[len(r)+1:]), true
}
