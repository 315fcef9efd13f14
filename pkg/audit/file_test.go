package audit

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"

	"lazaret.dev/pkg/escalation"
	"lazaret.dev/pkg/ids"
	"lazaret.dev/pkg/testgate"
)

// writeLog appends recs to a new log at dir/x.audit and returns its path
// and the records as written (with Prev set).
func writeLog(t *testing.T, recs []Record) (string, []Record) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "x.audit")
	w, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var prev ids.Digest
	var out []Record
	for _, r := range recs {
		if err := w.Append(r); err != nil {
			t.Fatal(err)
		}
		r.Prev = prev
		b, err := r.encode()
		if err != nil {
			t.Fatal(err)
		}
		prev = hash(b)
		out = append(out, r)
	}
	return path, out
}

func TestWriteRead(t *testing.T) {
	path, want := writeLog(t, lifecycle())
	got, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Read\n got %+v\nwant %+v", got, want)
	}
	if got[0].Prev != (ids.Digest{}) {
		t.Errorf("first prev %v, want zeros", got[0].Prev)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfter(data, []byte("\n"))
	if len(lines) != len(want)+1 || len(lines[len(lines)-1]) != 0 {
		t.Fatalf("file has %d pieces, want %d lines each ending in a newline", len(lines), len(want))
	}
	for i := 1; i < len(want); i++ {
		if sum := hash(bytes.TrimSuffix(lines[i-1], []byte("\n"))); got[i].Prev != sum {
			t.Errorf("line %d prev %v, want %v", i+1, got[i].Prev, sum)
		}
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", st.Mode().Perm())
	}
}

func TestReadEmptyAndMissing(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.audit")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	recs, err := Read(empty)
	if err != nil || len(recs) != 0 {
		t.Errorf("Read(empty) = %v, %v; want no records", recs, err)
	}
	if _, err := Read(filepath.Join(dir, "none.audit")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Read(missing) = %v, want fs.ErrNotExist", err)
	}
}

func TestReadDamage(t *testing.T) {
	path, recs := writeLog(t, lifecycle())
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfter(orig, []byte("\n"))
	lines = lines[:len(lines)-1] // the empty piece after the last newline
	join := func(ls ...[]byte) []byte { return bytes.Join(ls, nil) }
	edit := func(n int, old, new string) []byte {
		t.Helper()
		l := lines[n-1]
		if !bytes.Contains(l, []byte(old)) {
			t.Fatalf("line %d has no %q", n, old)
		}
		c := append([][]byte(nil), lines...)
		c[n-1] = bytes.Replace(l, []byte(old), []byte(new), 1)
		return join(c...)
	}
	without := func(n int) []byte {
		c := append([][]byte(nil), lines[:n-1]...)
		return join(append(c, lines[n:]...)...)
	}
	last := len(lines)
	tests := []struct {
		name  string
		data  []byte
		class error
		line  int
		good  int // records returned before the error
		// changed: the last record returned is the edited line, which
		// only its successor's prev could vouch for.
		changed bool
	}{
		{"byte of a middle line, still valid", edit(4, `"build <old>"`, `"build <olf>"`), ErrChainBroken, 5, 4, true},
		{"byte of a middle line, invalid JSON", edit(4, `"argv":[`, `"argv":{`), ErrInvalidRecord, 4, 3, false},
		{"middle line deleted", without(3), ErrChainBroken, 3, 2, false},
		{"first line deleted", without(1), ErrChainBroken, 1, 0, false},
		{"line duplicated", join(append(append([][]byte(nil), lines[:3]...), lines[2:]...)...), ErrChainBroken, 4, 3, false},
		{"lines swapped", join(lines[0], lines[2], lines[1]), ErrChainBroken, 2, 1, false},
		{"last line cut mid-way", orig[:len(orig)-len(lines[last-1])/2], ErrTruncated, last, last - 1, false},
		{"last newline removed", orig[:len(orig)-1], ErrTruncated, last, last - 1, false},
		{"empty line", join(lines[0], []byte("\n"), lines[1]), ErrInvalidRecord, 2, 1, false},
		{"CRLF", edit(2, "}\n", "}\r\n"), ErrInvalidRecord, 2, 1, false},
		{"first prev not zero", edit(1, `"prev":"00`, `"prev":"01`), ErrChainBroken, 1, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "damaged.audit")
			if err := os.WriteFile(p, tt.data, 0o600); err != nil {
				t.Fatal(err)
			}
			got, err := Read(p)
			var le *LineError
			if !errors.As(err, &le) || !errors.Is(err, tt.class) {
				t.Fatalf("Read = %v, want a *LineError of class %v", err, tt.class)
			}
			if le.Line != tt.line || le.Path != p {
				t.Errorf("error names %q line %d, want %q line %d (%v)", le.Path, le.Line, p, tt.line, err)
			}
			if !strings.Contains(err.Error(), fmt.Sprintf("%q line %d", p, tt.line)) {
				t.Errorf("message %q does not name the file and line", err)
			}
			verified := tt.good
			if tt.changed {
				verified--
			}
			if len(got) != tt.good || verified > 0 && !reflect.DeepEqual(got[:verified], recs[:verified]) {
				t.Errorf("Read returned %d records, want the %d before the bad line", len(got), tt.good)
			}
			// A Writer refuses to extend the damaged file, and leaves it
			// byte for byte as it was.
			if w, err := Open(p); !errors.Is(err, tt.class) {
				if w != nil {
					w.Close()
				}
				t.Errorf("Open of the damaged file = %v, want class %v", err, tt.class)
			}
			if after, _ := os.ReadFile(p); !bytes.Equal(after, tt.data) {
				t.Error("Open changed the damaged file")
			}
		})
	}
}

