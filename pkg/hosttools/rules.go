package hosttools

import (
	"strings"
)

// Scope says where a Rule's name applies.
type Scope uint8

const (
	// AnyDepth matches a file of that name in any directory.
	AnyDepth Scope = iota
	// Root matches the file of that path at the workspace root only.
	Root
	// Tree matches every file below the directory of that path at the
	// workspace root, and that path itself (a link or file in its place).
	Tree
)

// Rule is one kind of file a host tool executes or obeys.
type Rule struct {
	Name  string
	Scope Scope
	// Tool says who acts on it, for the review's listing.
	Tool string
}

// Rules is the list docs/WORKSPACE.md ("Reviewing files host tools run")
// reproduces; keep the two in step.
var Rules = []Rule{
	{"Makefile", AnyDepth, "make"},
	{"makefile", AnyDepth, "make"},
	{"GNUmakefile", AnyDepth, "make"},
	{"CMakeLists.txt", AnyDepth, "cmake"},
	{"package.json", AnyDepth, "npm, yarn, pnpm scripts"},
	{".npmrc", AnyDepth, "npm configuration"},
	{".yarnrc", AnyDepth, "yarn configuration"},
	{".yarnrc.yml", AnyDepth, "yarn configuration"},
	{".envrc", AnyDepth, "direnv"},
	{"justfile", AnyDepth, "just"},
	{"Justfile", AnyDepth, "just"},
	{".justfile", AnyDepth, "just"},
	{"Taskfile.yml", AnyDepth, "task"},
	{"Taskfile.yaml", AnyDepth, "task"},
	{".tool-versions", AnyDepth, "asdf, mise"},
	{"mise.toml", AnyDepth, "mise"},
	{".mise.toml", AnyDepth, "mise"},
	{"pyproject.toml", AnyDepth, "pip, build backends"},
	{"setup.py", AnyDepth, "pip, setuptools"},
	{"setup.cfg", AnyDepth, "pip, setuptools"},
	{"build.rs", AnyDepth, "cargo build scripts"},
	{"Cargo.toml", AnyDepth, "cargo"},
	{"Gemfile", AnyDepth, "bundler"},
	{"Rakefile", AnyDepth, "rake"},
	{".gitattributes", AnyDepth, "git filters and diff drivers"},
	{".gitmodules", Root, "git submodules"},
	{".pre-commit-config.yaml", Root, "pre-commit"},
	{"lefthook.yml", Root, "lefthook"},
	{".lefthook.yml", Root, "lefthook"},
	{".mcp.json", Root, "MCP clients (Claude Code)"},
	{"CLAUDE.md", Root, "Claude Code instructions"},
	{"AGENTS.md", Root, "agent instructions"},
	{".cursorrules", Root, "Cursor instructions"},
	{".gitlab-ci.yml", Root, "GitLab CI"},
	{".husky", Tree, "husky git hooks"},
	{".vscode", Tree, "VS Code settings, tasks and launch configurations"},
	{".idea", Tree, "JetBrains run configurations and tools"},
	{".claude", Tree, "Claude Code settings, hooks and commands"},
	{".cursor", Tree, "Cursor settings and MCP servers"},
	{".devcontainer", Tree, "dev container commands"},
	{".github/workflows", Tree, "GitHub Actions"},
}

// Match returns the rule that covers the workspace path p (slash-separated,
// relative to the root), if any.
func Match(p string) (Rule, bool) {
	base := p
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		base = p[i+1:]
	}
	for _, r := range Rules {
		switch r.Scope {
		case AnyDepth:
			if base == r.Name {
				return r, true
			}
		case Root:
			if p == r.Name {
				return r, true
			}
		case Tree:
			// The directory's own path too: a link or file in its place
			// is what the tool would then read.
			if p == r.Name || strings.HasPrefix(p, r.Name+"/") {
				return r, true
			}
		}
	}
	return Rule{}, false
}

// skipDir reports whether Scan does not list the directory dir. Every
// directory can hold an AnyDepth file, so only these are skipped.
func skipDir(dir string) bool {
	base := dir
	if i := strings.LastIndexByte(dir, '/'); i >= 0 {
		base = dir[i+1:]
	}
	// A nested repository's own .git, and node_modules, which holds
	// installed packages rather than the workspace's own files.
	return base == ".git" || base == "node_modules"
}
