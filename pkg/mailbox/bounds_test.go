package mailbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"lazaret.dev/pkg/protocol"
)

// TestDrainRemovesDirectoriesOnce: directories named like requests, empty
// or holding a tree, and junk files are removed in one drain, each with
// one log line; the next drain logs nothing.
func TestDrainRemovesDirectoriesOnce(t *testing.T) {
	root, out, _, logs := newBox(t)
	dir := filepath.Join(root, OutboxDir)
	for i := range 50 {
		if err := os.Mkdir(filepath.Join(dir, Name{testID(byte(i)), KindRequest, 0}.String()), 0o755); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, fmt.Sprintf("junk-%d", i)), []byte("junk"), 0o600)
	}
	tree := filepath.Join(dir, Name{testID(200), KindAck, 3}.String())
	deep := filepath.Join(tree, "a", "b", "c")
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(deep, "f"), []byte("x"), 0o600)
	os.Symlink("/etc", filepath.Join(tree, "a", "etc"))
	unix.Mkfifo(filepath.Join(dir, "fifo"), 0o600)
	handled := 0
	if err := out.Drain(func(Entry) { handled++ }); err != nil {
		t.Fatal(err)
	}
	if handled != 0 {
		t.Errorf("handled %d entries, want none", handled)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Fatalf("left in the outbox: %v", left)
	}
	if n := strings.Count(logs.String(), "\n"); n != 102 {
		t.Errorf("%d log lines for 102 entries:\n%s", n, logs)
	}
	if _, err := os.Stat("/etc/passwd"); err != nil {
		t.Fatal("a symbolic link in a removed tree was followed")
	}
	logs.Reset()
	if err := out.Drain(func(Entry) {}); err != nil {
		t.Fatal(err)
	}
	if logs.Len() != 0 {
		t.Errorf("a second drain logged:\n%s", logs)
	}
}

// TestDrainReportsStuckEntryOnce: an entry the host cannot remove (a
// tree deeper than it descends) is reported once, not on every drain.
func TestDrainReportsStuckEntryOnce(t *testing.T) {
	root, out, _, logs := newBox(t)
	dir := filepath.Join(root, OutboxDir)
	p := filepath.Join(dir, Name{testID(1), KindRequest, 0}.String())
	for range maxRemoveDepth + 2 {
		p = filepath.Join(p, "d")
	}
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := out.Drain(func(Entry) {}); err != nil {
			t.Fatal(err)
		}
	}
	if n := strings.Count(logs.String(), "\n"); n != 1 || !strings.Contains(logs.String(), "deeper than") {
		t.Errorf("%d log lines for one stuck entry over three drains, want 1 naming the depth:\n%s", n, logs)
	}
}

// TestOutboxBounds: a write past MaxEntries is refused with ErrFull; the
// host's sweep removes temporary files past the bounds and oversized ones
// with one line.
func TestOutboxBounds(t *testing.T) {
	root, out, in, logs := newBox(t)
	dir := filepath.Join(root, OutboxDir)
	for i := range MaxEntries {
		os.WriteFile(filepath.Join(dir, fmt.Sprintf("%s%d", TempPrefix, i)), []byte("x"), 0o600)
	}
	rec := record(protocol.RecordMailboxRequest, "ok")
	err := out.Write(Name{testID(1), KindRequest, 0}, &rec)
	if !errors.Is(err, ErrFull) || !strings.Contains(err.Error(), fmt.Sprintf("holds %d entries", MaxEntries)) {
		t.Fatalf("write into a full outbox: %v, want ErrFull with the count", err)
	}
	// The inbox is the host's: no bound.
	res := record(protocol.RecordMailboxResult, "r")
	if err := in.Write(Name{testID(1), KindResult, 0}, &res); err != nil {
		t.Fatalf("inbox write: %v", err)
	}
	os.WriteFile(filepath.Join(dir, TempPrefix+"huge"), make([]byte, MaxFileBytes+1), 0o600)
	for i := range 10 {
		os.WriteFile(filepath.Join(dir, fmt.Sprintf("%sextra%d", TempPrefix, i)), []byte("x"), 0o600)
	}
	if err := out.Drain(func(Entry) {}); err != nil {
		t.Fatal(err)
	}
	left, _ := os.ReadDir(dir)
	if len(left) != MaxEntries {
		t.Errorf("%d entries left after the sweep, want %d", len(left), MaxEntries)
	}
	if _, err := os.Stat(filepath.Join(dir, TempPrefix+"huge")); err == nil {
		t.Error("an oversized temporary file was kept")
	}
	if n := strings.Count(logs.String(), "past its bounds"); n != 1 {
		t.Errorf("%d lines about the bounds, want 1:\n%s", n, logs)
	}
	if err := out.Write(Name{testID(1), KindRequest, 0}, &rec); !errors.Is(err, ErrFull) {
		t.Errorf("write at the bound: %v, want ErrFull", err)
	}
}
