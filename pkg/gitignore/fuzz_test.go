package gitignore

import (
	"strings"
	"testing"
)

// FuzzPattern parses arbitrary ignore lines and matches them against
// arbitrary paths: no panic, deterministic answers, a literal pattern
// matches exactly its own text, and "**" alone matches every path.
func FuzzPattern(f *testing.F) {
	for _, s := range []string{"*.log", "!keep", "a/**/b", "[[:alpha:]]?", `\#x`, "[!a-z]/", "/x/*", "**"} {
		f.Add(s, "a/b/keep.log", false)
	}
	f.Fuzz(func(t *testing.T, line, path string, isDir bool) {
		p, ok := ParsePattern(line, "")
		if !ok {
			return
		}
		got := p.Match(path, isDir)
		if got != p.Match(path, isDir) {
			t.Fatal("nondeterministic match")
		}
		if strings.ContainsAny(p.Text, `*?[\/`) || p.DirOnly {
			return
		}
		name := path[strings.LastIndexByte(path, '/')+1:]
		if got != (name == p.Text) {
			t.Fatalf("literal %q vs %q: match=%v", p.Text, path, got)
		}
	})
}

// FuzzWildmatch checks that "**" matches everything and that a pattern
// without wildcards matches only itself.
func FuzzWildmatch(f *testing.F) {
	f.Add("a*b?[c-d]", "axxbqc", true)
	f.Add("**/x", "a/b/x", true)
	f.Fuzz(func(t *testing.T, pattern, text string, pathname bool) {
		got := wildmatch(pattern, text, pathname)
		if !wildmatch("**", text, pathname) {
			t.Fatalf("** does not match %q", text)
		}
		if !strings.ContainsAny(pattern, `*?[\`) && got != (pattern == text) {
			t.Fatalf("literal %q vs %q: %v", pattern, text, got)
		}
	})
}

// FuzzParseIndex feeds arbitrary bytes to the index reader: it must not
// panic, and every path it returns must answer Tracked.
func FuzzParseIndex(f *testing.F) {
	f.Add([]byte("DIRC\x00\x00\x00\x02\x00\x00\x00\x00"), true)
	f.Add([]byte("DIRC\x00\x00\x00\x04\x00\x00\x00\x01"), false)
	f.Fuzz(func(t *testing.T, data []byte, sha1 bool) {
		size := 32
		if sha1 {
			size = 20
		}
		idx, err := ParseIndex(data, size)
		if err != nil {
			return
		}
		for _, p := range idx.paths {
			if !idx.Tracked(p, false) {
				t.Fatalf("%q parsed but not tracked", p)
			}
		}
	})
}
