package daemon_test

import (
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// One open directory handle, read, then rewound with lseek(0) as gVisor's
// gofer does for every getdents: a file made in between must be listed.
func TestRewindSeesNewEntries(t *testing.T) {
	e := setup(t, map[string]string{"a": "a\n"}, "")
	fd, err := unix.Open(e.mnt, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	names := func() map[string]bool {
		if _, err := unix.Seek(fd, 0, 0); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 1<<16)
		got := map[string]bool{}
		for {
			n, err := unix.Getdents(fd, buf)
			if err != nil {
				t.Fatal(err)
			}
			if n == 0 {
				return got
			}
			_, _, ns := unix.ParseDirent(buf[:n], -1, nil)
			for _, s := range ns {
				got[s] = true
			}
		}
	}
	if !names()["a"] {
		t.Fatal("a not listed")
	}
	writeFile(t, filepath.Join(e.mnt, "new"), "n\n")
	if got := names(); !got["new"] {
		t.Fatalf("after lseek(0) the listing is %v, lacks new", got)
	}
}
