package store

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"
)

func openCounting(t *testing.T, path string, opts Options) (*DB, int64) {
	t.Helper()
	before := deepChecks.Load()
	db, err := Open(path, testSchema, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return db, deepChecks.Load() - before
}

// A store this process checked, or left behind after its own writes, is
// not checked again until something else writes it.
func TestVerifiedStateSkipsTheCheck(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	db, n := openCounting(t, path, Options{Create: true, Init: func(tx *bolt.Tx) error {
		_, err := tx.CreateBucket([]byte("rows"))
		return err
	}})
	if n != 1 {
		t.Fatalf("first Open ran %d checks, want 1", n)
	}
	if err := db.Update(func(tx *bolt.Tx) error { return tx.Bucket([]byte("rows")).Put([]byte("a"), []byte("1")) }); err != nil {
		t.Fatal(err)
	}
	db.Close()

	db, n = openCounting(t, path, Options{})
	if n != 0 {
		t.Fatalf("Open after this process's own writes ran %d checks, want 0", n)
	}
	db.Close()

	// Another writer (a bbolt handle this package does not know of).
	raw, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := raw.Update(func(tx *bolt.Tx) error { return tx.Bucket([]byte("rows")).Put([]byte("b"), []byte("2")) }); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	db, n = openCounting(t, path, Options{})
	if n != 1 {
		t.Fatalf("Open after another writer ran %d checks, want 1", n)
	}
	db.Close()
}

// A page damaged behind the process's back after it verified the file
// is still found: the write moves the file's state.
func TestVerifiedStateSeesADamagedPage(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	db, _ := openCounting(t, path, Options{Create: true, Init: func(tx *bolt.Tx) error {
		b, err := tx.CreateBucket([]byte("rows"))
		if err != nil {
			return err
		}
		for i := range 200 {
			if err := b.Put([]byte{byte(i), 'k'}, make([]byte, 100)); err != nil {
				return err
			}
		}
		return nil
	}})
	db.Close()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Overwrite every page after the two meta pages and the freelist's
	// first with garbage page headers.
	junk := make([]byte, 4096)
	for i := range junk {
		junk[i] = 0xA5
	}
	for off := int64(3 * 4096); off+4096 <= st.Size(); off += 4096 {
		if _, err := f.WriteAt(junk, off); err != nil {
			t.Fatal(err)
		}
	}
	f.Close()
	before := deepChecks.Load()
	_, err = Open(path, testSchema, Options{})
	if deepChecks.Load()-before != 1 {
		t.Fatalf("Open of a file written since it was verified ran %d checks, want 1", deepChecks.Load()-before)
	}
	if !errors.Is(err, ErrDamaged) {
		t.Fatalf("Open of a damaged store: %v, want %v", err, ErrDamaged)
	}
}
