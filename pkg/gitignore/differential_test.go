package gitignore

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"lazaret.dev/pkg/testgate"
)

// gitEnv isolates git from the machine's own configuration.
func gitEnv(home string) []string {
	return []string{
		"HOME=" + home,
		"XDG_CONFIG_HOME=" + filepath.Join(home, ".config"),
		"GIT_CONFIG_NOSYSTEM=1",
		"PATH=" + os.Getenv("PATH"),
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.invalid",
		"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.invalid",
	}
}

func runGit(t *testing.T, git, dir, home string, stdin []byte, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(git, args...)
	cmd.Dir = dir
	cmd.Env = gitEnv(home)
	cmd.Stdin = bytes.NewReader(stdin)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() == 1 && args[0] == "check-ignore" {
			return out // no path ignored
		}
		t.Fatalf("git %v: %v: %s", args, err, stderr.String())
	}
	return out
}

var (
	segNames = []string{"a", "b", "ab", "build", "x.log", "keep.log", ".env", "doc", "Doc", "a.b", "[x]", "*"}
	segPats  = []string{"a", "b", "build", "*", "**", "?", "*.log", "a*", "*b", "[ab]", "[!a]", "[a-c]*", "[[:alpha:]]", ".env", "keep.log", `\*`, `[x]`, `\[x]`, "?o?", "D*", "a?b", "***", "x.*"}
)

func genPattern(r *rand.Rand) string {
	var b strings.Builder
	if r.IntN(5) == 0 {
		b.WriteByte('!')
	}
	if r.IntN(4) == 0 {
		b.WriteByte('/')
	}
	n := 1 + r.IntN(3)
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte('/')
		}
		b.WriteString(segPats[r.IntN(len(segPats))])
	}
	if r.IntN(4) == 0 {
		b.WriteByte('/')
	}
	if r.IntN(10) == 0 {
		b.WriteString("  ")
	}
	return b.String()
}

// TestDifferentialCheckIgnore builds random trees and ignore files and
// compares the matcher with `git check-ignore --no-index` on every path.
func TestDifferentialCheckIgnore(t *testing.T) {
	git := testgate.Command(t, "git")
	trials := 40
	if testing.Short() {
		trials = 8
	}
	for trial := 0; trial < trials; trial++ {
		t.Run(fmt.Sprint(trial), func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(trial), 0x5eed))
			home := t.TempDir()
			root := filepath.Join(t.TempDir(), "ws")
			runGit(t, git, filepath.Dir(root), home, nil, "init", "-q", root)
			var paths []string
			seen := map[string]bool{}
			for i := 0; i < 60; i++ {
				depth := 1 + r.IntN(4)
				parts := make([]string, depth)
				for j := range parts {
					parts[j] = segNames[r.IntN(len(segNames))]
				}
				p := strings.Join(parts, "/")
				full := filepath.Join(root, filepath.FromSlash(p))
				if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
					continue // a file already sits where a directory is wanted
				}
				if st, err := os.Stat(full); err == nil && st.IsDir() {
					continue
				}
				if err := os.WriteFile(full, nil, 0o644); err != nil {
					continue
				}
				for k := 1; k <= depth; k++ {
					q := strings.Join(parts[:k], "/")
					if !seen[q] {
						seen[q] = true
						paths = append(paths, q)
					}
				}
			}
			files := map[string]int{"": 10, "a": 4, "b/a": 3, "build": 3}
			for dir, n := range files {
				var lines []string
				for i := 0; i < n; i++ {
					lines = append(lines, genPattern(r))
				}
				if err := os.MkdirAll(filepath.Join(root, dir), 0o755); err != nil {
					continue
				}
				if err := os.WriteFile(filepath.Join(root, dir, ".gitignore"), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			info := []byte(genPattern(r) + "\n" + genPattern(r) + "\n")
			global := []byte(genPattern(r) + "\n" + genPattern(r) + "\n")
			if err := os.WriteFile(filepath.Join(root, ".git", "info", "exclude"), info, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(filepath.Join(home, ".config", "git"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(home, ".config", "git", "ignore"), global, 0o644); err != nil {
				t.Fatal(err)
			}

			cfg, err := ReadConfig(context.Background(), git, filepath.Join(root, ".git"), root, Env{Home: home, XDGConfigHome: filepath.Join(home, ".config")}, []string{"GIT_CONFIG_NOSYSTEM=1"})
			if err != nil {
				t.Fatal(err)
			}
			globalData, err := os.ReadFile(cfg.ExcludesFile)
			if err != nil {
				t.Fatalf("reading excludes file %q from configuration: %v", cfg.ExcludesFile, err)
			}
			m, err := Load(osTree{root}, Sources{InfoExclude: info, GlobalExcludes: globalData, GlobalName: "global"})
			if err != nil {
				t.Fatal(err)
			}
			sort.Strings(paths)
			out := runGit(t, git, root, home, []byte(strings.Join(paths, "\x00")+"\x00"), "check-ignore", "--no-index", "--stdin", "-z")
			want := map[string]bool{}
			for _, p := range strings.Split(string(out), "\x00") {
				if p != "" {
					want[p] = true
				}
			}
			bad := 0
			for _, p := range paths {
				st, err := os.Lstat(filepath.Join(root, p))
				if err != nil {
					t.Fatal(err)
				}
				if got := m.Ignored(p, st.IsDir()); got != want[p] {
					bad++
					if bad <= 5 {
						t.Errorf("%q (dir=%v): matcher says ignored=%v, git says %v; deciding pattern %+v", p, st.IsDir(), got, want[p], m.Why(p, st.IsDir()))
					}
				}
			}
			if bad > 0 {
				for dir := range files {
					b, _ := os.ReadFile(filepath.Join(root, dir, ".gitignore"))
					t.Logf("%s/.gitignore:\n%s", dir, b)
				}
				t.Logf("info/exclude:\n%s\nglobal:\n%s", info, global)
			}
		})
	}
}

