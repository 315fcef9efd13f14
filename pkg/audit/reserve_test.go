package audit

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"lazaret.dev/pkg/testgate"
)

func TestAdmitAllocatesReserve(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.audit")
	w, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.Append(completed()); err != nil {
		t.Fatal(err)
	}
	if err := w.Admit(); err != nil {
		var s unix.Statfs_t
		unix.Statfs(path, &s)
		if errors.Is(err, ErrNoSpace) && s.Bavail*uint64(s.Bsize) < Reserve {
			t.Skipf("skipping: the test directory's file system is nearly full: %v", err)
		}
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(path)
	if st.Blocks*512 < Reserve && !noFallocate(t, path) {
		t.Errorf("%d bytes allocated for a log of %d bytes, want the reserve of %d past its end", st.Blocks*512, fi.Size(), Reserve)
	}
	if got, err := Read(path); err != nil || len(got) != 1 {
		t.Errorf("Read after Admit: %d records, %v; the reserve must not change the file's content", len(got), err)
	}
}

// noFallocate reports whether the file system of path lacks fallocate.
func noFallocate(t *testing.T, path string) bool {
	fd, err := unix.Open(path, unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	return unix.Fallocate(fd, unix.FALLOC_FL_KEEP_SIZE, 0, 1) == unix.EOPNOTSUPP
}

func TestAdmitRefuses(t *testing.T) {
	if err := checkFree("/x.audit", func(s *unix.Statfs_t) error { s.Bsize, s.Bavail = 4096, Reserve/4096-1; return nil }); !errors.Is(err, ErrNoSpace) {
		t.Errorf("checkFree one block short of the reserve = %v, want ErrNoSpace", err)
	}
	if err := checkFree("/x.audit", func(s *unix.Statfs_t) error { s.Bsize, s.Bavail = 4096, Reserve/4096; return nil }); err != nil {
		t.Errorf("checkFree with exactly the reserve free = %v", err)
	}
	path := filepath.Join(t.TempDir(), "x.audit")
	w, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	if err := w.Admit(); !errors.Is(err, ErrClosed) {
		t.Errorf("Admit after Close = %v, want ErrClosed", err)
	}
}

// TestAdmitOnFullFileSystem fills a small tmpfs: Admit refuses with
// ErrNoSpace, records of a request admitted before still fit in the
// reserve, and Admit succeeds again once space is freed.
func TestAdmitOnFullFileSystem(t *testing.T) {
	dir := testgate.Tmpfs(t, "16m")
	path := filepath.Join(dir, "x.audit")
	w, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.Admit(); err != nil {
		t.Fatal(err)
	}
	fill := testgate.Fill(t, dir)
	if err := w.Admit(); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("Admit on a full file system = %v, want ErrNoSpace", err)
	}
	for range 20 {
		if err := w.Append(completed()); err != nil {
			t.Fatalf("an append within the reserve failed on the full file system: %v", err)
		}
	}
	os.Remove(fill)
	if err := w.Admit(); err != nil {
		t.Errorf("Admit after space was freed = %v", err)
	}
}
