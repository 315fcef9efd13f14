package view

import "testing"

// tracked is a frozen index of a fixed set of files and the directories
// holding them.
type tracked map[string]bool

func (t tracked) Tracked(p string, isDir bool) bool {
	if !isDir {
		return t[p]
	}
	for f := range t {
		if len(f) > len(p) && f[:len(p)] == p && f[len(p)] == '/' {
			return true
		}
	}
	return false
}

func TestAdminRules(t *testing.T) {
	r := Router{
		C:     fixed{".env": true},
		Index: tracked{"docs/HEAD": true, "HEAD/readme": true, "src/main.go": true, "testdata/repo.git/HEAD": true, "testdata/repo.git/config": true},
		Repos: Repos{
			Nested:  map[string]bool{"vendored": true, "lib/sub": true},
			Modules: map[string]bool{".git/modules/gm": true, ".git/modules/gm/modules/inner": true},
			Bare:    map[string]bool{"testdata/repo.git": true},
		},
	}
	cases := []struct {
		path  string
		rule  Rule
		route Backing
		area  string
	}{
		// The top-level administrative area: the allowlist.
		{".git", Sealed, Host, ".git"},
		{".git/config", Sealed, Host, ".git"},
		{".git/config.lock", Sealed, Host, ".git"},
		{".git/config.worktree", Sealed, Host, ".git"},
		{".git/commondir", Sealed, Host, ".git"},
		{".git/gitdir", Sealed, Host, ".git"},
		{".git/description", Sealed, Host, ".git"},
		{".git/shallow", Sealed, Host, ".git"},
		{".git/hooks", Sealed, Host, ".git"},
		{".git/hooks/pre-commit", Sealed, Host, ".git"},
		{".git/info", Sealed, Host, ".git"},
		{".git/info/attributes", Sealed, Host, ".git"},
		{".git/info/exclude", Sealed, Host, ".git"},
		{".git/worktrees/w/gitdir", Sealed, Host, ".git"},
		{".git/branches", Sealed, Host, ".git"},
		{".git/remotes/origin", Sealed, Host, ".git"},
		{".git/rr-cache/x", Sealed, Host, ".git"},
		{".git/lzevil", Sealed, Host, ".git"},
		{".git/lzevil/config", Sealed, Host, ".git"},
		{".git/modules", Sealed, Host, ".git"},
		{".git/modules/new/config", Sealed, Host, ".git"},
		{".git/refs/replace", Sealed, Host, ".git"},
		{".git/refs/replace/0123456789abcdef0123456789abcdef01234567", Sealed, Host, ".git"},
		{".git/refs/replacement", Admin, Host, ".git"},
		{".git/objects", Admin, Host, ".git"},
		{".git/objects/ab/cdef", Admin, Host, ".git"},
		{".git/objects/pack/pack-1.pack", Admin, Host, ".git"},
		{".git/objects/info/packs", Admin, Host, ".git"},
		{".git/objects/info/commit-graph", Admin, Host, ".git"},
		{".git/objects/info/alternates", Sealed, Host, ".git"},
		{".git/objects/info/http-alternates", Sealed, Host, ".git"},
		{".git/refs/heads/main", Admin, Host, ".git"},
		{".git/refs/heads/main.lock", Admin, Host, ".git"},
		{".git/logs/HEAD", Admin, Host, ".git"},
		{".git/index", Admin, Host, ".git"},
		{".git/index.lock", Admin, Host, ".git"},
		{".git/index.stash.123", Admin, Host, ".git"},
		{".git/next-index-123.lock", Admin, Host, ".git"},
		{".git/next-index-123", Sealed, Host, ".git"},
		{".git/HEAD", Admin, Host, ".git"},
		{".git/HEAD.lock", Admin, Host, ".git"},
		{".git/ORIG_HEAD", Admin, Host, ".git"},
		{".git/FETCH_HEAD", Admin, Host, ".git"},
		{".git/MERGE_HEAD", Admin, Host, ".git"},
		{".git/MERGE_MSG", Admin, Host, ".git"},
		{".git/AUTO_MERGE", Admin, Host, ".git"},
		{".git/CHERRY_PICK_HEAD", Admin, Host, ".git"},
		{".git/REVERT_HEAD", Admin, Host, ".git"},
		{".git/REBASE_HEAD", Admin, Host, ".git"},
		{".git/COMMIT_EDITMSG", Admin, Host, ".git"},
		{".git/SQUASH_MSG", Admin, Host, ".git"},
		{".git/packed-refs", Admin, Host, ".git"},
		{".git/packed-refs.lock", Admin, Host, ".git"},
		{".git/packed-refs.new", Admin, Host, ".git"},
		{".git/gc.pid", Admin, Host, ".git"},
		{".git/HEAD/x", Sealed, Host, ".git"},
		// Sequencer state lives in the isolated root.
		{".git/rebase-merge", Admin, Isolated, ".git"},
		{".git/rebase-merge/git-rebase-todo", Admin, Isolated, ".git"},
		{".git/rebase-apply/0001", Admin, Isolated, ".git"},
		{".git/sequencer/todo", Admin, Isolated, ".git"},
		// Frozen submodule administrative directories.
		{".git/modules/gm", Sealed, Host, ".git/modules/gm"},
		{".git/modules/gm/config", Sealed, Host, ".git/modules/gm"},
		{".git/modules/gm/hooks/post-checkout", Sealed, Host, ".git/modules/gm"},
		{".git/modules/gm/index", Admin, Host, ".git/modules/gm"},
		{".git/modules/gm/refs/heads/x", Admin, Host, ".git/modules/gm"},
		{".git/modules/gm/modules/inner/HEAD", Admin, Host, ".git/modules/gm/modules/inner"},
		{".git/modules/gm/modules/other/HEAD", Sealed, Host, ".git/modules/gm"},
		{".git/modules/gm/rebase-merge/done", Admin, Isolated, ".git/modules/gm"},
		// Frozen nested repositories.
		{"vendored", Free, Host, ""},
		{"vendored/.git", Sealed, Host, "vendored/.git"},
		{"vendored/.git/config", Sealed, Host, "vendored/.git"},
		{"vendored/.git/objects/ab/cd", Admin, Host, "vendored/.git"},
		{"lib/sub/.git/HEAD", Admin, Host, "lib/sub/.git"},
		// Repositories the sandbox makes are served from the isolated root.
		{"sub/.git", Free, Isolated, ""},
		{"sub/.git/config", Free, Isolated, ""},
		{"lib/.git", Free, Isolated, ""},
		{"vendored/deeper/.git/config", Free, Isolated, ""},
		{"x/.GIT/config", Free, Isolated, ""},
		{"bare/HEAD", Free, Isolated, ""},
		{"HEAD", Free, Host, ""}, // a tracked directory
		{"a/HEAD/objects", Free, Isolated, ""},
		{"bare/objects", Free, Host, ""},
		{"bare/config", Free, Host, ""},
		// A tracked HEAD stays on the host, read-only.
		{"docs/HEAD", Sealed, Host, ""},
		{"HEAD/readme", Free, Host, ""},
		{"HEAD/new", Free, Host, ""},
		// A directory holding a tracked HEAD at start is an area.
		{"testdata/repo.git", Sealed, Host, "testdata/repo.git"},
		{"testdata/repo.git/HEAD", Admin, Host, "testdata/repo.git"},
		{"testdata/repo.git/config", Sealed, Host, "testdata/repo.git"},
		{"testdata/repo.git/hooks/post-update", Sealed, Host, "testdata/repo.git"},
		{"testdata/repo.git/objects/ab/cd", Admin, Host, "testdata/repo.git"},
		{"testdata/repo.git.orig", Free, Host, ""},
		// The work tree.
		{"src/main.go", Free, Host, ""},
		{".env", Free, Isolated, ""},
		{".gitignore", Free, Host, ""},
		{".gitmodules", Free, Host, ""},
		{".github/x", Free, Host, ""},
	}
	for _, tc := range cases {
		t.Run(tc.path, func(t *testing.T) {
			if got := r.Rule(tc.path); got != tc.rule {
				t.Errorf("Rule(%q) = %v, want %v", tc.path, got, tc.rule)
			}
			if got := r.Route(tc.path, false); got != tc.route {
				t.Errorf("Route(%q) = %v, want %v", tc.path, got, tc.route)
			}
			if got := r.Area(tc.path); got != tc.area {
				t.Errorf("Area(%q) = %q, want %q", tc.path, got, tc.area)
			}
		})
	}
	for path, want := range map[string]bool{".git/objects": true, ".git/objects/info": true, "vendored/.git/objects/info": true, ".git/objects/ab": false, ".git/refs": true, ".git/refs/heads": false, "objects/info": false, ".git": false} {
		if got := r.Shelters(path); got != want {
			t.Errorf("Shelters(%q) = %v, want %v", path, got, want)
		}
	}
	for dir, want := range map[string]bool{"": true, "vendored": true, "lib": true, "lib/sub": true, "src": false, "vendoredx": false, "li": false, "testdata": true} {
		if got := r.HoldsRepo(dir); got != want {
			t.Errorf("HoldsRepo(%q) = %v, want %v", dir, got, want)
		}
	}
}

