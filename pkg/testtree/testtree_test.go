package testtree

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWrite(t *testing.T) {
	root := t.TempDir()
	files := map[string]string{"a": "top\n", "d/e/f": "deep\n", "d/empty": ""}
	Write(t, root, files)
	for name, want := range files {
		p := filepath.Join(root, name)
		got, err := os.ReadFile(p)
		if err != nil || string(got) != want {
			t.Errorf("%s: %q, %v; want %q", name, got, err, want)
		}
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm()&^0o644 != 0 {
			t.Errorf("%s: mode %v, %v; want at most 0644", name, fi.Mode(), err)
		}
	}
}
