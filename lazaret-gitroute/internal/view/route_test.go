package view

import (
	"strings"
	"testing"

	"lazaret.dev/pkg/gitignore"
)

type fixed map[string]bool

func (f fixed) Ignored(p string, isDir bool) bool { return f[p] }

func TestRoute(t *testing.T) {
	r := Router{C: fixed{".env": true, "node_modules": true}}
	cases := []struct {
		path  string
		isDir bool
		want  Backing
	}{
		{"", true, Host},
		{".env", false, Isolated},
		{"node_modules", true, Isolated},
		{"src/main.go", false, Host},
	}
	for _, tc := range cases {
		t.Run(tc.path, func(t *testing.T) {
			if got := r.Route(tc.path, tc.isDir); got != tc.want {
				t.Fatalf("Route(%q) = %v, want %v", tc.path, got, tc.want)
			}
		})
	}
}

// FuzzRoute routes fuzzed paths under fuzzed ignore rules and checks the
// invariants the view relies on: routing is deterministic, a path below an
// isolated directory is isolated unless tracked, .git and tracked paths
// outside the sequencer directories are always on the host, sealed paths
// stay sealed below, and the top-level config, hooks and commondir are
// sealed.
func FuzzRoute(f *testing.F) {
	f.Add("*.log\nbuild/\n!keep.log\n", "build/x/keep.log", false, "src/a.go")
	f.Add("/a/**\n", "a/b/c", true, "a/t")
	f.Fuzz(func(t *testing.T, rules, path string, isDir bool, tracked string) {
		if strings.Contains(path, "//") || strings.HasPrefix(path, "/") || strings.HasSuffix(path, "/") || strings.Contains(tracked, "\x00") {
			return
		}
		m := gitignore.NewMatcher(map[string][]gitignore.Pattern{"": gitignore.ParseFile([]byte(rules), "", ".gitignore")}, nil, nil)
		idxData := indexWith(tracked)
		idx, err := gitignore.ParseIndex(idxData, 20)
		if err != nil {
			idx = &gitignore.Index{}
		}
		r := Router{C: &gitignore.Classifier{Matcher: m, Index: idx}, Index: idx, Repos: Repos{Nested: map[string]bool{"sub": true}, Modules: map[string]bool{".git/modules/m": true}}}
		got := r.Route(path, isDir)
		if got != r.Route(path, isDir) {
			t.Fatal("nondeterministic")
		}
		top := strings.SplitN(strings.TrimPrefix(path, ".git/"), "/", 2)[0]
		if (path == ".git" || strings.HasPrefix(path, ".git/") || idx.Tracked(path, isDir) && !strings.Contains("/"+strings.ToLower(path)+"/", "/.git/")) && !(strings.HasPrefix(path, ".git/") && sequencerDirs[top]) {
			if got != Host {
				t.Fatalf("%q routes to %v", path, got)
			}
		}
		if i := strings.LastIndexByte(path, '/'); i > 0 && got == Host && !idx.Tracked(path, isDir) {
			if r.Route(path[:i], true) == Isolated {
				t.Fatalf("%q on host below isolated %q", path, path[:i])
			}
		}
		rule := r.Rule(path)
		if path == ".git" || path == ".git/config" || path == ".git/commondir" || path == ".git/hooks" || strings.HasPrefix(path, ".git/hooks/") || strings.HasPrefix(path, ".git/info/") {
			if rule != Sealed {
				t.Fatalf("Rule(%q) = %v, want sealed", path, rule)
			}
		}
		if i := strings.LastIndexByte(path, '/'); i > 0 && r.Rule(path[:i]) == Sealed && r.Area(path[:i]) != "" && r.Area(path[:i]) != path[:i] && rule != Sealed {
			t.Fatalf("Rule(%q) = %v below sealed %q", path, rule, path[:i])
		}
	})
}

// indexWith builds a version 2 index holding one path.
func indexWith(p string) []byte {
	if p == "" || len(p) >= 0xfff {
		return nil
	}
	b := []byte("DIRC\x00\x00\x00\x02\x00\x00\x00\x01")
	entry := make([]byte, 62)
	entry[60] = byte(len(p) >> 8)
	entry[61] = byte(len(p))
	entry = append(entry, p...)
	pad := (62+len(p)+8)&^7 - (62 + len(p))
	entry = append(entry, make([]byte, pad)...)
	return append(b, entry...)
}
