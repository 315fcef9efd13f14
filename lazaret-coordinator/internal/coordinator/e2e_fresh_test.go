package coordinator

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// freshBound is how long the sandbox may see a host change late: the
// view's documented bound (docs/WORKSPACE.md, "Caching": one second where
// a directory has no watch, milliseconds where it has) plus a margin for a
// loaded machine. It is a correctness deadline, not a measurement.
const freshBound = 5 * time.Second

// TestServeEndToEndWorkspaceViewFollowsHostEdits edits, renames and
// deletes files on the host while a real sandbox keeps reading them
// through the view (whose kernel caches last an hour, invalidated by its
// watcher) and gVisor's own dentry cache, and checks that the sandbox
// sees each change within freshBound and never the host's ignored files.
func TestServeEndToEndWorkspaceViewFollowsHostEdits(t *testing.T) {
	if !enterInternet(t) {
		return
	}
	e := newEnv(t)
	e.gitWorkspace(t)
	e.writeHostFiles(t, map[string]string{"dir/watched": "v0\n"})
	h := e.start(t, time.Second)
	c, session := e.client(t)
	host := func(rel string) string { return filepath.Join(e.workspace, rel) }

	// sees runs a shell loop inside the sandbox until cond holds, reading
	// through the view each time, and fails after freshBound.
	sees := func(t *testing.T, what, cond string) {
		t.Helper()
		tries := int(freshBound / (20 * time.Millisecond))
		script := fmt.Sprintf("i=0; until %s; do i=$((i+1)); [ $i -ge %d ] && exit 3; usleep 20000; done; echo seen after $i", cond, tries)
		out, errs, x := execute(t, c, session(), "/bin/sh", "-c", script)
		if code(x) != 0 {
			t.Fatalf("the sandbox did not see %s within %v: %q %q %+v", what, freshBound, out, errs, x)
		}
	}
	// Warm every cache: gVisor's dentries and the kernel's entries,
	// attributes and pages of the view.
	sees(t, "the first version", `[ "$(cat /workspace/dir/watched)" = v0 ]`)
	sees(t, "a negative entry", `! [ -e /workspace/dir/later ] && ! [ -e /workspace/newdir/file ]`)

	for i := 1; i <= 12; i++ {
		want := fmt.Sprintf("v%d", i)
		switch i % 4 {
		case 0: // an edit in place, same size class
			if err := os.WriteFile(host("dir/watched"), []byte(want+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		case 1: // an editor's save: a new file renamed over the old
			tmp := host("dir/.watched.tmp")
			if err := os.WriteFile(tmp, []byte(want+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(tmp, host("dir/watched")); err != nil {
				t.Fatal(err)
			}
		case 2: // deleted, seen gone, then made again
			if err := os.Remove(host("dir/watched")); err != nil {
				t.Fatal(err)
			}
			sees(t, "the file deleted", `! [ -e /workspace/dir/watched ]`)
			if err := os.WriteFile(host("dir/watched"), []byte(want+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		case 3: // an append that grows the file
			f, err := os.OpenFile(host("dir/watched"), os.O_WRONLY|os.O_TRUNC, 0)
			if err != nil {
				t.Fatal(err)
			}
			_, err = f.WriteString(want + "\n" + strings.Repeat("x", 8192*i) + "\n")
			f.Close()
			if err != nil {
				t.Fatal(err)
			}
		}
		sees(t, want, fmt.Sprintf(`[ "$(head -n 1 /workspace/dir/watched)" = %s ]`, want))
	}

	t.Run("new file after a negative entry", func(t *testing.T) {
		e.writeHostFiles(t, map[string]string{"dir/later": "later\n"})
		sees(t, "dir/later", `[ "$(cat /workspace/dir/later)" = later ]`)
	})
	t.Run("new directory and file", func(t *testing.T) {
		e.writeHostFiles(t, map[string]string{"newdir/file": "nested\n"})
		sees(t, "newdir/file", `[ "$(cat /workspace/newdir/file)" = nested ]`)
	})
	t.Run("renamed directory", func(t *testing.T) {
		if err := os.Rename(host("newdir"), host("moved")); err != nil {
			t.Fatal(err)
		}
		sees(t, "the rename", `! [ -e /workspace/newdir ] && [ "$(cat /workspace/moved/file)" = nested ]`)
	})
	t.Run("new ignored host file stays invisible", func(t *testing.T) {
		e.writeHostFiles(t, map[string]string{"build/late.o": "host-late\n", "dir/.env": "SECRET=late\n"})
		// A change the sandbox must see, made after the ignored ones: once
		// it shows, the watcher has handled the ignored files too.
		e.writeHostFiles(t, map[string]string{"dir/marker": "m\n"})
		sees(t, "dir/marker", `[ -e /workspace/dir/marker ]`)
		out, _, x := execute(t, c, session(), "/bin/sh", "-c", "cat /workspace/build/late.o /workspace/dir/.env; ls -a /workspace/build /workspace/dir")
		if strings.Contains(out, "host-late") || strings.Contains(out, "SECRET=late") || strings.Contains(out, "late.o") || strings.Contains(out, ".env") {
			t.Errorf("the sandbox sees a host-ignored file: %q %+v", out, x)
		}
	})
	c.Close()
	waitExit(t, e, h)
	checkNothingLeft(t, e)
	if t.Failed() || os.Getenv("LZ_E2E_DUMP_LOG") != "" {
		t.Log(e.log(t))
	}
}
