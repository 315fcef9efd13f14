package unpack

import (
	"archive/tar"
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// FuzzApply feeds arbitrary bytes as two layers (split at the first byte's
// value) and checks that nothing outside the root changes, whatever Apply
// returns.
func FuzzApply(f *testing.F) {
	seeds := [][]byte{
		tarBytes(f, dir("a/"), file("a/f", "x"), symlink("a/l", "/"), file("a/l/x", "y")),
		tarBytes(f, symlink("up", ".."), file("up/x", "y"), hardlink("h", "up/x")),
		tarBytes(f, file("a/.wh..wh..opq", ""), file(".wh.a", ""), file("../x", "")),
		tarBytes(f, ent{name: "dev/x", typ: tar.TypeChar}, ent{name: "p", typ: tar.TypeFifo, mode: 0o600}),
	}
	for _, s := range seeds {
		f.Add(append([]byte{byte(len(s) % 251)}, s...))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		cut := int(data[0]) * len(data) / 256
		first, second := data[1:1+cut/2], data[1+cut/2:]
		base := t.TempDir()
		root := filepath.Join(base, "root")
		outside := filepath.Join(base, "outside")
		if err := os.Mkdir(root, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(outside, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("keep"), 0o600); err != nil {
			t.Fatal(err)
		}
		rf, err := os.OpenFile(root, unix.O_PATH|unix.O_DIRECTORY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer rf.Close()
		layers := []Layer{layer("sha256:first", bytes.Clone(first)), layer("sha256:second", bytes.Clone(second))}
		_, _ = Apply(context.Background(), rf, layers, Options{IDMap: selfMap()})
		checkOutside(t, outside)
		entries, err := os.ReadDir(base)
		if err != nil {
			t.Fatal(err)
		}
		if len(entries) != 2 {
			t.Fatalf("base directory has %d entries, want root and outside", len(entries))
		}
		if err := RemoveTree(root); err != nil {
			t.Fatalf("removing root: %v", err)
		}
	})
}
