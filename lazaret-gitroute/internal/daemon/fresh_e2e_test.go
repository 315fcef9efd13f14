package daemon_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// staleBound is the documented bound on how long the view may show what
// the host has changed (docs/WORKSPACE.md, "Caching"); staleMargin is
// added before a test fails, for a loaded machine. Neither is a speed
// measurement: the tests wait for the change and fail only past both.
const (
	staleBound  = time.Second
	staleMargin = 4 * time.Second
)

// within polls check until it reports true, failing after the bound plus
// the margin with what it last saw.
func within(t *testing.T, what string, check func() (string, bool)) {
	t.Helper()
	deadline := time.Now().Add(staleBound + staleMargin)
	for {
		seen, ok := check()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still %s after %v", what, seen, staleBound+staleMargin)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// shows reports whether path reads as want ("" with absent: the path does
// not exist).
func shows(path, want string, absent bool) func() (string, bool) {
	return func() (string, bool) {
		b, err := os.ReadFile(path)
		if absent {
			return fmt.Sprintf("%q, %v", b, err), errors.Is(err, os.ErrNotExist)
		}
		return fmt.Sprintf("%q, %v", b, err), err == nil && string(b) == want
	}
}

// TestHostChangesReachTheView: the view caches entries, attributes,
// negative entries and pages for long, and every change made on the host
// (edit, rename, delete, new file, new directory, a commit) shows through
// it within the bound, while new ignored host files stay invisible.
func TestHostChangesReachTheView(t *testing.T) {
	e := setup(t, map[string]string{
		".gitignore": "*.log\n",
		"a.txt":      "a0\n",
		"r.txt":      "r0\n",
		"gone.txt":   "gone\n",
		"d/x.txt":    "x0\n",
		"d/y.txt":    "y0\n",
		"mv/in.txt":  "in0\n",
		"loop/f.txt": "v0\n",
		"keep/k.txt": "k\n",
	}, "")
	h, v := e.host, e.mnt

	t.Run("edit", func(t *testing.T) {
		if got := readFile(t, filepath.Join(v, "a.txt")); got != "a0\n" {
			t.Fatalf("a.txt = %q", got)
		}
		writeFile(t, filepath.Join(h, "a.txt"), "a1\n") // same size
		within(t, "a.txt after a same-size host edit", shows(filepath.Join(v, "a.txt"), "a1\n", false))
		writeFile(t, filepath.Join(h, "a.txt"), "a2 longer\n")
		within(t, "a.txt after a host edit", shows(filepath.Join(v, "a.txt"), "a2 longer\n", false))
	})

	t.Run("rename", func(t *testing.T) {
		readFile(t, filepath.Join(v, "r.txt"))
		if err := os.Rename(filepath.Join(h, "r.txt"), filepath.Join(h, "r2.txt")); err != nil {
			t.Fatal(err)
		}
		within(t, "r.txt after a host rename", shows(filepath.Join(v, "r.txt"), "", true))
		within(t, "r2.txt after a host rename", shows(filepath.Join(v, "r2.txt"), "r0\n", false))
	})

	t.Run("delete", func(t *testing.T) {
		readFile(t, filepath.Join(v, "gone.txt"))
		if err := os.Remove(filepath.Join(h, "gone.txt")); err != nil {
			t.Fatal(err)
		}
		within(t, "gone.txt after a host delete", shows(filepath.Join(v, "gone.txt"), "", true))
	})

	t.Run("new file in a listed directory", func(t *testing.T) {
		if _, err := os.ReadDir(filepath.Join(v, "d")); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Lstat(filepath.Join(v, "d/new.txt")); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("d/new.txt before the host made it: %v", err) // now a cached negative entry
		}
		writeFile(t, filepath.Join(h, "d/new.txt"), "new\n")
		within(t, "d/new.txt after the host made it", shows(filepath.Join(v, "d/new.txt"), "new\n", false))
		within(t, "listing of d", func() (string, bool) {
			ents, err := os.ReadDir(filepath.Join(v, "d"))
			var names []string
			for _, e := range ents {
				names = append(names, e.Name())
			}
			return fmt.Sprint(names, err), err == nil && len(names) == 3
		})
	})

	t.Run("new ignored file stays invisible", func(t *testing.T) {
		if _, err := os.Lstat(filepath.Join(v, "d/secret.log")); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("d/secret.log before the host made it: %v", err)
		}
		writeFile(t, filepath.Join(h, "d/secret.log"), "host secret\n")
		writeFile(t, filepath.Join(h, "d/after.txt"), "after\n")
		// Once the file made after it shows, the watcher has handled both.
		within(t, "d/after.txt", shows(filepath.Join(v, "d/after.txt"), "after\n", false))
		if b, err := os.ReadFile(filepath.Join(v, "d/secret.log")); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("the host's new ignored file shows in the view: %q, %v", b, err)
		}
	})

	t.Run("new directory and a file inside", func(t *testing.T) {
		if _, err := os.Lstat(filepath.Join(v, "nd")); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("nd before the host made it: %v", err)
		}
		writeFile(t, filepath.Join(h, "nd/sub/f.txt"), "f0\n")
		within(t, "nd/sub/f.txt", shows(filepath.Join(v, "nd/sub/f.txt"), "f0\n", false))
		// The new directories are watched in turn.
		if _, err := os.Lstat(filepath.Join(v, "nd/sub/g.txt")); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("nd/sub/g.txt before the host made it: %v", err)
		}
		writeFile(t, filepath.Join(h, "nd/sub/g.txt"), "g0\n")
		within(t, "nd/sub/g.txt", shows(filepath.Join(v, "nd/sub/g.txt"), "g0\n", false))
		writeFile(t, filepath.Join(h, "nd/sub/f.txt"), "f1 edited\n")
		within(t, "nd/sub/f.txt after an edit", shows(filepath.Join(v, "nd/sub/f.txt"), "f1 edited\n", false))
	})

	t.Run("renamed directory keeps being watched", func(t *testing.T) {
		readFile(t, filepath.Join(v, "mv/in.txt"))
		if err := os.Rename(filepath.Join(h, "mv"), filepath.Join(h, "mv2")); err != nil {
			t.Fatal(err)
		}
		within(t, "mv/in.txt after the host renamed mv", shows(filepath.Join(v, "mv/in.txt"), "", true))
		within(t, "mv2/in.txt", shows(filepath.Join(v, "mv2/in.txt"), "in0\n", false))
		writeFile(t, filepath.Join(h, "mv2/in.txt"), "in1 edited\n")
		within(t, "mv2/in.txt after an edit", shows(filepath.Join(v, "mv2/in.txt"), "in1 edited\n", false))
		if _, err := os.Lstat(filepath.Join(v, "mv2/later.txt")); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("mv2/later.txt before the host made it: %v", err)
		}
		writeFile(t, filepath.Join(h, "mv2/later.txt"), "later\n")
		within(t, "mv2/later.txt", shows(filepath.Join(v, "mv2/later.txt"), "later\n", false))
	})

	t.Run("host commit", func(t *testing.T) {
		ref := filepath.Join(v, ".git/refs/heads/main")
		before := readFile(t, ref)
		writeFile(t, filepath.Join(h, "keep/k.txt"), "k committed\n")
		e.git(t, h, "commit", "-q", "-am", "on the host")
		after := readFile(t, filepath.Join(h, ".git/refs/heads/main"))
		if after == before {
			t.Fatal("the host commit did not move main")
		}
		within(t, ".git/refs/heads/main after a host commit", shows(ref, after, false))
	})

	t.Run("edit rename delete loop while reading", func(t *testing.T) {
		f := filepath.Join(v, "loop/f.txt")
		var stop atomic.Bool
		var wg sync.WaitGroup
		var reads atomic.Int64
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for !stop.Load() {
					_, _ = os.ReadFile(f)
					_, _ = os.ReadDir(filepath.Join(v, "loop"))
					reads.Add(1)
				}
			}()
		}
		defer func() {
			stop.Store(true)
			wg.Wait()
		}()
		hf := filepath.Join(h, "loop/f.txt")
		for i := 1; i <= 60; i++ {
			want := fmt.Sprintf("v%d %s\n", i, strings.Repeat("x", i%7))
			switch i % 3 {
			case 0: // in place
				writeFile(t, hf, want)
			case 1: // an editor's save: write aside, rename over
				writeFile(t, hf+".tmp", want)
				if err := os.Rename(hf+".tmp", hf); err != nil {
					t.Fatal(err)
				}
			case 2: // delete, seen as such, then made anew
				if err := os.Remove(hf); err != nil {
					t.Fatal(err)
				}
				within(t, fmt.Sprintf("loop/f.txt deleted at step %d", i), shows(f, "", true))
				writeFile(t, hf, want)
			}
			within(t, fmt.Sprintf("loop/f.txt at step %d", i), shows(f, want, false))
		}
		t.Logf("%d concurrent reads during the loop", reads.Load())
	})
}
