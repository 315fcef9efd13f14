package gitignore

import (
	"sort"
	"strings"
	"testing"

	"lazaret.dev/pkg/testtree"
)

// TestLoadVisit checks which entries LoadVisit shows and which directories
// it lists, and that the Matcher it returns is Load's.
func TestLoadVisit(t *testing.T) {
	root := t.TempDir()
	testtree.Write(t, root, map[string]string{
		".gitignore":         "build/\n.env\n",
		".env":               "x",
		"src/a.go":           "x",
		"src/.gitignore":     "*.o\n",
		"src/a.o":            "x",
		"build/out":          "x",
		"build/.gitignore":   "!out\n",
		"build/deep/f":       "x",
		"nested/.git/HEAD":   "x",
		"nested/.gitignore":  "f\n",
		"nested/f":           "x",
		"nested/sub/g":       "x",
		".git/HEAD":          "x",
		".git/info/exclude":  "",
		"keptdir/inner/file": "x",
	})
	for _, tc := range []struct {
		name    string
		descend func(m *Matcher, p string, isDir bool) bool
		want    string
	}{
		{"descend nowhere", func(*Matcher, string, bool) bool { return false },
			".env .gitignore build keptdir keptdir/inner keptdir/inner/file nested nested/.git nested/.gitignore nested/f nested/sub src src/.gitignore src/a.go src/a.o"},
		{"descend into what is not ignored", func(m *Matcher, p string, isDir bool) bool { return isDir && !m.Ignored(p, isDir) },
			".env .gitignore build keptdir keptdir/inner keptdir/inner/file nested nested/.git nested/.gitignore nested/f nested/sub nested/sub/g src src/.gitignore src/a.go src/a.o"},
		{"descend everywhere", func(_ *Matcher, _ string, isDir bool) bool { return isDir },
			".env .gitignore build build/.gitignore build/deep build/deep/f build/out keptdir keptdir/inner keptdir/inner/file nested nested/.git nested/.gitignore nested/f nested/sub nested/sub/g src src/.gitignore src/a.go src/a.o"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var seen []string
			m, err := LoadVisit(osTree{root}, Sources{}, func(m *Matcher, p string, isDir bool) bool {
				seen = append(seen, p)
				return tc.descend(m, p, isDir)
			})
			if err != nil {
				t.Fatal(err)
			}
			sort.Strings(seen)
			if got := strings.Join(seen, " "); got != tc.want {
				t.Errorf("visited\n %s\nwant\n %s", got, tc.want)
			}
			// The ignore files read are Load's whatever the visitor
			// asks: build/ and nested/ are not read.
			if m.Files() != 2 {
				t.Errorf("LoadVisit read %d ignore files, want 2 (the root's and src's)", m.Files())
			}
			for p, want := range map[string]bool{"src/a.o": true, "build/out": true, "nested/f": false, ".env": true, "src/a.go": false} {
				if got := m.Ignored(p, false); got != want {
					t.Errorf("Ignored(%q) = %v, want %v", p, got, want)
				}
			}
		})
	}
}
