package store

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"

	"lazaret.dev/pkg/store/codec"
)

var testSchema = Schema{ID: "lazaret-test-store-v1", Version: 3}

// writeRaw makes a bbolt file whose metadata is whatever meta returns
// (nil: no metadata bucket at all), plus one ordinary row.
func writeRaw(t *testing.T, path string, meta func(tx *bolt.Tx) error) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucket([]byte("rows"))
		if err != nil {
			return err
		}
		if err := b.Put([]byte("k"), []byte("v")); err != nil {
			return err
		}
		if meta != nil {
			return meta(tx)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

func metaRecord(v any) func(tx *bolt.Tx) error {
	return func(tx *bolt.Tx) error {
		b, err := tx.CreateBucket(metadataBucket)
		if err != nil {
			return err
		}
		raw, err := codec.Marshal(v)
		if err != nil {
			return err
		}
		return b.Put(metadataKey, raw)
	}
}

func TestCreateAndReopen(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b")
	path := filepath.Join(dir, "s.db")
	db, err := Open(path, testSchema, Options{Create: true, Init: func(tx *bolt.Tx) error {
		_, err := tx.CreateBucket([]byte("rows"))
		return err
	}})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error { return tx.Bucket([]byte("rows")).Put([]byte("x"), []byte("y")) }); err != nil {
		t.Fatal(err)
	}
	db.Close()
	for _, p := range []struct {
		path string
		mode os.FileMode
	}{{dir, 0o700 | os.ModeDir}, {filepath.Dir(dir), 0o700 | os.ModeDir}, {path, 0o600}} {
		st, err := os.Stat(p.path)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode() != p.mode {
			t.Errorf("%s mode = %v, want %v", p.path, st.Mode(), p.mode)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("directory holds %d entries, want only the store (no temporary files)", len(entries))
	}
	db, err = Open(path, testSchema, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.View(func(tx *bolt.Tx) error {
		if got := tx.Bucket([]byte("rows")).Get([]byte("x")); string(got) != "y" {
			t.Errorf("row = %q", got)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(*bolt.Tx) error { return nil }); !errors.Is(err, ErrReadOnly) {
		t.Errorf("write on read-only store: %v", err)
	}
}

func TestOpenMissing(t *testing.T) {
	_, err := Open(filepath.Join(t.TempDir(), "none.db"), testSchema, Options{})
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("err = %v, want ErrNotFound", err)
	}
	_, err = Open(filepath.Join(t.TempDir(), "none.db"), testSchema, Options{Create: true, ReadOnly: true})
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("read-only create: err = %v, want ErrNotFound", err)
	}
}

// TestRefusals proves that every kind of unusable file is refused with the
// right error and left byte-for-byte unchanged, by Open (read-write and
// read-only) and by Check.
func TestRefusals(t *testing.T) {
	valid := func(t *testing.T, path string) {
		writeRaw(t, path, metaRecord(StoreMetadata{SchemaID: testSchema.ID, SchemaVersion: testSchema.Version}))
	}
	cases := []struct {
		name    string
		make    func(t *testing.T, path string)
		want    error
		problem SchemaProblem
	}{
		{"newer", func(t *testing.T, p string) {
			writeRaw(t, p, metaRecord(StoreMetadata{SchemaID: testSchema.ID, SchemaVersion: 4}))
		}, ErrSchema, SchemaNewer},
		{"newer with extra metadata fields", func(t *testing.T, p string) {
			writeRaw(t, p, metaRecord(map[string]any{"schema_id": testSchema.ID, "schema_version": uint64(9), "migrated_from": uint64(3)}))
		}, ErrSchema, SchemaNewer},
		{"older", func(t *testing.T, p string) {
			writeRaw(t, p, metaRecord(StoreMetadata{SchemaID: testSchema.ID, SchemaVersion: 2}))
		}, ErrSchema, SchemaOlder},
		{"unknown schema", func(t *testing.T, p string) {
			writeRaw(t, p, metaRecord(StoreMetadata{SchemaID: "someone-else-v1", SchemaVersion: 3}))
		}, ErrSchema, SchemaUnknown},
		{"unversioned: no metadata bucket", func(t *testing.T, p string) { writeRaw(t, p, nil) }, ErrSchema, SchemaUnversioned},
		{"unversioned: empty bucket", func(t *testing.T, p string) {
			writeRaw(t, p, func(tx *bolt.Tx) error { _, err := tx.CreateBucket(metadataBucket); return err })
		}, ErrSchema, SchemaUnversioned},
		{"unversioned: zero version", func(t *testing.T, p string) {
			writeRaw(t, p, metaRecord(StoreMetadata{SchemaID: testSchema.ID}))
		}, ErrSchema, SchemaUnversioned},
		{"unreadable metadata", func(t *testing.T, p string) {
			writeRaw(t, p, func(tx *bolt.Tx) error {
				b, err := tx.CreateBucket(metadataBucket)
				if err != nil {
					return err
				}
				return b.Put(metadataKey, []byte{0xff, 0x00})
			})
		}, ErrSchema, SchemaUnreadable},
		{"empty file", func(t *testing.T, p string) { os.WriteFile(p, nil, 0o600) }, ErrDamaged, 0},
		{"garbage", func(t *testing.T, p string) {
			os.WriteFile(p, bytes.Repeat([]byte("not a database "), 2048), 0o600)
		}, ErrDamaged, 0},
		{"truncated mid-page", func(t *testing.T, p string) {
			valid(t, p)
			truncate(t, p, func(n int64) int64 { return n - 100 })
		}, ErrDamaged, 0},
		{"truncated to two pages", func(t *testing.T, p string) {
			valid(t, p)
			truncate(t, p, func(int64) int64 { return 8192 })
		}, ErrDamaged, 0},
		{"truncated inside the first page", func(t *testing.T, p string) {
			valid(t, p)
			truncate(t, p, func(int64) int64 { return 40 })
		}, ErrDamaged, 0},
		{"both meta pages corrupt", func(t *testing.T, p string) {
			valid(t, p)
			flip(t, p, 16+20)
			flip(t, p, 4096+16+20)
		}, ErrDamaged, 0},
		{"data page corrupt", func(t *testing.T, p string) {
			valid(t, p)
			corruptDataPages(t, p)
		}, ErrDamaged, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "s.db")
			c.make(t, path)
			before, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range []Options{{}, {ReadOnly: true}, {Create: true}} {
				db, err := Open(path, testSchema, o)
				if err == nil {
					db.Close()
					t.Fatalf("Open(%+v) accepted the file", o)
				}
				if !errors.Is(err, c.want) {
					t.Fatalf("Open(%+v) = %v, want %v", o, err, c.want)
				}
				var se *SchemaError
				if c.problem != 0 {
					if !errors.As(err, &se) || se.Problem != c.problem {
						t.Fatalf("Open(%+v) = %v, want schema problem %v", o, err, c.problem)
					}
					if se.Path != path {
						t.Errorf("schema error path %q, want %q", se.Path, path)
					}
				}
				if !bytes.Contains([]byte(err.Error()), []byte(path)) {
					t.Errorf("error does not name the file: %v", err)
				}
			}
			err = Check(path, testSchema, Options{})
			t.Logf("refusal: %v", err)
			if !errors.Is(err, c.want) {
				t.Fatalf("Check = %v, want %v", err, c.want)
			}
			after, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(before, after) {
				t.Fatal("refused file was modified")
			}
		})
	}
}

