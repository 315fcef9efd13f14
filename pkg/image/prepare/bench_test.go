package prepare

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"lazaret.dev/pkg/image/build"
	"lazaret.dev/pkg/image/store"
)

// benchLayer writes an uncompressed layer of about size bytes: many small
// files in nested directories plus a few large ones, half-compressible
// like real binaries and text. It returns the layer.
func benchLayer(b *testing.B, dir string, seed uint64, size int) v1.Layer {
	b.Helper()
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	p := filepath.Join(dir, fmt.Sprintf("layer-%d.tar", seed))
	f, err := os.Create(p)
	if err != nil {
		b.Fatal(err)
	}
	tw := tar.NewWriter(f)
	chunk := make([]byte, 64<<10)
	fill := func(n int) []byte {
		buf := make([]byte, n)
		for i := 0; i < n; i += len(chunk) {
			for j := 0; j < len(chunk)/2; j++ {
				chunk[j] = byte(rng.Uint32())
			}
			copy(buf[i:], chunk)
		}
		return buf
	}
	mtime := time.Unix(1700000000, 0)
	written := 0
	for d := 0; written < size; d++ {
		dn := fmt.Sprintf("usr/lib/pkg%d/", d)
		tw.WriteHeader(&tar.Header{Name: dn, Typeflag: tar.TypeDir, Mode: 0o755, ModTime: mtime})
		for i := 0; i < 50 && written < size; i++ {
			n := 512 + rng.IntN(32<<10)
			if i == 0 {
				n = 4 << 20
			}
			body := fill(n)
			tw.WriteHeader(&tar.Header{Name: dn + "f" + strconv.Itoa(i), Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(n), ModTime: mtime})
			tw.Write(body)
			written += n
		}
		tw.WriteHeader(&tar.Header{Name: dn + "link", Typeflag: tar.TypeSymlink, Linkname: "f1", ModTime: mtime})
	}
	if err := tw.Close(); err != nil {
		b.Fatal(err)
	}
	f.Close()
	l, err := tarball.LayerFromFile(p, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		b.Fatal(err)
	}
	return l
}

// BenchmarkPrepareVsTar prepares a ~100 MB three-layer image
// ($LAZARET_BENCH_IMAGE_MB overrides the size) and extracts the same
// stored layer blobs with `tar -xzf`, reporting both times and their
// ratio. The artifact is reclaimed between iterations, outside the timing.
func BenchmarkPrepareVsTar(b *testing.B) {
	tarBin, err := exec.LookPath("tar")
	if err != nil {
		b.Skipf("tar not found: %v", err)
	}
	mb := 100
	if v := os.Getenv("LAZARET_BENCH_IMAGE_MB"); v != "" {
		if mb, err = strconv.Atoi(v); err != nil || mb <= 0 {
			b.Fatalf("LAZARET_BENCH_IMAGE_MB=%q: want a positive integer", v)
		}
	}
	work := b.TempDir()
	root := filepath.Join(work, "storage")
	os.Mkdir(root, 0o700)
	s, err := store.Open(filepath.Join(root, "images"), nil)
	if err != nil {
		b.Fatal(err)
	}
	src := filepath.Join(work, "src")
	os.Mkdir(src, 0o700)
	total := mb << 20
	layers := []v1.Layer{
		benchLayer(b, src, 1, total/2),
		benchLayer(b, src, 2, total/4),
		benchLayer(b, src, 3, total/4),
	}
	img, err := build.Image(layers, build.Config{})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := s.Put(context.Background(), "localhost/bench:1", img, nil); err != nil {
		b.Fatal(err)
	}
	os.RemoveAll(src)
	m, err := img.Manifest()
	if err != nil {
		b.Fatal(err)
	}
	p := &Preparer{Root: root, Images: s}
	var prepTotal, tarTotal time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		a, err := p.Prepare(context.Background(), "localhost/bench:1", selfMap())
		if err != nil {
			b.Fatal(err)
		}
		prepTotal += time.Since(start)

		b.StopTimer()
		if err := p.ReclaimArtifact(a.PreparedArtifactID); err != nil {
			b.Fatal(err)
		}
		out := filepath.Join(work, "tar-x")
		if err := os.Mkdir(out, 0o700); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		start = time.Now()
		for _, l := range m.Layers {
			cmd := exec.Command(tarBin, "-xzf", filepath.Join(s.Dir(), "blobs", "sha256", l.Digest.Hex), "-C", out)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Run(); err != nil {
				b.Fatalf("tar -xzf: %v: %s", err, stderr.String())
			}
		}
		tarTotal += time.Since(start)
		b.StopTimer()
		os.RemoveAll(out)
		b.StartTimer()
	}
	n := float64(b.N)
	b.ReportMetric(prepTotal.Seconds()*1000/n, "prepare-ms/op")
	b.ReportMetric(tarTotal.Seconds()*1000/n, "tar-x-ms/op")
	b.ReportMetric(float64(prepTotal)/float64(tarTotal), "prepare/tar-x")
	b.ReportMetric(float64(mb), "image-MiB")
}
