package build

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

func tree(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(dir, "bin"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "bin", "busybox"), []byte("ELF"), 0o755))
	must(os.Symlink("busybox", filepath.Join(dir, "bin", "sh")))
	must(os.Link(filepath.Join(dir, "bin", "busybox"), filepath.Join(dir, "bin", "hard")))
	return dir
}

func TestLayerTar(t *testing.T) {
	dir := tree(t)
	stamp := time.Unix(1600000000, 0)
	var a, b bytes.Buffer
	if err := LayerTar(dir, &a, Options{Time: stamp}); err != nil {
		t.Fatal(err)
	}
	if err := LayerTar(dir, &b, Options{Time: stamp}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatal("layer tar is not reproducible")
	}
	tr := tar.NewReader(&a)
	var got []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, string(h.Typeflag)+" "+h.Name+" "+h.Linkname)
		if h.Uid != 0 || h.Gid != 0 || !h.ModTime.Equal(stamp) {
			t.Errorf("%s: owner %d:%d mtime %v", h.Name, h.Uid, h.Gid, h.ModTime)
		}
	}
	want := []string{"5 bin/ ", "0 bin/busybox ", "1 bin/hard bin/busybox", "2 bin/sh busybox"}
	if !slices.Equal(got, want) {
		t.Fatalf("entries\n got %q\nwant %q", got, want)
	}
}

func TestLayerTarRefusesSocket(t *testing.T) {
	dir := t.TempDir()
	l, err := net.Listen("unix", filepath.Join(dir, "sock"))
	if err != nil {
		t.Skipf("unix sockets unavailable: %v", err)
	}
	defer l.Close()
	if err := LayerTar(dir, io.Discard, Options{}); !errors.Is(err, ErrSource) {
		t.Fatalf("error %v, want ErrSource", err)
	}
}

func TestImage(t *testing.T) {
	l, err := Layer(tree(t), Options{Time: time.Unix(1, 0)})
	if err != nil {
		t.Fatal(err)
	}
	img, err := Image([]v1.Layer{l}, Config{Entrypoint: []string{"/bin/sh"}, Env: []string{"PATH=/bin"}, User: "0:0", WorkingDir: "/"})
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.OS != "linux" || cf.Config.Entrypoint[0] != "/bin/sh" || cf.Config.User != "0:0" || len(cf.RootFS.DiffIDs) != 1 {
		t.Fatalf("config %+v", cf)
	}
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if m.MediaType != "application/vnd.oci.image.manifest.v1+json" || m.Layers[0].MediaType != "application/vnd.oci.image.layer.v1.tar+gzip" {
		t.Fatalf("media types %q %q", m.MediaType, m.Layers[0].MediaType)
	}
	d1, _ := img.Digest()
	img2, _ := Image([]v1.Layer{l}, Config{Entrypoint: []string{"/bin/sh"}, Env: []string{"PATH=/bin"}, User: "0:0", WorkingDir: "/"})
	if d2, _ := img2.Digest(); d1 != d2 {
		t.Fatalf("image digest not reproducible: %s %s", d1, d2)
	}
}
