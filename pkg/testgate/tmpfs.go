package testgate

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Tmpfs mounts a tmpfs of size (mount's syntax: "16m") on a new
// temporary directory and returns it; it is unmounted at cleanup. It
// needs root itself, and changes host state, so it runs only when opted
// in (Opted) and as root (Root).
func Tmpfs(t testing.TB, size string) string {
	t.Helper()
	Opted(t)
	Root(t)
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Fatalf("mounting a tmpfs on %s: %v\n%s", dir, err, out)
	}
	t.Cleanup(func() { exec.Command("umount", dir).Run() })
	return dir
}

// Fill writes a file in dir until its file system has no free block, and
// returns the file's path.
func Fill(t testing.TB, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "fill")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for {
		if _, err := f.Write(buf); err != nil {
			return path
		}
	}
}
