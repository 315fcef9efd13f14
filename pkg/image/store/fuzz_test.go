package store_test

import (
	"archive/tar"
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"lazaret.dev/pkg/image/store"
)

// FuzzLoad feeds arbitrary bytes to Load as an archive file. Whatever it
// returns, nothing may appear beside the store, and a failed load leaves
// the store empty.
func FuzzLoad(f *testing.F) {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, e := range []struct{ name, body string }{
		{"oci-layout", `{"imageLayoutVersion":"1.0.0"}`},
		{"index.json", `{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:` + string(bytes.Repeat([]byte("a"), 64)) + `","size":2}]}`},
		{"../escape", "x"},
		{"manifest.json", `[{"Config":"c.json","RepoTags":["localhost/x:1"],"Layers":["l.tar"]}]`},
	} {
		tw.WriteHeader(&tar.Header{Name: e.name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(e.body))})
		tw.Write([]byte(e.body))
	}
	tw.Close()
	f.Add(b.Bytes())
	f.Add([]byte{})
	f.Add([]byte{0x1f, 0x8b, 0, 0})
	// The store fsyncs every file it writes. Durability is not what this
	// target checks, and on a busy disk each fsync can take seconds, so the
	// scratch directories live on tmpfs where a sync costs nothing.
	scratch := f.TempDir()
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		scratch = "/dev/shm"
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		base, err := os.MkdirTemp(scratch, "lazaret-fuzzload-")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(base)
		archive := filepath.Join(base, "archive")
		if err = os.WriteFile(archive, data, 0o600); err != nil {
			t.Fatal(err)
		}
		s, err := store.Open(filepath.Join(base, "images"), nil)
		if err != nil {
			t.Fatal(err)
		}
		_, lerr := s.Load(context.Background(), archive, store.LoadOptions{Tag: "localhost/fuzz:1"})
		ents, err := os.ReadDir(base)
		if err != nil {
			t.Fatal(err)
		}
		if len(ents) != 2 {
			t.Fatalf("%d entries beside the store, want archive and images", len(ents))
		}
		if lerr != nil {
			if ls, err := s.List(); err != nil || len(ls) != 0 {
				t.Fatalf("failed load left %v, %v", ls, err)
			}
		}
	})
}
