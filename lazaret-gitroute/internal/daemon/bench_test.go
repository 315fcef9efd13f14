package daemon_test

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"lazaret.dev/pkg/gitroute"
)

// benchEnv mounts a view over a fresh repository for a benchmark.
func benchEnv(b *testing.B, populate func(root string)) *env {
	b.Helper()
	requireFUSE(b)
	base := b.TempDir()
	e := &env{host: filepath.Join(base, "ws"), iso: filepath.Join(base, "iso"), mnt: filepath.Join(base, "mnt"), home: filepath.Join(base, "home"), log: &bytes.Buffer{}}
	for _, d := range []string{e.host, e.iso, e.mnt, e.home} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			b.Fatal(err)
		}
	}
	e.git(b, e.host, "init", "-q", ".")
	writeFile(b, filepath.Join(e.host, ".gitignore"), "*.log\nnode_modules/\n")
	populate(e.host)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	d, err := gitroute.Start(ctx, gitroute.Spec{Binary: binary, HostRoot: e.host, IsolatedRoot: e.iso, Mountpoint: e.mnt, Stderr: e.log,
		Env: []string{"PATH=" + os.Getenv("PATH"), "HOME=" + e.home}})
	if err != nil {
		b.Fatalf("Start: %v\n%s", err, e.log)
	}
	e.d = d
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := d.Release(ctx); err != nil {
			b.Errorf("Release: %v", err)
		}
	})
	return e
}

// compare runs op against the host and the view b.N times each and
// reports both times and their ratio (view/host).
func compare(b *testing.B, e *env, op func(b *testing.B, root string)) {
	b.ReportAllocs()
	op(b, e.host) // warm both caches
	op(b, e.mnt)
	var host, view time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		op(b, e.host)
		t1 := time.Now()
		op(b, e.mnt)
		host += t1.Sub(t0)
		view += time.Since(t1)
	}
	b.ReportMetric(float64(host.Nanoseconds())/float64(b.N), "host-ns/op")
	b.ReportMetric(float64(view.Nanoseconds())/float64(b.N), "view-ns/op")
	b.ReportMetric(float64(view)/float64(host), "view/host")
}

const bigSize = 64 << 20

func BenchmarkReadThroughput(b *testing.B) {
	e := benchEnv(b, func(root string) {
		writeFile(b, filepath.Join(root, "big.bin"), string(bytes.Repeat([]byte{7}, bigSize)))
	})
	buf := make([]byte, 1<<20)
	b.SetBytes(bigSize)
	compare(b, e, func(b *testing.B, root string) {
		f, err := os.Open(filepath.Join(root, "big.bin"))
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		for {
			n, err := f.Read(buf)
			if n == 0 || err != nil {
				return
			}
		}
	})
}

// BenchmarkWriteThroughput writes a bigSize file in 1 MiB writes: the
// view's maximum write size decides how many FUSE requests that takes.
func BenchmarkWriteThroughput(b *testing.B) {
	e := benchEnv(b, func(string) {})
	buf := bytes.Repeat([]byte{7}, 1<<20)
	b.SetBytes(bigSize)
	compare(b, e, func(b *testing.B, root string) {
		f, err := os.Create(filepath.Join(root, "written.bin"))
		if err != nil {
			b.Fatal(err)
		}
		for n := 0; n < bigSize; n += len(buf) {
			if _, err := f.Write(buf); err != nil {
				b.Fatal(err)
			}
		}
		if err := f.Close(); err != nil {
			b.Fatal(err)
		}
	})
}

func BenchmarkWriteSmallFiles(b *testing.B) {
	e := benchEnv(b, func(string) {})
	data := bytes.Repeat([]byte("x"), 4096)
	round := 0
	compare(b, e, func(b *testing.B, root string) {
		round++
		dir := filepath.Join(root, fmt.Sprintf("w%d", round))
		if err := os.Mkdir(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		for i := 0; i < 200; i++ {
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%d", i)), data, 0o644); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkStatWalk(b *testing.B) {
	e := benchEnv(b, func(root string) {
		for i := 0; i < 5000; i++ {
			writeFile(b, filepath.Join(root, fmt.Sprintf("d%02d/s%d/f%d.txt", i%50, i%7, i)), "x")
		}
	})
	compare(b, e, func(b *testing.B, root string) {
		n := 0
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.Name() == ".git" {
				return filepath.SkipDir
			}
			if _, err := os.Lstat(p); err != nil {
				return err
			}
			n++
			return nil
		})
		if err != nil || n < 5000 {
			b.Fatalf("walk: %d entries, %v", n, err)
		}
	})
}

// BenchmarkCreateAsGVisor creates 200 small files with the host calls
// gVisor's directfs makes for a create in the sandbox
// (directfs_inode.go openCreate and getCreatedChild): an exclusive
// create, a second open of the new file as its control descriptor, an
// fchownat of that descriptor to the creating user, an fstat, then a
// write through the created descriptor and both closes.
func BenchmarkCreateAsGVisor(b *testing.B) {
	e := benchEnv(b, func(string) {})
	data := []byte("small file\n")
	uid, gid := os.Getuid(), os.Getgid()
	round := 0
	compare(b, e, func(b *testing.B, root string) {
		round++
		dir := filepath.Join(root, fmt.Sprintf("c%d", round))
		if err := os.Mkdir(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		dfd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY, 0)
		if err != nil {
			b.Fatal(err)
		}
		defer unix.Close(dfd)
		var st unix.Stat_t
		for i := 0; i < 200; i++ {
			name := fmt.Sprintf("f%d", i)
			fd, err := unix.Openat(dfd, name, unix.O_CREAT|unix.O_EXCL|unix.O_RDWR|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
			if err != nil {
				b.Fatal(err)
			}
			cfd, err := unix.Openat(dfd, name, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if err != nil {
				b.Fatal(err)
			}
			if err := unix.Fchownat(cfd, "", uid, gid, unix.AT_EMPTY_PATH|unix.AT_SYMLINK_NOFOLLOW); err != nil {
				b.Fatal(err)
			}
			if err := unix.Fstat(cfd, &st); err != nil {
				b.Fatal(err)
			}
			if _, err := unix.Write(fd, data); err != nil {
				b.Fatal(err)
			}
			unix.Close(fd)
			unix.Close(cfd)
		}
	})
}