func TestSchemaErrorNamesBothVersions(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	writeRaw(t, path, metaRecord(StoreMetadata{SchemaID: testSchema.ID, SchemaVersion: 7}))
	_, err := Open(path, testSchema, Options{})
	msg := err.Error()
	for _, want := range []string{path, "lazaret-test-store-v1 version 7", "lazaret-test-store-v1 version 3", "newer"} {
		if !bytes.Contains([]byte(msg), []byte(want)) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}
}

func TestLockTimeout(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	db, err := Open(path, testSchema, Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_, err = Open(path, testSchema, Options{LockTimeout: 50e6})
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("second open = %v, want ErrLocked", err)
	}
}

func TestQuarantine(t *testing.T) {
	dir := t.TempDir()
	healthy := filepath.Join(dir, "ok.db")
	db, err := Open(healthy, testSchema, Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	if _, err := Quarantine(healthy, testSchema, Options{}); !errors.Is(err, ErrNotDamaged) {
		t.Fatalf("quarantine of healthy store = %v", err)
	}
	newer := filepath.Join(dir, "newer.db")
	writeRaw(t, newer, metaRecord(StoreMetadata{SchemaID: testSchema.ID, SchemaVersion: 99}))
	if _, err := Quarantine(newer, testSchema, Options{}); !errors.Is(err, ErrSchema) {
		t.Fatalf("quarantine of newer store = %v, want ErrSchema", err)
	}
	bad := filepath.Join(dir, "bad.db")
	os.WriteFile(bad, []byte("garbage"), 0o600)
	dst, err := Quarantine(bad, testSchema, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(dst); err != nil || string(b) != "garbage" {
		t.Fatalf("quarantined copy = %q, %v", b, err)
	}
	if _, err := os.Stat(bad); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("damaged file still in place: %v", err)
	}
}

func TestSymlinkRefused(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "real.db")
	db, err := Open(target, testSchema, Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	link := filepath.Join(dir, "link.db")
	os.Symlink(target, link)
	if _, err := Open(link, testSchema, Options{}); err == nil {
		t.Fatal("symlinked store accepted")
	}
}

func truncate(t *testing.T, p string, size func(int64) int64) {
	t.Helper()
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(p, size(st.Size())); err != nil {
		t.Fatal(err)
	}
}

func flip(t *testing.T, p string, off int64) {
	t.Helper()
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := []byte{0}
	f.ReadAt(b, off)
	b[0] ^= 0xff
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// corruptDataPages overwrites the header of every page after the two meta
// pages, leaving the meta pages (and so the header check) intact: only the
// page check can find it.
func corruptDataPages(t *testing.T, p string) {
	t.Helper()
	st, _ := os.Stat(p)
	for off := int64(2 * 4096); off < st.Size(); off += 4096 {
		f, err := os.OpenFile(p, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		f.WriteAt([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 0x55, 0x55, 0xff, 0xff}, off)
		f.Close()
	}
}
