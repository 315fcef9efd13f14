package kube

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir, "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example",
		"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// runClone runs CloneScript as the pod's init container would, with ws as
// the workspace claim.
func runClone(t *testing.T, ws, url, commit, branch string) (string, error) {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", CloneScript)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "GIT_CONFIG_NOSYSTEM=1",
		"LAZARET_WORKSPACE=" + ws, "LAZARET_GIT_URL=" + url, "LAZARET_GIT_COMMIT=" + commit, "LAZARET_GIT_BRANCH=" + branch}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestCloneScript runs the workspace init container's script against a
// real repository: ignored and uncommitted files stay behind, the commit
// and branch are checked out, a second start keeps the work, a commit
// the remote lacks fails naming it, and a failed start leaves nothing a
// later one would keep.
func TestCloneScript(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	src := t.TempDir()
	git(t, src, "init", "-q", "-b", "main")
	os.WriteFile(filepath.Join(src, ".gitignore"), []byte(".env\nbuild/\n"), 0o644)
	os.WriteFile(filepath.Join(src, "main.go"), []byte("package main\n"), 0o644)
	git(t, src, "add", ".")
	git(t, src, "commit", "-q", "-m", "one")
	head := git(t, src, "rev-parse", "HEAD")
	os.WriteFile(filepath.Join(src, ".env"), []byte("SECRET=1\n"), 0o600)
	os.MkdirAll(filepath.Join(src, "build"), 0o755)
	os.WriteFile(filepath.Join(src, "build", "out"), []byte("x"), 0o644)
	os.WriteFile(filepath.Join(src, "main.go"), []byte("package main // uncommitted\n"), 0o644)
	url := "file://" + src

	ws := t.TempDir()
	os.Mkdir(filepath.Join(ws, "lost+found"), 0o700) // as on a fresh ext4 volume
	if out, err := runClone(t, ws, url, head, "main"); err != nil {
		t.Fatalf("clone: %v\n%s", err, out)
	}
	for _, gone := range []string{".env", "build", ".lazaret-clone.git"} {
		if _, err := os.Lstat(filepath.Join(ws, gone)); !os.IsNotExist(err) {
			t.Errorf("%s exists in the clone (%v)", gone, err)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "main.go")); string(b) != "package main\n" {
		t.Errorf("main.go = %q, want the committed content", b)
	}
	if got := git(t, ws, "rev-parse", "HEAD"); got != head {
		t.Errorf("HEAD = %s, want %s", got, head)
	}
	if got := git(t, ws, "symbolic-ref", "--short", "HEAD"); got != "main" {
		t.Errorf("branch = %s, want main", got)
	}
	if st := git(t, ws, "status", "--porcelain", "--untracked-files=no"); st != "" {
		t.Errorf("the clone is not clean:\n%s", st)
	}

	// The agent's work survives the next start.
	os.WriteFile(filepath.Join(ws, "work.txt"), []byte("agent"), 0o644)
	if out, err := runClone(t, ws, url, head, "main"); err != nil || !strings.Contains(out, "keeping it") {
		t.Fatalf("second start: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(ws, "work.txt")); err != nil {
		t.Errorf("the second start lost the agent's file: %v", err)
	}

	// Detached, without a branch.
	ws2 := t.TempDir()
	if out, err := runClone(t, ws2, url, head, ""); err != nil {
		t.Fatalf("detached clone: %v\n%s", err, out)
	}
	if got := git(t, ws2, "rev-parse", "HEAD"); got != head {
		t.Errorf("detached HEAD = %s, want %s", got, head)
	}

	// A commit the remote does not have.
	missing := strings.Repeat("e", 40)
	ws3 := t.TempDir()
	out, err := runClone(t, ws3, url, missing, "main")
	if err == nil || !strings.Contains(out, "commit "+missing+" is not on "+url) {
		t.Fatalf("missing commit: err=%v\n%s", err, out)
	}
	if _, err := os.Lstat(filepath.Join(ws3, ".git")); !os.IsNotExist(err) {
		t.Errorf("a failed start left .git (%v)", err)
	}
	// An unreachable remote.
	out, err = runClone(t, ws3, "file://"+filepath.Join(src, "nowhere"), head, "")
	if err == nil || !strings.Contains(out, "cannot fetch") {
		t.Fatalf("bad remote: err=%v\n%s", err, out)
	}
	// The next start with a good remote still clones.
	if out, err := runClone(t, ws3, url, head, ""); err != nil {
		t.Fatalf("after failures: %v\n%s", err, out)
	}
	if got := git(t, ws3, "rev-parse", "HEAD"); got != head {
		t.Errorf("HEAD after failures = %s", got)
	}
}
