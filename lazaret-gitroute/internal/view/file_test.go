package view

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// backingFds counts this process's descriptors open on host/name.
func backingFds(t *testing.T, target string) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if l, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil && strings.TrimSuffix(l, " (deleted)") == target {
			n++
		}
	}
	return n
}

// eventually waits for the daemon side of an asynchronous request (a
// release) to show; it fails after a generous deadline.
func eventually(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !ok(); {
		if time.Now().After(deadline) {
			t.Fatalf("%s: still not so after 10s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestOpenIsLazy(t *testing.T) {
	var host string
	_, mnt, _ := mounted(t, func(h string) {
		host = h
		for _, n := range []string{"f", "g", "h"} {
			if err := os.WriteFile(filepath.Join(h, n), []byte("content of "+n), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	})

	t.Run("open holds nothing until read", func(t *testing.T) {
		target := filepath.Join(host, "f")
		f, err := os.Open(filepath.Join(mnt, "f"))
		if err != nil {
			t.Fatal(err)
		}
		if n := backingFds(t, target); n != 0 {
			t.Errorf("after open: %d backing descriptors, want 0", n)
		}
		buf := make([]byte, 64)
		k, err := f.Read(buf)
		if err != nil || string(buf[:k]) != "content of f" {
			t.Fatalf("read %q, %v", buf[:k], err)
		}
		if n := backingFds(t, target); n != 1 {
			t.Errorf("after read: %d backing descriptors, want 1", n)
		}
		f.Close()
		eventually(t, "backing closed on release", func() bool { return backingFds(t, target) == 0 })
	})

	t.Run("write through a lazy file", func(t *testing.T) {
		f, err := os.OpenFile(filepath.Join(mnt, "g"), os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteString("!"); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(filepath.Join(host, "g")); string(b) != "content of g!" {
			t.Errorf("host holds %q", b)
		}
	})

	t.Run("unlinked before first read", func(t *testing.T) {
		f, err := os.Open(filepath.Join(mnt, "h"))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := os.Remove(filepath.Join(mnt, "h")); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 64)
		k, err := f.Read(buf)
		if err != nil || string(buf[:k]) != "content of h" {
			t.Fatalf("read after unlink %q, %v", buf[:k], err)
		}
		var st unix.Stat_t
		if err := unix.Fstat(int(f.Fd()), &st); err != nil || st.Size != int64(len("content of h")) {
			t.Errorf("fstat after unlink: size %d, %v", st.Size, err)
		}
	})

	t.Run("replaced on the host before first read", func(t *testing.T) {
		p := filepath.Join(host, "r")
		if err := os.WriteFile(p, []byte("old"), 0o644); err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(filepath.Join(mnt, "r"))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		// The old file stays linked elsewhere, so the new one cannot
		// reuse its inode number.
		if err := os.Rename(p, filepath.Join(host, "kept")); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("new"), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err = f.Read(make([]byte, 8))
		if !errors.Is(err, unix.ESTALE) {
			t.Errorf("read of a replaced file: %v, want ESTALE", err)
		}
	})
}
