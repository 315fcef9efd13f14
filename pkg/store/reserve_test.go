package store

import (
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"
	"golang.org/x/sys/unix"

	"lazaret.dev/pkg/testgate"
)

// TestReserveHeldAfterUpdates checks that a writable store keeps Reserve
// bytes allocated past its end as it grows, and a read-only one none.
func TestReserveHeldAfterUpdates(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	db, err := Open(path, testSchema, Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Reserved(); err != nil {
		if errors.Is(err, unix.EOPNOTSUPP) {
			t.Skipf("skipping: the test directory's file system has no fallocate: %v", err)
		}
		t.Fatal(err)
	}
	for i := range 64 {
		if err := db.Update(func(tx *bolt.Tx) error {
			b, err := tx.CreateBucketIfNotExists([]byte("rows"))
			if err != nil {
				return err
			}
			return b.Put([]byte(fmt.Sprint(i)), make([]byte, 16<<10))
		}); err != nil {
			t.Fatal(err)
		}
	}
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	if st.Blocks*512 < st.Size+Reserve {
		t.Errorf("%d bytes allocated for a store of %d bytes, want the file and the reserve of %d", st.Blocks*512, st.Size, Reserve)
	}
	if err := db.Reserved(); err != nil {
		t.Errorf("Reserved after growth = %v", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	ro, err := Open(path, testSchema, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if ro.reserve != nil || ro.Reserved() != nil {
		t.Errorf("a read-only store holds a reserve: %v", ro.Reserved())
	}
}

// TestStoreGrowsOnFullFileSystem fills a small tmpfs under an open store:
// commits that grow the store by a few megabytes still succeed, from the
// reserve, while the file system has no free block; one that outgrows the
// reserve fails and changes nothing.
func TestStoreGrowsOnFullFileSystem(t *testing.T) {
	dir := testgate.Tmpfs(t, "32m")
	path := filepath.Join(dir, "s.db")
	db, err := Open(path, testSchema, Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	testgate.Fill(t, dir)
	put := func(key string, size int) error {
		return db.Update(func(tx *bolt.Tx) error {
			b, err := tx.CreateBucketIfNotExists([]byte("rows"))
			if err != nil {
				return err
			}
			return b.Put([]byte(key), make([]byte, size))
		})
	}
	for i := range 48 {
		if err := put(fmt.Sprint(i), 32<<10); err != nil {
			t.Fatalf("commit %d (1.5 MiB in all) on the full file system: %v", i, err)
		}
	}
	if err := put("large", 2*Reserve); err == nil {
		t.Fatal("a commit twice the reserve's size succeeded on a full file system: the file system was not full")
	}
	if err := db.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket([]byte("rows")).Get([]byte("large")); v != nil {
			return errors.New("the failed commit's row is there")
		}
		return nil
	}); err != nil {
		t.Error(err)
	}
}