// BenchmarkRoute measures the routing of typical work-tree and .git paths,
// the cost every lookup pays.
func BenchmarkRoute(b *testing.B) {
	r := Router{C: fixed{".env": true}, Index: tracked{"src/main.go": true}, Repos: Repos{Nested: map[string]bool{"vendored": true}}}
	paths := []string{"src/d12/f1234.txt", "src/main.go", ".git/objects/ab/cdef0123", ".git/refs/heads/main", "vendored/lib/x.c", "a/b/c/d/e/f/g.txt"}
	for i := 0; i < b.N; i++ {
		p := paths[i%len(paths)]
		r.Route(p, false)
		r.Rule(p)
	}
}

func TestNamedSealed(t *testing.T) {
	r := Router{C: fixed{}, Named: NewNamed([]string{".githooks", "tools/bin/clean.sh", ".", ""})}
	for path, want := range map[string]Rule{
		".githooks":            Sealed,
		".githooks/pre-commit": Sealed,
		".githooks2":           Free,
		"tools":                Sealed,
		"tools/bin":            Sealed,
		"tools/bin/clean.sh":   Sealed,
		"tools/bin/clean.sh2":  Free,
		"tools/bin/other":      Free,
		"tools/other":          Free,
		"README.md":            Free,
		"":                     Free,
	} {
		if got := r.Rule(path); got != want {
			t.Errorf("Rule(%q) = %v, want %v", path, got, want)
		}
	}
	if n := (Router{}).Named.Len(); n != 0 {
		t.Errorf("the zero Named holds %d paths", n)
	}
}
