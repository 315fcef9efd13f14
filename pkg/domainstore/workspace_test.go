package domainstore

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"lazaret.dev/pkg/isolation"
	"lazaret.dev/pkg/store"
	"lazaret.dev/pkg/store/codec"
)

func TestIsolatedPathsRecord(t *testing.T) {
	s := openTestStore(t, t.TempDir())
	read := func() (*isolation.Set, error) {
		var set *isolation.Set
		err := s.View(func(tx *Tx) error { var e error; set, e = tx.IsolatedPaths(); return e })
		return set, err
	}
	t.Run("a store without the record holds the empty set", func(t *testing.T) {
		set, err := read()
		if err != nil || set.Len() != 0 {
			t.Fatalf("IsolatedPaths = %v, %v; want the empty set", set.Entries(), err)
		}
	})
	set, err := isolation.NewSet([]isolation.Entry{{Path: "nl\nname"}, {Path: ".env"}, {Path: "build", Dir: true}, {Path: "\xff"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Run("round trip", func(t *testing.T) {
		if err := s.Update(func(tx *Tx) error { return tx.PutIsolatedPaths(set) }); err != nil {
			t.Fatal(err)
		}
		got, err := read()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(isolation.EncodeKeep(got), isolation.EncodeKeep(set)) {
			t.Errorf("read back %v, want %v", got.Entries(), set.Entries())
		}
	})
	t.Run("golden encoding", func(t *testing.T) {
		one, _ := isolation.NewSet([]isolation.Entry{{Path: ".env"}})
		raw, err := codec.Marshal(NewIsolatedPaths(one))
		if err != nil {
			t.Fatal(err)
		}
		// {"paths": [{"dir": false, "path": h'2e656e76'}]}
		want := []byte{0xa1, 0x65, 'p', 'a', 't', 'h', 's', 0x81, 0xa2, 0x63, 'd', 'i', 'r', 0xf4, 0x64, 'p', 'a', 't', 'h', 0x44, '.', 'e', 'n', 'v'}
		if !bytes.Equal(raw, want) {
			t.Errorf("encoding = %x, want %x", raw, want)
		}
	})
	t.Run("release", func(t *testing.T) {
		var removed []isolation.Entry
		err := s.Update(func(tx *Tx) error { var e error; removed, e = tx.ReleaseIsolated([]string{".env", "nope"}); return e })
		if !errors.Is(err, isolation.ErrNotKept) || !strings.Contains(err.Error(), `"nope"`) {
			t.Fatalf("releasing an unknown path: %v", err)
		}
		if got, _ := read(); got.Len() != set.Len() {
			t.Fatalf("a refused release removed paths: %v", got.Entries())
		}
		err = s.Update(func(tx *Tx) error { var e error; removed, e = tx.ReleaseIsolated([]string{".env", "build"}); return e })
		if err != nil || len(removed) != 2 || removed[0].Path != ".env" || !removed[1].Dir {
			t.Fatalf("release = %v, %v", removed, err)
		}
		if got, _ := read(); got.Len() != 2 || got.Has(".env") {
			t.Errorf("after the release: %v", got.Entries())
		}
	})
	t.Run("the empty set removes the record", func(t *testing.T) {
		if err := s.Update(func(tx *Tx) error { return tx.PutIsolatedPaths(&isolation.Set{}) }); err != nil {
			t.Fatal(err)
		}
		if got, err := read(); err != nil || got.Len() != 0 {
			t.Errorf("after the empty set: %v, %v", got.Entries(), err)
		}
	})
	for _, tc := range []struct {
		name string
		rec  IsolatedPaths
		raw  []byte
	}{
		{name: "out of order", rec: IsolatedPaths{Paths: []IsolatedPath{{Path: []byte("b")}, {Path: []byte("a")}}}},
		{name: "duplicate", rec: IsolatedPaths{Paths: []IsolatedPath{{Path: []byte("a")}, {Path: []byte("a"), Dir: true}}}},
		{name: "path into .git", rec: IsolatedPaths{Paths: []IsolatedPath{{Path: []byte(".git/config")}}}},
		{name: "dot dot", rec: IsolatedPaths{Paths: []IsolatedPath{{Path: []byte("../x")}}}},
		{name: "not CBOR", raw: []byte{0xff, 0x00}},
	} {
		t.Run("damaged record: "+tc.name, func(t *testing.T) {
			raw := tc.raw
			if raw == nil {
				var err error
				if raw, err = codec.Marshal(tc.rec); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.db.Update(func(btx *bolt.Tx) error {
				b, err := btx.CreateBucketIfNotExists(bucketWorkspace)
				if err != nil {
					return err
				}
				return b.Put(keyIsolated, raw)
			}); err != nil {
				t.Fatal(err)
			}
			_, err := read()
			var re *store.RecordError
			if !errors.As(err, &re) || !errors.Is(err, store.ErrInvalidRecord) || re.Record != "isolated paths" {
				t.Fatalf("reading a damaged record: %v, want an invalid isolated paths record", err)
			}
			// Reported, not reset: the bytes are still there.
			if err := s.db.View(func(btx *bolt.Tx) error {
				if got := btx.Bucket(bucketWorkspace).Get(keyIsolated); !bytes.Equal(got, raw) {
					t.Errorf("record now %x, want %x", got, raw)
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestReviewBaselineRecord(t *testing.T) {
	s := openTestStore(t, t.TempDir())
	read := func() (ReviewBaseline, bool, error) {
		var b ReviewBaseline
		var found bool
		err := s.View(func(tx *Tx) error { var e error; b, found, e = tx.ReviewBaseline(); return e })
		return b, found, err
	}
	if _, found, err := read(); found || err != nil {
		t.Fatalf("a new store has a baseline (%v, %v)", found, err)
	}
	good := ReviewBaseline{TakenAtUnix: 1700000000, Files: []ReviewFile{
		{Path: []byte(".vscode/tasks.json"), Mode: 0o100644, SHA256: *digest(1)},
		{Path: []byte("Makefile"), Mode: 0o100755, SHA256: *digest(2)},
		{Path: []byte("link"), Mode: 0o120777, SHA256: *digest(3)},
	}}
	if err := s.Update(func(tx *Tx) error { return tx.PutReviewBaseline(good) }); err != nil {
		t.Fatal(err)
	}
	got, found, err := read()
	if err != nil || !found || len(got.Files) != 3 || !bytes.Equal(got.Files[1].Path, []byte("Makefile")) || got.Files[2].Mode != 0o120777 {
		t.Fatalf("read back %+v, %v, %v", got, found, err)
	}
	empty := ReviewBaseline{TakenAtUnix: 1}
	if err := s.Update(func(tx *Tx) error { return tx.PutReviewBaseline(empty) }); err != nil {
		t.Fatal(err)
	}
	if got, found, err := read(); err != nil || !found || len(got.Files) != 0 {
		t.Errorf("an empty baseline reads as %+v, %v, %v; want a pending empty one", got, found, err)
	}
	for name, b := range map[string]ReviewBaseline{
		"no time":      {Files: good.Files},
		"out of order": {TakenAtUnix: 1, Files: []ReviewFile{good.Files[1], good.Files[0]}},
		"directory":    {TakenAtUnix: 1, Files: []ReviewFile{{Path: []byte("d"), Mode: 0o040755}}},
		"bad path":     {TakenAtUnix: 1, Files: []ReviewFile{{Path: []byte("/etc/passwd"), Mode: 0o100644}}},
	} {
		t.Run("refused: "+name, func(t *testing.T) {
			err := s.Update(func(tx *Tx) error { return tx.PutReviewBaseline(b) })
			if !errors.Is(err, store.ErrInvalidRecord) {
				t.Errorf("PutReviewBaseline: %v, want ErrInvalidRecord", err)
			}
		})
	}
}