func TestOpenContinuesChain(t *testing.T) {
	recs := lifecycle()
	path, _ := writeLog(t, recs[:3])
	w, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs[3:] {
		if err := w.Append(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(recs) {
		t.Fatalf("%d records, want %d", len(got), len(recs))
	}
	_, want := writeLog(t, recs)
	if !reflect.DeepEqual(got, want) {
		t.Error("a log written in two openings differs from one written in one")
	}
}

func TestWriterRefusesBadRecord(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.audit")
	w, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	bad := completed()
	bad.Argv = nil
	if err := w.Append(bad); !errors.Is(err, ErrInvalidRecord) {
		t.Fatalf("Append = %v, want ErrInvalidRecord", err)
	}
	huge := completed()
	huge.Argv = []string{"/usr/bin/x", strings.Repeat("\x01", MaxLineBytes/6+1)}
	if err := w.Append(huge); !errors.Is(err, ErrInvalidRecord) {
		t.Fatalf("Append of an oversized line = %v, want ErrInvalidRecord", err)
	}
	// A refused record writes nothing and does not stop the Writer.
	if err := w.Append(completed()); err != nil {
		t.Fatal(err)
	}
	if recs, err := Read(path); err != nil || len(recs) != 1 {
		t.Fatalf("Read = %d records, %v; want 1", len(recs), err)
	}
}

func TestWriterClosed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.audit")
	w, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := w.Append(completed()); !errors.Is(err, ErrClosed) {
		t.Errorf("Append after Close = %v, want ErrClosed", err)
	}
}

func TestWriterFailureIsSticky(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.audit")
	w, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	// Put /dev/full under the Writer's descriptor: the write fails with
	// ENOSPC, as on a full disk.
	full, err := unix.Open("/dev/full", unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Skipf("skipping: /dev/full: %v", err)
	}
	w.mu.Lock()
	if err := unix.Dup3(full, w.fd, unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	w.mu.Unlock()
	unix.Close(full)
	err = w.Append(completed())
	if !errors.Is(err, unix.ENOSPC) || errors.Is(err, ErrWriterFailed) {
		t.Fatalf("first failing Append = %v, want the write error ENOSPC", err)
	}
	if err := w.Append(completed()); !errors.Is(err, ErrWriterFailed) {
		t.Fatalf("Append after a failure = %v, want ErrWriterFailed", err)
	}
}

func TestSecondWriterInUse(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.audit")
	w, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Open(path); !errors.Is(err, ErrInUse) {
		t.Fatalf("second Open = %v, want ErrInUse", err)
	}
	if err := w.Append(completed()); err != nil {
		t.Fatal(err)
	}
	// Readers are not kept out by the Writer's lifetime lock.
	if recs, err := Read(path); err != nil || len(recs) != 1 {
		t.Fatalf("Read while open = %d records, %v", len(recs), err)
	}
	w.Close()
	w2, err := Open(path)
	if err != nil {
		t.Fatalf("Open after Close: %v", err)
	}
	w2.Close()
}

func TestReadWaitsForAppend(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.audit")
	w, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	// Hold the data range as an append does; a read must wait, then fail
	// with ErrLocked when the lock outlives its bound.
	if err := lock(w.fd, unix.F_WRLCK, 0, slotOffset, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(path); !errors.Is(err, ErrLocked) {
		t.Fatalf("Read under a write lock = %v, want ErrLocked", err)
	}
	if err := lock(w.fd, unix.F_UNLCK, 0, slotOffset, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(path); err != nil {
		t.Fatal(err)
	}
}

func TestCheckFile(t *testing.T) {
	const uid = 1000
	tests := []struct {
		name  string
		mode  uint32
		owner uint32
		write bool
		want  string
	}{
		{"private file", unix.S_IFREG | 0o600, uid, true, ""},
		{"world-readable file", unix.S_IFREG | 0o644, uid, true, ""},
		{"group-writable", unix.S_IFREG | 0o620, uid, true, "writable by group or others"},
		{"world-writable", unix.S_IFREG | 0o602, uid, true, "writable by group or others"},
		{"other owner", unix.S_IFREG | 0o600, 0, true, "owned by uid 0"},
		{"other owner, reading", unix.S_IFREG | 0o666, 0, false, ""},
		{"directory", unix.S_IFDIR | 0o700, uid, true, "not a regular file"},
		{"FIFO, reading", unix.S_IFIFO | 0o600, uid, false, "not a regular file"},
		{"socket", unix.S_IFSOCK | 0o600, uid, true, "not a regular file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := unix.Stat_t{Mode: tt.mode, Uid: tt.owner}
			err := checkFile("/s/domains/x.audit", &st, uid, tt.write)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("checkFile: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrUnsafeFile) || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), `"/s/domains/x.audit"`) {
				t.Fatalf("checkFile = %v, want ErrUnsafeFile naming the path with %q", err, tt.want)
			}
		})
	}
}

func TestOpenRefusesUnsafeFile(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target.audit")
	if err := os.WriteFile(target, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	mk := func(name string, f func(p string) error) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := f(p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name string
		path string
		want string
	}{
		{"symbolic link", mk("link.audit", func(p string) error { return os.Symlink(target, p) }), "symbolic link"},
		{"directory", mk("dir.audit", func(p string) error { return os.Mkdir(p, 0o700) }), "is a directory"},
		{"FIFO", mk("fifo.audit", func(p string) error { return unix.Mkfifo(p, 0o600) }), "FIFO"},
		{"group-writable", mk("group.audit", func(p string) error {
			if err := os.WriteFile(p, nil, 0o600); err != nil {
				return err
			}
			return os.Chmod(p, 0o620)
		}), "writable by group or others"},
		{"world-writable", mk("world.audit", func(p string) error {
			if err := os.WriteFile(p, nil, 0o600); err != nil {
				return err
			}
			return os.Chmod(p, 0o606)
		}), "writable by group or others"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, err := Open(tt.path)
			if err == nil {
				w.Close()
			}
			if !errors.Is(err, ErrUnsafeFile) || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), tt.path) {
				t.Fatalf("Open = %v, want ErrUnsafeFile naming %q with %q", err, tt.path, tt.want)
			}
		})
	}
	if _, err := Read(filepath.Join(dir, "fifo.audit")); !errors.Is(err, ErrUnsafeFile) {
		t.Errorf("Read of a FIFO = %v, want ErrUnsafeFile", err)
	}
	if _, err := Open(filepath.Join(dir, "missing", "x.audit")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Open in a missing directory = %v, want fs.ErrNotExist", err)
	}
}

func TestOpenRefusesOtherOwner(t *testing.T) {
	testgate.Root(t)
	p := filepath.Join(t.TempDir(), "other.audit")
	if err := os.WriteFile(p, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(p, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	w, err := Open(p)
	if err == nil {
		w.Close()
	}
	if !errors.Is(err, ErrUnsafeFile) || !strings.Contains(err.Error(), "owned by uid 65534") {
		t.Fatalf("Open = %v, want ErrUnsafeFile for the owner", err)
	}
}

func TestConcurrentAppend(t *testing.T) {
	const goroutines, each = 8, 25
	path := filepath.Join(t.TempDir(), "x.audit")
	w, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, goroutines*each)
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				r := completed()
				r.Request = ids.RequestID{byte(g), byte(i)}
				r.Argv = []string{"/usr/bin/echo", fmt.Sprint(g, i)}
				if err := w.Append(r); err != nil {
					errs <- err
				}
			}
		}()
	}
	// A reader running alongside sees only whole lines and a whole chain.
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 20 {
			if _, err := Read(path); err != nil {
				errs <- fmt.Errorf("concurrent Read: %w", err)
			}
		}
	}()
	wg.Wait()
	<-done
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	recs, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != goroutines*each {
		t.Fatalf("%d records, want %d", len(recs), goroutines*each)
	}
	seen := map[ids.RequestID]bool{}
	for _, r := range recs {
		if seen[r.Request] {
			t.Fatalf("request %v written twice", r.Request)
		}
		seen[r.Request] = true
		if r.Phase != escalation.PhaseCompleted {
			t.Fatalf("phase %v", r.Phase)
		}
	}
}