// TestParseIndexMatchesGit compares ParseIndex with `git ls-files` for
// index versions 2, 3 and 4.
func TestParseIndexMatchesGit(t *testing.T) {
	git := testgate.Command(t, "git")
	for _, version := range []string{"2", "3", "4"} {
		t.Run("v"+version, func(t *testing.T) {
			home := t.TempDir()
			root := t.TempDir()
			runGit(t, git, root, home, nil, "init", "-q", ".")
			for i := 0; i < 300; i++ {
				p := filepath.Join(root, fmt.Sprintf("d%d/sub%d/file-%d-with-a-longer-name-%s.txt", i%7, i%3, i, strings.Repeat("x", i%40)))
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte{byte(i)}, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			runGit(t, git, root, home, nil, "add", ".")
			if version == "3" {
				if err := os.WriteFile(filepath.Join(root, "ita.txt"), nil, 0o644); err != nil {
					t.Fatal(err)
				}
				runGit(t, git, root, home, nil, "add", "-N", "ita.txt")
			}
			runGit(t, git, root, home, nil, "update-index", "--index-version", version)
			data, err := os.ReadFile(filepath.Join(root, ".git", "index"))
			if err != nil {
				t.Fatal(err)
			}
			idx, err := ParseIndex(data, 20)
			if err != nil {
				t.Fatal(err)
			}
			out := runGit(t, git, root, home, nil, "ls-files", "-z")
			var want []string
			for _, p := range strings.Split(string(out), "\x00") {
				if p != "" {
					want = append(want, p)
				}
			}
			if idx.Len() != len(want) {
				t.Fatalf("ParseIndex found %d paths, git ls-files %d", idx.Len(), len(want))
			}
			for _, p := range want {
				if !idx.Tracked(p, false) {
					t.Fatalf("%q tracked per git, not per ParseIndex", p)
				}
				if d := filepath.Dir(p); d != "." && !idx.Tracked(d, true) {
					t.Fatalf("directory of %q not tracked", p)
				}
			}
			if idx.Tracked("d0", false) || idx.Tracked("d9", true) || idx.Tracked("d0/sub", true) {
				t.Fatal("untracked path reported tracked")
			}
		})
	}
}

func TestParseIndexRejects(t *testing.T) {
	cases := []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"bad magic", []byte("DIRX\x00\x00\x00\x02\x00\x00\x00\x00")},
		{"version 5", []byte("DIRC\x00\x00\x00\x05\x00\x00\x00\x00")},
		{"too many entries", []byte("DIRC\x00\x00\x00\x02\x00\x00\x00\x09")},
		{"truncated entry", append([]byte("DIRC\x00\x00\x00\x02\x00\x00\x00\x01"), make([]byte, 30)...)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := ParseIndex(tc.data, 20); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}
