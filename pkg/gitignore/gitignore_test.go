package gitignore

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestParsePattern(t *testing.T) {
	cases := []struct {
		line string
		ok   bool
		want Pattern
	}{
		{"", false, Pattern{}},
		{"# comment", false, Pattern{}},
		{"   ", false, Pattern{}},
		{`\#hash`, true, Pattern{Text: `\#hash`, Basename: true}},
		{"*.log", true, Pattern{Text: "*.log", Basename: true}},
		{"!keep.log", true, Pattern{Text: "keep.log", Negative: true, Basename: true, literal: 8}},
		{"build/", true, Pattern{Text: "build", DirOnly: true, Basename: true, literal: 5}},
		{"/root.txt", true, Pattern{Text: "/root.txt", literal: 9}},
		{"a/**/b", true, Pattern{Text: "a/**/b", literal: 2}},
		{"trail  ", true, Pattern{Text: "trail", Basename: true, literal: 5}},
		{`esc\ `, true, Pattern{Text: `esc\ `, Basename: true, literal: 3}},
		{`back\`, true, Pattern{Text: `back\`, Basename: true, literal: 4}},
		{"!", true, Pattern{Negative: true, Basename: true}},
	}
	for _, tc := range cases {
		t.Run(tc.line, func(t *testing.T) {
			got, ok := ParsePattern(tc.line, "")
			if ok != tc.ok {
				t.Fatalf("ok = %v, want %v", ok, tc.ok)
			}
			if ok && got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestWildmatch(t *testing.T) {
	cases := []struct {
		pattern, text string
		pathname      bool
		want          bool
	}{
		{"foo", "foo", true, true},
		{"foo", "fo", true, false},
		{"*", "foo/bar", true, false},
		{"*", "foo/bar", false, true},
		{"f*", "foo", true, true},
		{"*/bar", "foo/bar", true, true},
		{"**/bar", "bar", true, true},
		{"**/bar", "a/b/bar", true, true},
		{"a/**/b", "a/b", true, true},
		{"a/**/b", "a/x/y/b", true, true},
		{"a/**/b", "a/xb", true, false},
		{"a/**", "a/x/y", true, true},
		{"a**b", "a/b", true, false},
		{"a**b", "axxb", true, true},
		{"?", "/", true, false},
		{"?", "/", false, true},
		{"[ab]", "a", true, true},
		{"[!ab]", "a", true, false},
		{"[^ab]", "c", true, true},
		{"[a-c]", "b", true, true},
		{"[a-]", "-", true, true},
		{"[]]", "]", true, true},
		{"[!]]", "a", true, true},
		{"[[:alpha:]]", "q", true, true},
		{"[[:digit:]x]", "x", true, true},
		{"[[:nope:]]", "n", true, false},
		{"[[:alpha]", "[", true, true},
		{"[abc", "a", true, false},
		{"[/]", "/", true, false},
		{`\*`, "*", true, true},
		{`\*`, "x", true, false},
		{`x\`, "x", true, false},
		{`a\/**/b`, "a/b", true, true},
		{"***", "a/b", true, true},
		{"*a*b*c*", "xaxbxcx", true, true},
		{"*a*b*c*d*e*f*g*h*", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", true, false},
	}
	for _, tc := range cases {
		t.Run(tc.pattern+"~"+tc.text, func(t *testing.T) {
			if got := wildmatch(tc.pattern, tc.text, tc.pathname); got != tc.want {
				t.Fatalf("wildmatch(%q, %q, %v) = %v, want %v", tc.pattern, tc.text, tc.pathname, got, tc.want)
			}
		})
	}
}

func TestMatcherPrecedence(t *testing.T) {
	dirs := map[string][]Pattern{
		"":    ParseFile([]byte("*.log\nbuild/\n/only-root\n!important.log\nsecret*\n"), "", ".gitignore"),
		"sub": ParseFile([]byte("!keep.log\nlocal\n/anchored\n"), "sub", "sub/.gitignore"),
	}
	info := ParseFile([]byte("info-only\nsecret-allowed\n"), "", "info")
	global := ParseFile([]byte("global-only\n!info-only\n"), "", "global")
	m := NewMatcher(dirs, info, global)
	cases := []struct {
		path  string
		isDir bool
		want  bool
	}{
		{"x.log", false, true},
		{"important.log", false, false},
		{"sub/keep.log", false, false},
		{"sub/other.log", false, true},
		{"build", true, true},
		{"build", false, false},
		{"build/inner/x.txt", false, true},
		{"sub/build/file", false, true},
		{"only-root", false, true},
		{"sub/only-root", false, false},
		{"sub/local", false, true},
		{"local", false, false},
		{"sub/anchored", false, true},
		{"sub/deeper/anchored", false, false},
		{"info-only", false, true},
		{"global-only", false, true},
		{"secret-allowed", false, true},
		{".git/x.log", false, false},
		{"src/main.go", false, false},
	}
	for _, tc := range cases {
		t.Run(tc.path, func(t *testing.T) {
			if got := m.Ignored(tc.path, tc.isDir); got != tc.want {
				t.Fatalf("Ignored(%q, dir=%v) = %v, want %v (why: %+v)", tc.path, tc.isDir, got, tc.want, m.Why(tc.path, tc.isDir))
			}
		})
	}
}

// osTree reads a directory of the test's own for Load.
type osTree struct{ root string }

func (o osTree) ReadFile(name string, limit int64) ([]byte, error) {
	p := filepath.Join(o.root, name)
	st, err := os.Lstat(p)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fs.ErrNotExist
	}
	if st.Size() > limit {
		return nil, ErrIgnoreFileTooLarge
	}
	return os.ReadFile(p)
}

func (o osTree) ReadDir(name string) ([]DirEntry, error) {
	es, err := os.ReadDir(filepath.Join(o.root, name))
	if err != nil {
		return nil, err
	}
	out := make([]DirEntry, len(es))
	for i, e := range es {
		out[i] = DirEntry{Name: e.Name(), IsDir: e.IsDir()}
	}
	return out, nil
}

func TestLoadSkipsExcludedAndNested(t *testing.T) {
	root := t.TempDir()
	write := func(p, s string) {
		t.Helper()
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(".gitignore", "out/\n")
	write("out/.gitignore", "!*\n")
	write("out/f", "")
	write("nested/.git/HEAD", "")
	write("nested/.gitignore", "*.c\n")
	write("nested/x.c", "")
	write("a/.gitignore", "*.tmp\n")
	write("a/b/x.tmp", "")
	m, err := Load(osTree{root}, Sources{})
	if err != nil {
		t.Fatal(err)
	}
	if !m.Ignored("out/f", false) {
		t.Error("out/f: a re-include inside an excluded directory must not apply")
	}
	if m.Ignored("nested/x.c", false) {
		t.Error("nested/x.c: a nested repository's ignore file must not apply")
	}
	if !m.Ignored("a/b/x.tmp", false) {
		t.Error("a/b/x.tmp: a/.gitignore must apply below a")
	}
	big := filepath.Join(root, "big")
	write("big/.gitignore", "")
	if err := os.Truncate(filepath.Join(big, ".gitignore"), MaxIgnoreFileSize+1); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(osTree{root}, Sources{}); !errors.Is(err, ErrIgnoreFileTooLarge) {
		t.Fatalf("Load with an oversized ignore file: %v, want ErrIgnoreFileTooLarge", err)
	}
}

func TestParseConfigList(t *testing.T) {
	env := Env{Home: "/home/u"}
	cases := []struct {
		name    string
		out     string
		env     Env
		want    Config
		wantErr error
	}{
		{"default", "user.name\nx\x00", env, Config{ExcludesFile: "/home/u/.config/git/ignore"}, nil},
		{"xdg", "", Env{Home: "/home/u", XDGConfigHome: "/xdg"}, Config{ExcludesFile: "/xdg/git/ignore"}, nil},
		{"tilde", "core.excludesfile\n~/.gi\x00", env, Config{ExcludesFile: "/home/u/.gi"}, nil},
		{"last wins", "core.excludesfile\n/a\x00core.excludesFile\n/b\x00", env, Config{ExcludesFile: "/b"}, nil},
		{"relative", "core.excludesfile\nign\x00", env, Config{ExcludesFile: "/ws/ign"}, nil},
		{"sha256", "extensions.objectformat\nsha256\x00", env, Config{ExcludesFile: "/home/u/.config/git/ignore", ObjectFormat: "sha256"}, nil},
		{"ignorecase", "core.ignorecase\ntrue\x00", env, Config{}, ErrIgnoreCase},
		{"ignorecase bare", "core.ignorecase\x00", env, Config{}, ErrIgnoreCase},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseConfigList([]byte(tc.out), "/ws", tc.env)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if err == nil && !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
	if _, err := ParseConfigList([]byte("extensions.objectformat\nmd5\x00"), "/ws", env); err == nil || !strings.Contains(err.Error(), "objectFormat") {
		t.Fatalf("unknown object format: %v", err)
	}
}
