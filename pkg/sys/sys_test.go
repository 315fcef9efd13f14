package sys

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestErrorsNameOperationAndPath(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing")
	cases := []struct {
		name string
		call func() error
		op   string
		path string
		want error
	}{
		{"open", func() error { _, err := Open(missing, unix.O_RDONLY|unix.O_CLOEXEC, 0); return err }, "open", missing, fs.ErrNotExist},
		{"openat", func() error {
			_, err := Openat(unix.AT_FDCWD, missing, unix.O_RDONLY|unix.O_CLOEXEC, 0)
			return err
		}, "openat", missing, unix.ENOENT},
		{"openat2", func() error {
			_, err := Openat2(unix.AT_FDCWD, missing, &unix.OpenHow{Flags: unix.O_RDONLY | unix.O_CLOEXEC})
			return err
		}, "openat2", missing, unix.ENOENT},
		{"fstatat", func() error {
			var st unix.Stat_t
			return Fstatat(unix.AT_FDCWD, missing, &st, unix.AT_SYMLINK_NOFOLLOW)
		}, "fstatat", missing, unix.ENOENT},
		{"statx of a bad descriptor", func() error {
			var st unix.Statx_t
			return Statx(-1, "", unix.AT_EMPTY_PATH, unix.STATX_INO, &st)
		}, "statx", "fd -1", unix.EBADF},
		{"unlinkat", func() error { return Unlinkat(unix.AT_FDCWD, missing, 0) }, "unlinkat", missing, unix.ENOENT},
		{"mkdirat", func() error { return Mkdirat(unix.AT_FDCWD, dir, 0o700) }, "mkdirat", dir, fs.ErrExist},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			var pe *os.PathError
			if !errors.As(err, &pe) || pe.Op != tc.op || pe.Path != tc.path || !errors.Is(err, tc.want) {
				t.Fatalf("error = %#v, want *os.PathError{Op: %q, Path: %q} matching %v", err, tc.op, tc.path, tc.want)
			}
		})
	}
}

func TestDescriptorErrorsNameTheCall(t *testing.T) {
	cases := []struct {
		name    string
		call    func() error
		syscall string
	}{
		{"read", func() error { _, err := Read(-1, make([]byte, 1)); return err }, "read"},
		{"write", func() error { _, err := Write(-1, []byte{0}); return err }, "write"},
		{"fstat", func() error { var st unix.Stat_t; return Fstat(-1, &st) }, "fstat"},
		{"flock", func() error { return Flock(-1, unix.LOCK_EX) }, "flock"},
		{"recvmsg", func() error { _, _, _, err := Recvmsg(-1, make([]byte, 1), nil, 0); return err }, "recvmsg"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			var se *os.SyscallError
			if !errors.As(err, &se) || se.Syscall != tc.syscall || !errors.Is(err, unix.EBADF) {
				t.Fatalf("error = %#v, want *os.SyscallError{Syscall: %q} matching EBADF", err, tc.syscall)
			}
		})
	}
}

func TestSuccessIsNil(t *testing.T) {
	fd, err := Open(t.TempDir(), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := Fstat(fd, &st); err != nil {
		t.Fatalf("Fstat = %v", err)
	}
}

func TestPollTimeout(t *testing.T) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(p[0]); unix.Close(p[1]) })
	start := time.Now()
	n, err := Poll([]unix.PollFd{{Fd: int32(p[0]), Events: unix.POLLIN}}, 30)
	if err != nil || n != 0 {
		t.Fatalf("Poll = %d, %v; want a timeout", n, err)
	}
	if d := time.Since(start); d < 25*time.Millisecond {
		t.Fatalf("Poll returned after %v, want about 30ms", d)
	}
	if _, err := Write(p[1], []byte{1}); err != nil {
		t.Fatal(err)
	}
	if n, err := Poll([]unix.PollFd{{Fd: int32(p[0]), Events: unix.POLLIN}}, -1); err != nil || n != 1 {
		t.Fatalf("Poll on a readable pipe = %d, %v", n, err)
	}
}
