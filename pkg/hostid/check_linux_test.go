package hostid

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

func TestCheckMount(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"file", "other"} {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	open := func(name string) int {
		fd, err := unix.Open(filepath.Join(dir, name), unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { unix.Close(fd) })
		return fd
	}
	fd := open("file")
	same, err := MountOf(fd)
	if err != nil {
		t.Fatal(err)
	}
	other, err := MountOf(open("other"))
	if err != nil {
		t.Fatal(err)
	}
	otherMount := same
	otherMount.MountID++
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		check func() error
		ok    bool
	}{
		{"identity same", func() error { return CheckMount(fd, "file", same) }, true},
		{"identity other inode", func() error { return CheckMount(fd, "file", other) }, false},
		{"identity other mount", func() error { return CheckMount(fd, "file", otherMount) }, false},
		{"inode same", func() error { return CheckInode(fd, "file", st.Dev, st.Ino) }, true},
		{"inode other", func() error { return CheckInode(fd, "file", st.Dev, st.Ino+1) }, false},
		{"inode other device", func() error { return CheckInode(fd, "file", st.Dev+1, st.Ino) }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.check()
			if tt.ok {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var pe *os.PathError
			if !errors.Is(err, ErrMismatch) || !errors.As(err, &pe) || pe.Path != "file" {
				t.Fatalf("error %v, want an *os.PathError for %q wrapping ErrMismatch", err, "file")
			}
		})
	}
}
