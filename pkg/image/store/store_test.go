package store_test

import (
	"archive/tar"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"lazaret.dev/pkg/image/build"
	"lazaret.dev/pkg/image/store"
)

func testImage(t *testing.T, content string) v1.Image {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "etc", "motd"), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := build.Layer(dir, build.Options{Time: time.Unix(1, 0)})
	if err != nil {
		t.Fatal(err)
	}
	img, err := build.Image([]v1.Layer{l}, build.Config{Cmd: []string{"/bin/sh"}, Created: time.Unix(1700000000, 0)})
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func openStore(t *testing.T) *store.Store {
	t.Helper()
	s, err := store.Open(filepath.Join(t.TempDir(), "images"), nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func writeOCIDir(t *testing.T, img v1.Image, ref string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "layout")
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	var opts []layout.Option
	if ref != "" {
		opts = append(opts, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": ref}))
	}
	if err := p.AppendImage(img, opts...); err != nil {
		t.Fatal(err)
	}
	return dir
}

func tarDir(t *testing.T, dir string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "layout.tar")
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	if err := tw.AddFS(os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return out
}

func writeDockerArchive(t *testing.T, img v1.Image, ref string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "docker.tar")
	tag, err := name.NewTag(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := tarball.WriteToFile(out, tag, img); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestLoadFormats(t *testing.T) {
	img := testImage(t, "hello")
	digest, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		path    func(t *testing.T) string
		tag     string
		format  store.Format
		wantRef string
	}{
		{"oci dir", func(t *testing.T) string { return writeOCIDir(t, img, "localhost/agent:1") }, "", store.FormatOCIDir, "localhost/agent:1"},
		{"oci tar", func(t *testing.T) string { return tarDir(t, writeOCIDir(t, img, "localhost/agent:2")) }, "", store.FormatOCITar, "localhost/agent:2"},
		{"oci tar bare tag needs --tag", func(t *testing.T) string { return tarDir(t, writeOCIDir(t, img, "latest")) }, "localhost/named:3", store.FormatOCITar, "localhost/named:3"},
		{"docker archive", func(t *testing.T) string { return writeDockerArchive(t, img, "example.com/team/agent:7") }, "", store.FormatDockerArchive, "example.com/team/agent:7"},
		{"docker archive retagged", func(t *testing.T) string { return writeDockerArchive(t, img, "example.com/a:1") }, "debian:mine", store.FormatDockerArchive, "docker.io/library/debian:mine"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := openStore(t)
			res, err := s.Load(context.Background(), tt.path(t), store.LoadOptions{Tag: tt.tag})
			if err != nil {
				t.Fatal(err)
			}
			if res.Format != tt.format {
				t.Errorf("format %q, want %q", res.Format, tt.format)
			}
			if len(res.Entries) != 1 || res.Entries[0].Ref != tt.wantRef {
				t.Fatalf("entries %+v, want one named %s", res.Entries, tt.wantRef)
			}
			e := res.Entries[0]
			if tt.format != store.FormatDockerArchive && e.Manifest != digest {
				t.Errorf("manifest %s, want %s", e.Manifest, digest)
			}
			if !e.Created.Equal(time.Unix(1700000000, 0)) || e.Size <= 0 {
				t.Errorf("entry %+v", e)
			}
			ls, err := s.List()
			if err != nil || len(ls) != 1 || ls[0].Ref != tt.wantRef {
				t.Fatalf("List = %+v, %v", ls, err)
			}
			checkModes(t, s.Dir())
		})
	}
}

// checkModes asserts directories 0700 and files 0600 throughout the store.
func checkModes(t *testing.T, dir string) {
	t.Helper()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		want := fs.FileMode(0o600)
		if d.IsDir() {
			want = 0o700
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s has mode %04o, want %04o", p, fi.Mode().Perm(), want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestLoadBadInputs(t *testing.T) {
	img := testImage(t, "bad")
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	layerHex := m.Layers[0].Digest.Hex
	tests := []struct {
		name string
		path func(t *testing.T) string
		want error
		msg  string
	}{
		{"garbage file", func(t *testing.T) string {
			p := filepath.Join(t.TempDir(), "garbage")
			os.WriteFile(p, []byte(strings.Repeat("garbage!", 100)), 0o600)
			return p
		}, store.ErrFormat, "is not a tar archive"},
		{"empty file", func(t *testing.T) string {
			p := filepath.Join(t.TempDir(), "empty")
			os.WriteFile(p, nil, 0o600)
			return p
		}, store.ErrFormat, "is empty"},
		{"empty tar", func(t *testing.T) string { return tarDir(t, t.TempDir()) }, store.ErrFormat, "has no entries"},
		{"gzip file", func(t *testing.T) string {
			p := filepath.Join(t.TempDir(), "x.tar.gz")
			os.WriteFile(p, []byte{0x1f, 0x8b, 8, 0}, 0o600)
			return p
		}, store.ErrFormat, "gunzip"},
		{"tar of something else", func(t *testing.T) string {
			d := t.TempDir()
			os.WriteFile(filepath.Join(d, "README"), []byte("hi"), 0o600)
			return tarDir(t, d)
		}, store.ErrFormat, "neither oci-layout"},
		{"plain directory", func(t *testing.T) string { return t.TempDir() }, store.ErrFormat, "no oci-layout file"},
		{"missing blob", func(t *testing.T) string {
			d := writeOCIDir(t, img, "localhost/x:1")
			os.Remove(filepath.Join(d, "blobs", "sha256", layerHex))
			return d
		}, store.ErrMissingBlob, layerHex},
		{"wrong digest", func(t *testing.T) string {
			d := writeOCIDir(t, img, "localhost/x:1")
			os.WriteFile(filepath.Join(d, "blobs", "sha256", layerHex), []byte("tampered"), 0o600)
			return d
		}, store.ErrDigest, layerHex},
		{"unnamed image", func(t *testing.T) string { return writeOCIDir(t, img, "") }, nil, "--tag"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := openStore(t)
			_, err := s.Load(context.Background(), tt.path(t), store.LoadOptions{})
			if err == nil {
				t.Fatal("Load succeeded")
			}
			if tt.want != nil && !errors.Is(err, tt.want) {
				t.Errorf("error %v, want %v", err, tt.want)
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("error %q does not mention %q", err, tt.msg)
			}
			if ls, _ := s.List(); len(ls) != 0 {
				t.Errorf("store holds %v after a failed load", ls)
			}
		})
	}
}

func TestRemoveAndPrune(t *testing.T) {
	s := openStore(t)
	ctx := context.Background()
	a, b := testImage(t, "a"), testImage(t, "b")
	if _, err := s.Put(ctx, "localhost/a:1", a, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(ctx, "localhost/b:1", b, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(ctx, "localhost/a:alias", a, nil); err != nil {
		t.Fatal(err)
	}
	if res, err := s.Prune(); err != nil || res.Blobs != 0 {
		t.Fatalf("Prune with everything referenced = %+v, %v", res, err)
	}
	if _, err := s.Remove("localhost/b:1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Remove("localhost/b:1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("second Remove error %v, want ErrNotFound", err)
	}
	res, err := s.Prune()
	if err != nil {
		t.Fatal(err)
	}
	// b's manifest, config and layer; the config differs from a's only by
	// its diff ID, so all three are b's alone.
	if res.Blobs != 3 || res.Bytes <= 0 {
		t.Fatalf("Prune = %+v, want 3 blobs", res)
	}
	img, err := s.Open("localhost/a:alias")
	if err != nil {
		t.Fatal(err)
	}
	defer img.Close()
	rc, err := img.OpenLayer(0)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
	}
	if _, err := io.Copy(io.Discard, rc); err != nil {
		t.Fatalf("verifying layer: %v", err)
	}
	if strings.Join(names, ",") != "etc/,etc/motd" {
		t.Fatalf("layer entries %v", names)
	}
}

func TestOpenLayerDetectsTampering(t *testing.T) {
	s := openStore(t)
	img := testImage(t, "tamper")
	if _, err := s.Put(context.Background(), "localhost/t:1", img, nil); err != nil {
		t.Fatal(err)
	}
	m, _ := img.Manifest()
	blob := filepath.Join(s.Dir(), "blobs", "sha256", m.Layers[0].Digest.Hex)
	data, err := os.ReadFile(blob)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(blob, append(data, 0), 0o600); err != nil {
		t.Fatal(err)
	}
	si, err := s.Open("localhost/t:1")
	if err != nil {
		t.Fatal(err)
	}
	defer si.Close()
	rc, err := si.OpenLayer(0)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if _, err := io.Copy(io.Discard, rc); !errors.Is(err, store.ErrDigest) {
		t.Fatalf("reading tampered layer: %v, want ErrDigest", err)
	}
}

func TestNormalize(t *testing.T) {
	for in, want := range map[string]string{
		"debian":                                        "docker.io/library/debian:latest",
		"docker.io/library/debian:bookworm":             "docker.io/library/debian:bookworm",
		"index.docker.io/library/debian:12":             "docker.io/library/debian:12",
		"localhost/agent:1":                             "localhost/agent:1",
		"127.0.0.1:5000/a/b:c":                          "127.0.0.1:5000/a/b:c",
		"ghcr.io/x/y@sha256:" + strings.Repeat("a", 64): "ghcr.io/x/y@sha256:" + strings.Repeat("a", 64),
	} {
		got, _, err := store.Normalize(in)
		if err != nil || got != want {
			t.Errorf("Normalize(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, _, err := store.Normalize("Bad Ref"); !errors.Is(err, store.ErrBadReference) {
		t.Errorf("Normalize of a bad reference: %v", err)
	}
}

func platformImage(t *testing.T, arch string) v1.Image {
	t.Helper()
	l, err := build.Layer(t.TempDir(), build.Options{})
	if err != nil {
		t.Fatal(err)
	}
	img, err := build.Image([]v1.Layer{l}, build.Config{Platform: v1.Platform{OS: "linux", Architecture: arch}})
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func TestLoadRefusesOtherPlatform(t *testing.T) {
	s := openStore(t)
	other := "arm64"
	if store.DefaultPlatform().Architecture == "arm64" {
		other = "amd64"
	}
	_, err := s.Load(context.Background(), writeOCIDir(t, platformImage(t, other), "localhost/o:1"), store.LoadOptions{})
	if !errors.Is(err, store.ErrUnsupported) || !strings.Contains(err.Error(), "linux/"+other) {
		t.Fatalf("error %v, want ErrUnsupported naming linux/%s", err, other)
	}
}

// An opened image keeps its layers readable through a prune that removes
// them, and holds no lock meanwhile: the prune does not wait.
func TestOpenImageSurvivesPrune(t *testing.T) {
	s := openStore(t)
	if _, err := s.Put(context.Background(), "localhost/p:1", testImage(t, "prune"), nil); err != nil {
		t.Fatal(err)
	}
	img, err := s.Open("localhost/p:1")
	if err != nil {
		t.Fatal(err)
	}
	defer img.Close()
	if _, err := s.Remove("localhost/p:1"); err != nil {
		t.Fatal(err)
	}
	if res, err := s.Prune(); err != nil || res.Blobs != 3 {
		t.Fatalf("Prune = %+v, %v", res, err)
	}
	rc, err := img.OpenLayer(0)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if _, err := io.Copy(io.Discard, rc); err != nil {
		t.Fatalf("reading a pruned layer through the open image: %v", err)
	}
}

// sealed is an image whose config and layers can no longer be read, as a
// registry image would be with the registry gone: only its manifest is.
type sealed struct{ v1.Image }

var errSealed = errors.New("source read")

func (s sealed) RawConfigFile() ([]byte, error)          { return nil, errSealed }
func (s sealed) ConfigFile() (*v1.ConfigFile, error)     { return nil, errSealed }
func (s sealed) LayerByDigest(v1.Hash) (v1.Layer, error) { return nil, errSealed }
func (s sealed) LayerByDiffID(v1.Hash) (v1.Layer, error) { return nil, errSealed }
func (s sealed) Layers() ([]v1.Layer, error)             { return nil, errSealed }
func (s sealed) ConfigName() (v1.Hash, error)            { return v1.Hash{}, errSealed }

func TestPutAgainReadsNoBlob(t *testing.T) {
	s := openStore(t)
	img := testImage(t, "again")
	kinds := func(evs []store.Event) map[string][]store.EventKind {
		out := map[string][]store.EventKind{}
		for _, e := range evs {
			if e.Kind != store.BlobBytes && e.Kind != store.ImageStart {
				out[e.Blob.What] = append(out[e.Blob.What], e.Kind)
			}
		}
		return out
	}
	var first []store.Event
	if _, err := s.Put(context.Background(), "localhost/again:1", img, func(e store.Event) { first = append(first, e) }); err != nil {
		t.Fatal(err)
	}
	end := first[len(first)-1]
	if end.Copied != end.Total || end.Done != end.Total || end.LayersDone != 1 || end.Layers != 1 {
		t.Errorf("first put ended at %+v, want every byte copied", end)
	}
	for what, ks := range kinds(first) {
		if len(ks) != 2 || ks[0] != store.BlobStart || ks[1] != store.BlobDone {
			t.Errorf("first put: %s events %v, want start then done", what, ks)
		}
	}

	var second []store.Event
	e, err := s.Put(context.Background(), "localhost/again:2", sealed{img}, func(e store.Event) { second = append(second, e) })
	if err != nil {
		t.Fatalf("storing an image whose blobs the store holds read them from the source: %v", err)
	}
	if want, _ := img.Digest(); e.Manifest != want {
		t.Errorf("second put stored %s, want %s", e.Manifest, want)
	}
	end = second[len(second)-1]
	if end.Copied != 0 || end.Done != end.Total || end.LayersDone != 1 {
		t.Errorf("second put ended at %+v, want nothing copied and everything present", end)
	}
	for what, ks := range kinds(second) {
		if len(ks) != 1 || ks[0] != store.BlobPresent {
			t.Errorf("second put: %s events %v, want present", what, ks)
		}
	}
}
