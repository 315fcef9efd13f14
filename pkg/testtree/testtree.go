// Package testtree writes the file trees tests start from.
package testtree

import (
	"os"
	"path/filepath"
	"testing"
)

// Write creates each file of files (a slash-separated path relative to
// root → its content) with mode 0644, and the directories leading to it
// with mode 0755. It fails the test at the first error.
func Write(t testing.TB, root string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
