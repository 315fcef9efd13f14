package hosttools

import (
	"crypto/sha256"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"lazaret.dev/pkg/ids"
	"lazaret.dev/pkg/testtree"
)

func TestMatch(t *testing.T) {
	for _, tc := range []struct {
		path string
		tool string // "" for no match
	}{
		{"Makefile", "make"},
		{"sub/dir/Makefile", "make"},
		{"Makefile.bak", ""},
		{"package.json", "npm, yarn, pnpm scripts"},
		{"web/package.json", "npm, yarn, pnpm scripts"},
		{"package-lock.json", ""},
		{".vscode/tasks.json", "VS Code settings, tasks and launch configurations"},
		{".vscode/deep/x", "VS Code settings, tasks and launch configurations"},
		{".vscode", "VS Code settings, tasks and launch configurations"},
		{".vscodex/a", ""},
		{"sub/.vscode/tasks.json", ""},
		{".claude/settings.json", "Claude Code settings, hooks and commands"},
		{".mcp.json", "MCP clients (Claude Code)"},
		{"sub/.mcp.json", ""},
		{".github/workflows/ci.yml", "GitHub Actions"},
		{".github/CODEOWNERS", ""},
		{"crates/x/build.rs", "cargo build scripts"},
		{".envrc", "direnv"},
		{".gitattributes", "git filters and diff drivers"},
		{".gitmodules", "git submodules"},
		{"src/main.go", ""},
		{".cargo/config.toml", "cargo configuration (rustc wrapper, runner, linker, aliases)"},
		{"crates/x/.cargo/config.toml", "cargo configuration (rustc wrapper, runner, linker, aliases)"},
		{"crates/x/.cargo/config", "cargo configuration (rustc wrapper, runner, linker, aliases)"},
		{"crates/x/.cargo", "cargo configuration (rustc wrapper, runner, linker, aliases)"}, // a link in the directory's place
		{"crates/x/.cargo/credentials.toml", ""},
		{"crates/x.cargo/config.toml", ""},
		{"app/gradle/wrapper/gradle-wrapper.properties", "Gradle wrapper (downloads and runs the distribution it names)"},
		{"app/gradle/wrapper", "Gradle wrapper (downloads and runs the distribution it names)"},
		{"app/gradle/wrapper/gradle-wrapper.jar", ""},
		{"mygradle/wrapper/gradle-wrapper.properties", ""},
		{"svc/.mvn/extensions.xml", "Maven core extensions"},
		{"tests/unit/conftest.py", "pytest (imported on every run)"},
		{"rust-toolchain.toml", "rustup (a toolchain path runs its binaries)"},
		{"deploy/compose.yaml", "Docker Compose (host mounts, privileged services)"},
		{".bazelrc", "Bazel options"},
		{"sub/.bazelrc", ""},
		{"svc/.python-version", "pyenv (which interpreter its shims run)"},
		{".lfsconfig", "git-lfs (the endpoints it fetches from and pushes to)"},
	} {
		r, ok := Match(tc.path)
		if ok != (tc.tool != "") || r.Tool != tc.tool {
			t.Errorf("Match(%q) = %q, %v; want %q", tc.path, r.Tool, ok, tc.tool)
		}
	}
}

