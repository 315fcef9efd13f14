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
	// AnyDepthPath matches the file at that slash-separated path below
	// any directory (cargo reads .cargo/config.toml in every directory
	// above the one it runs in), and a link or file in the place of one
	// of the path's directories at any depth, which the tool would follow.
	AnyDepthPath
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
	// Tools that run a program a file names, or the file itself, when the
	// developer runs them for something else: a build, a test run, an
	// install, a shell.
	{".cargo/config.toml", AnyDepthPath, "cargo configuration (rustc wrapper, runner, linker, aliases)"},
	{".cargo/config", AnyDepthPath, "cargo configuration (rustc wrapper, runner, linker, aliases)"},
	{"rust-toolchain.toml", AnyDepth, "rustup (a toolchain path runs its binaries)"},
	{"rust-toolchain", AnyDepth, "rustup (a toolchain path runs its binaries)"},
	{"conftest.py", AnyDepth, "pytest (imported on every run)"},
	{"tox.ini", AnyDepth, "tox"},
	{"noxfile.py", AnyDepth, "nox"},
	{"gradlew", AnyDepth, "Gradle wrapper"},
	{"gradle/wrapper/gradle-wrapper.properties", AnyDepthPath, "Gradle wrapper (downloads and runs the distribution it names)"},
	{"build.gradle", AnyDepth, "Gradle build scripts"},
	{"build.gradle.kts", AnyDepth, "Gradle build scripts"},
	{"settings.gradle", AnyDepth, "Gradle build scripts"},
	{"settings.gradle.kts", AnyDepth, "Gradle build scripts"},
	{"gradle.properties", AnyDepth, "Gradle JVM options"},
	{"pom.xml", AnyDepth, "Maven plugins"},
	{"mvnw", AnyDepth, "Maven wrapper"},
	{".mvn/extensions.xml", AnyDepthPath, "Maven core extensions"},
	{".mvn/jvm.config", AnyDepthPath, "Maven JVM options"},
	{".mvn/maven.config", AnyDepthPath, "Maven options"},
	{".mvn/wrapper/maven-wrapper.properties", AnyDepthPath, "Maven wrapper (downloads and runs the distribution it names)"},
	{".bazelrc", Root, "Bazel options"},
	{"MODULE.bazel", Root, "Bazel repository rules"},
	{"WORKSPACE", Root, "Bazel repository rules"},
	{"WORKSPACE.bazel", Root, "Bazel repository rules"},
	{"composer.json", AnyDepth, "Composer scripts"},
	{"deno.json", AnyDepth, "Deno tasks"},
	{"deno.jsonc", AnyDepth, "Deno tasks"},
	{"bunfig.toml", AnyDepth, "Bun (preloaded scripts)"},
	{".pnpmfile.cjs", AnyDepth, "pnpm hooks (run on install)"},
	{"compose.yaml", AnyDepth, "Docker Compose (host mounts, privileged services)"},
	{"compose.yml", AnyDepth, "Docker Compose (host mounts, privileged services)"},
	{"docker-compose.yaml", AnyDepth, "Docker Compose (host mounts, privileged services)"},
	{"docker-compose.yml", AnyDepth, "Docker Compose (host mounts, privileged services)"},
	{"flake.nix", AnyDepth, "Nix flakes (dev shells)"},
	{"shell.nix", AnyDepth, "nix-shell (shell hooks)"},
	{".python-version", AnyDepth, "pyenv (which interpreter its shims run)"},
	{".ruby-version", AnyDepth, "rbenv, chruby (which interpreter runs)"},
	{".node-version", AnyDepth, "nodenv, fnm (which node runs)"},
	{".nvmrc", AnyDepth, "nvm (which node runs)"},
	{".lfsconfig", Root, "git-lfs (the endpoints it fetches from and pushes to)"},
	{"Brewfile", AnyDepth, "brew bundle (Ruby)"},
	{"Vagrantfile", AnyDepth, "Vagrant (Ruby)"},
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
			if p == r.Name || under(p, r.Name) {
				return r, true
			}
		case AnyDepthPath:
			// The path, then each of its directories.
			for q := r.Name; ; {
				if p == q || endsIn(p, q) {
					return r, true
				}
				i := strings.LastIndexByte(q, '/')
				if i < 0 {
					break
				}
				q = q[:i]
			}
		}
	}
	return Rule{}, false
}

// under reports whether p is below the directory dir; endsIn, whether p
// ends in the components q below some directory. Neither allocates: Match
// runs for every file a baseline scan lists.
func under(p, dir string) bool {
	return len(p) > len(dir) && p[len(dir)] == '/' && p[:len(dir)] == dir
}

func endsIn(p, q string) bool {
	n := len(p) - len(q)
	return n > 0 && p[n-1] == '/' && p[n:] == q
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