// countFsyncs replaces fsync for the test: it counts the calls and
// returns fail's error (nil: the real fsync).
func countFsyncs(t *testing.T, fail func() error) *atomic.Int32 {
	t.Helper()
	var n atomic.Int32
	orig := fsync
	fsync = func(fd int) error {
		n.Add(1)
		if fail != nil {
			if err := fail(); err != nil {
				return err
			}
		}
		return orig(fd)
	}
	t.Cleanup(func() { fsync = orig })
	return &n
}

// TestWriteThenCommit: Write puts the line in the file at once (a reader
// and a process that outlives the Writer see it) without an fsync;
// Commit makes everything written so far durable with one fsync, and
// none when nothing was written since; Close commits what is left.
func TestWriteThenCommit(t *testing.T) {
	syncs := countFsyncs(t, nil)
	path := filepath.Join(t.TempDir(), "x.audit")
	w, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	opened := syncs.Load()
	for _, r := range lifecycle()[:3] {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	if recs, err := Read(path); err != nil || len(recs) != 3 {
		t.Fatalf("Read after three Writes = %d records, %v", len(recs), err)
	}
	if n := syncs.Load() - opened; n != 0 {
		t.Fatalf("%d fsyncs for three Writes, want 0", n)
	}
	for i := range 2 { // the second Commit has nothing left to sync
		if err := w.Commit(); err != nil {
			t.Fatal(err)
		}
		if n := syncs.Load() - opened; n != 1 {
			t.Fatalf("commit %d: %d fsyncs in all, want 1", i+1, n)
		}
	}
	if err := w.Append(completed()); err != nil {
		t.Fatal(err)
	}
	if n := syncs.Load() - opened; n != 2 {
		t.Fatalf("%d fsyncs after Append, want 2", n)
	}
	if err := w.Write(completed()); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if n := syncs.Load() - opened; n != 3 {
		t.Fatalf("%d fsyncs after Close with a record written since the last commit, want 3", n)
	}
	if recs, err := Read(path); err != nil || len(recs) != 5 {
		t.Fatalf("Read after Close = %d records, %v", len(recs), err)
	}
}

// TestCommitFailureIsSticky: a failed fsync stops the Writer as a failed
// write does, since what it wrote may not be on the disk.
func TestCommitFailureIsSticky(t *testing.T) {
	var fail atomic.Bool
	countFsyncs(t, func() error {
		if fail.Load() {
			return unix.EIO
		}
		return nil
	})
	w, err := Open(filepath.Join(t.TempDir(), "x.audit"))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.Write(completed()); err != nil {
		t.Fatal(err)
	}
	fail.Store(true)
	if err := w.Commit(); !errors.Is(err, unix.EIO) {
		t.Fatalf("Commit = %v, want EIO", err)
	}
	fail.Store(false)
	if err := w.Write(completed()); !errors.Is(err, ErrWriterFailed) {
		t.Fatalf("Write after a failed Commit = %v, want ErrWriterFailed", err)
	}
	if err := w.Commit(); !errors.Is(err, ErrWriterFailed) {
		t.Fatalf("Commit after a failed Commit = %v, want ErrWriterFailed", err)
	}
	if err := w.Admit(); !errors.Is(err, ErrWriterFailed) {
		t.Fatalf("Admit after a failed Commit = %v, want ErrWriterFailed", err)
	}
}

// TestWrittenRecordsSurviveTheWriter: a coordinator that dies between a
// Write and the next Commit leaves every record it wrote in the file (the
// page cache outlives the process), and the next Writer continues the
// chain after them.
func TestWrittenRecordsSurviveTheWriter(t *testing.T) {
	syncs := countFsyncs(t, nil)
	path := filepath.Join(t.TempDir(), "x.audit")
	w, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	opened := syncs.Load()
	recs := lifecycle()
	for _, r := range recs[:2] {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	// Die: the descriptor goes away with the process, without Close's
	// commit.
	w.mu.Lock()
	unix.Close(w.fd)
	w.fd = -1
	w.mu.Unlock()
	if n := syncs.Load() - opened; n != 0 {
		t.Fatalf("%d fsyncs before the death, want 0", n)
	}
	w2, err := Open(path)
	if err != nil {
		t.Fatalf("Open after the death: %v", err)
	}
	if err := w2.Append(recs[2]); err != nil {
		t.Fatal(err)
	}
	if err := w2.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := Read(path)
	if err != nil || len(got) != 3 {
		t.Fatalf("Read = %d records, %v; want 3", len(got), err)
	}
	for i, r := range got {
		if r.Phase != recs[i].Phase {
			t.Errorf("record %d phase %v, want %v", i, r.Phase, recs[i].Phase)
		}
	}
}