func TestPlan(t *testing.T) {
	d := func(b byte) ids.Digest { return ids.Digest{b} }
	base := []File{
		{Path: "Makefile", Mode: 0o100644, SHA256: d(1)},
		{Path: "package.json", Mode: 0o100644, SHA256: d(2)},
		{Path: ".vscode/tasks.json", Mode: 0o100644, SHA256: d(3)},
		{Path: ".envrc", Mode: 0o100644, SHA256: d(4)},
		{Path: "build.rs", Mode: 0o100644, SHA256: d(5)},
		{Path: ".npmrc", Mode: 0o120777, SHA256: d(6)},
	}
	for _, tc := range []struct {
		name string
		now  []File
		want string
	}{
		{"unchanged", base, ""},
		{"every kind", []File{
			{Path: "Makefile", Mode: 0o100644, SHA256: d(9)},           // modified
			{Path: "package.json", Mode: 0o100755, SHA256: d(2)},       // mode changed
			{Path: ".vscode/tasks.json", Mode: 0o100755, SHA256: d(7)}, // both
			{Path: "build.rs", Mode: 0o100644, SHA256: d(5)},
			{Path: ".npmrc", Mode: 0o100644, SHA256: d(6)}, // link became a file
			{Path: ".claude/settings.json", Mode: 0o100644, SHA256: d(8)},
		}, strings.Join([]string{
			`added        ".claude/settings.json" (Claude Code settings, hooks and commands)`,
			`removed      ".envrc" (direnv)`,
			`modified     ".npmrc" (npm configuration), mode Lrwxrwxrwx -> -rw-r--r--`,
			`modified     ".vscode/tasks.json" (VS Code settings, tasks and launch configurations), mode -rw-r--r-- -> -rwxr-xr-x`,
			`modified     "Makefile" (make)`,
			`mode changed "package.json" (npm, yarn, pnpm scripts), mode -rw-r--r-- -> -rwxr-xr-x`,
		}, "\n")},
		{"all removed", nil, strings.Join([]string{
			`removed      ".envrc" (direnv)`,
			`removed      ".npmrc" (npm configuration)`,
			`removed      ".vscode/tasks.json" (VS Code settings, tasks and launch configurations)`,
			`removed      "Makefile" (make)`,
			`removed      "build.rs" (cargo build scripts)`,
			`removed      "package.json" (npm, yarn, pnpm scripts)`,
		}, "\n")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			changes, err := Plan(base, tc.now)
			if err != nil {
				t.Fatal(err)
			}
			var lines []string
			for _, c := range changes {
				lines = append(lines, c.String())
			}
			if got := strings.Join(lines, "\n"); got != tc.want {
				t.Errorf("Plan =\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
	if _, err := Plan([]File{base[0], base[0]}, nil); err == nil || !strings.Contains(err.Error(), `"Makefile"`) {
		t.Errorf("a baseline naming a path twice: %v", err)
	}
}

func TestScan(t *testing.T) {
	root := t.TempDir()
	files := map[string]string{
		"Makefile":                  "all:\n",
		"src/main.go":               "package main\n",
		"web/package.json":          "{}\n",
		".vscode/tasks.json":        "{}\n",
		"node_modules/x/Makefile":   "skipped\n",
		".git/hooks/Makefile":       "skipped\n",
		"nested/.git/Makefile":      "skipped\n",
		"nested/Makefile":           "nested\n",
		"sub/.vscode/settings.json": "not at the root\n",
	}
	testtree.Write(t, root, files)
	if err := os.Chmod(filepath.Join(root, "Makefile"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/passwd", filepath.Join(root, ".envrc")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc", filepath.Join(root, ".claude")); err != nil { // recorded as a link, not followed
		t.Fatal(err)
	}
	got, err := Scan(root)
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, f := range got {
		paths = append(paths, f.Path)
	}
	if s := strings.Join(paths, " "); s != ".claude .envrc .vscode/tasks.json Makefile nested/Makefile web/package.json" {
		t.Fatalf("Scan found %q", s)
	}
	if got[1].Mode&0o170000 != 0o120000 || got[1].SHA256 != sha256.Sum256([]byte("/etc/passwd")) {
		t.Errorf(".envrc = %+v, want a link with the digest of its target", got[1])
	}
	if got[3].Mode != 0o100755 || got[3].SHA256 != sha256.Sum256([]byte("all:\n")) {
		t.Errorf("Makefile = %+v", got[3])
	}
}

// BenchmarkMatch is Match over the paths of a 10,000-file tree (100
// directories of 100 files, two levels deep, a few of them matching), what
// a baseline scan of such a workspace spends on the rules.
func BenchmarkMatch(b *testing.B) {
	var paths []string
	for d := 0; d < 100; d++ {
		for f := 0; f < 100; f++ {
			name := "file" + strconv.Itoa(f) + ".go"
			if f == 0 {
				name = "Makefile"
			}
			paths = append(paths, "src/pkg"+strconv.Itoa(d)+"/sub/"+name)
		}
	}
	b.ResetTimer()
	for b.Loop() {
		for _, p := range paths {
			Match(p)
		}
	}
}
