package daemon

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"lazaret.dev/lazaret-gitroute/internal/view"
	"lazaret.dev/pkg/isolation"
	"lazaret.dev/pkg/testgate"
	"lazaret.dev/pkg/testtree"
)

// TestStickyClassification runs the classification of a real repository
// with a keep file, as Run does, and checks the report and the routes.
func TestStickyClassification(t *testing.T) {
	git := testgate.Command(t, "git")
	host := t.TempDir()
	run := func(args ...string) {
		t.Helper()
		cmd := exec.Command(git, append([]string{"-C", host, "-c", "user.name=t", "-c", "user.email=t@lazaret.invalid"}, args...)...)
		cmd.Env = []string{"GIT_CONFIG_NOSYSTEM=1", "HOME=" + host, "PATH=" + os.Getenv("PATH")}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %q: %v: %s", args, err, out)
		}
	}
	run("init", "-q")
	testtree.Write(t, host, map[string]string{
		".gitignore":       "build/\n*.log\n",
		".env":             "SECRET\n",
		"tracked":          "x\n",
		"build/out":        "x\n",
		"src/a.log":        "x\n",
		"src/a.go":         "x\n",
		"nl\nname":         "x\n",
		"secrets/key":      "x\n",
		"secrets/sub/more": "x\n",
	})
	// .env is tracked now (the sandbox's `git add -f` of an earlier
	// generation), secrets/ was never ignored: only the keep file
	// isolates them.
	run("add", "-f", ".gitignore", "tracked", ".env", "src/a.go", "nl\nname")
	run("commit", "-q", "-m", "x")
	run("update-index", "--skip-worktree", ".env")

	dir := t.TempDir()
	keepFile, reportFile := filepath.Join(dir, "keep"), filepath.Join(dir, "report")
	set, err := isolation.NewSet([]isolation.Entry{{Path: ".env"}, {Path: "secrets", Dir: true}, {Path: "gone"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keepFile, isolation.EncodeKeep(set), 0o600); err != nil {
		t.Fatal(err)
	}
	hostFd, err := view.OpenRoot(host)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(hostFd)
	cfg := Config{HostRoot: host, Home: host, KeepIsolated: keepFile, IsolationReport: reportFile, Log: slog.Default()}
	keep, err := readKeep(cfg.KeepIsolated)
	if err != nil {
		t.Fatal(err)
	}
	walk := &isolationWalk{keep: keep}
	cls, _, err := classify(context.Background(), hostFd, cfg, walk)
	if err != nil {
		t.Fatal(err)
	}
	if err := walk.writeReport(cfg.IsolationReport); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(reportFile)
	if err != nil {
		t.Fatal(err)
	}
	want := "lazaret-isolation-report-v1\nk.env\x00ibuild/\x00ksecrets/\x00isrc/a.log\x00"
	if string(data) != want {
		t.Errorf("report = %q\nwant     %q", data, want)
	}
	r := view.Router{C: walk.classifier(cls)}
	for p, want := range map[string]view.Backing{
		".env": view.Isolated, "secrets": view.Isolated, "secrets/sub/more": view.Isolated,
		"build": view.Isolated, "tracked": view.Host, "src/a.go": view.Host, "nl\nname": view.Host,
		"gone": view.Isolated, "src": view.Host,
	} {
		isDir := p == "secrets" || p == "build" || p == "src"
		if got := r.Route(p, isDir); got != want {
			t.Errorf("Route(%q) = %v, want %v", p, got, want)
		}
	}
	if err := walk.writeReport(cfg.IsolationReport); err == nil {
		t.Error("a second report over the first was written")
	}

	for name, content := range map[string]string{
		"bad header":     "nope\n",
		"path into .git": "lazaret-keep-isolated-v1\n.git/config\x00",
	} {
		t.Run(name, func(t *testing.T) {
			p := filepath.Join(dir, strings.ReplaceAll(name, " ", "-"))
			if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := readKeep(p); err == nil || !strings.Contains(err.Error(), p) {
				t.Errorf("readKeep of a %s: %v, want an error naming %q", name, err, p)
			}
		})
	}
}
