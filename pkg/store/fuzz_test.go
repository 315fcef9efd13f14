package store

import (
	"os"
	"path/filepath"
	"testing"

	"lazaret.dev/pkg/store/codec"
)

// FuzzHeader feeds arbitrary file contents to the meta-page check, which
// runs in the caller's process and so must never panic.
func FuzzHeader(f *testing.F) {
	dir := f.TempDir()
	valid := filepath.Join(dir, "seed.db")
	db, err := Open(valid, testSchema, Options{Create: true})
	if err != nil {
		f.Fatal(err)
	}
	db.Close()
	seed, _ := os.ReadFile(valid)
	f.Add(seed[:8192])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		p := filepath.Join(t.TempDir(), "f.db")
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		fh, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		defer fh.Close()
		_ = checkHeader(fh, p)
	})
}

// FuzzMetadata feeds arbitrary metadata records to the schema gate.
func FuzzMetadata(f *testing.F) {
	b, _ := encodeMetadata(testSchema)
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		if compareMetadata("f.db", b, testSchema) != nil {
			return
		}
		var m StoreMetadata
		if err := codec.UnmarshalOpen(b, &m); err != nil || m.SchemaID != testSchema.ID || m.SchemaVersion != testSchema.Version {
			t.Fatalf("gate accepted %x as %+v (%v)", b, m, err)
		}
	})
}
