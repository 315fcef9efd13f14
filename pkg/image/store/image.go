package store

import (
	"bufio"
	"compress/gzip"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"slices"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/klauspost/compress/zstd"
	"golang.org/x/sys/unix"
)

// Image is a stored image opened for reading. Its layer blobs are opened
// when the image is, under the store's shared lock, and stay readable
// until Close even if a later prune removes their names.
type Image struct {
	Entry
	// Config is the parsed image config (Entrypoint, Cmd, Env, User,
	// WorkingDir, RootFS.DiffIDs).
	Config *v1.ConfigFile
	// Layers are the manifest's layer descriptors, in application order.
	Layers []v1.Descriptor

	files []*os.File
}

// Open opens the image stored under ref.
func (s *Store) Open(ref string) (*Image, error) {
	norm, _, err := Normalize(ref)
	if err != nil {
		return nil, err
	}
	unlock, err := s.lock(unix.LOCK_SH)
	if err != nil {
		return nil, err
	}
	defer unlock()
	return s.open(norm)
}

func (s *Store) open(norm string) (*Image, error) {
	ds, err := s.readIndex()
	if err != nil {
		return nil, err
	}
	i := slices.IndexFunc(ds, func(d v1.Descriptor) bool { return d.Annotations[AnnotationRef] == norm })
	if i < 0 {
		return nil, fmt.Errorf("image %s: %w; load or pull it first", norm, ErrNotFound)
	}
	e, err := s.entry(ds[i])
	if err != nil {
		return nil, err
	}
	m, cfg, err := s.readManifest(e.Manifest)
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", norm, err)
	}
	if len(cfg.RootFS.DiffIDs) != len(m.Layers) {
		return nil, fmt.Errorf("image %s: config lists %d diff IDs for %d layers: %w", norm, len(cfg.RootFS.DiffIDs), len(m.Layers), ErrCorruptStore)
	}
	img := &Image{Entry: e, Config: cfg, Layers: m.Layers}
	for _, l := range m.Layers {
		f, err := os.OpenFile(s.blobPath(l.Digest), os.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
		if err != nil {
			img.Close()
			return nil, fmt.Errorf("image %s: opening layer %s: %w: %w", norm, l.Digest, ErrCorruptStore, err)
		}
		img.files = append(img.files, f)
	}
	return img, nil
}

// Close closes the layer blobs.
func (img *Image) Close() error {
	for _, f := range img.files {
		f.Close()
	}
	img.files = nil
	return nil
}

// OpenLayer returns layer i's uncompressed tar stream. Reading it to the
// end verifies both the blob digest and the config's diff ID; a mismatch
// is returned instead of io.EOF, wrapping ErrDigest.
func (img *Image) OpenLayer(i int) (io.ReadCloser, error) {
	d := img.Layers[i]
	if i >= len(img.files) {
		return nil, fmt.Errorf("layer %s: image is closed", d.Digest)
	}
	v := &verifier{desc: d, diffID: img.Config.RootFS.DiffIDs[i], blobHash: sha256.New(), diffHash: sha256.New()}
	v.blob = bufio.NewReaderSize(io.TeeReader(io.NewSectionReader(img.files[i], 0, 1<<62), v.blobHash), 1<<20)
	switch d.MediaType {
	case types.OCILayer, types.DockerLayer:
		gz, err := gzip.NewReader(v.blob)
		if err != nil {
			return nil, fmt.Errorf("layer %s: gzip: %w: %w", d.Digest, ErrDigest, err)
		}
		gz.Multistream(true)
		v.plain, v.closeDec = gz, gz.Close
	case types.OCILayerZStd:
		zr, err := zstd.NewReader(v.blob)
		if err != nil {
			return nil, fmt.Errorf("layer %s: zstd: %w", d.Digest, err)
		}
		v.plain, v.closeDec = zr, func() error { zr.Close(); return nil }
	default:
		v.plain = v.blob
	}
	return v, nil
}

type verifier struct {
	desc     v1.Descriptor
	diffID   v1.Hash
	blob     io.Reader
	plain    io.Reader
	closeDec func() error
	blobHash hash.Hash
	diffHash hash.Hash
	size     int64
	checked  error
	done     bool
}

func (v *verifier) Read(p []byte) (int, error) {
	if v.done {
		return 0, v.checked
	}
	n, err := v.plain.Read(p)
	v.diffHash.Write(p[:n])
	if errors.Is(err, io.EOF) {
		v.done = true
		v.checked = v.check()
		return n, v.checked
	}
	if err != nil {
		// A stream that fails to decompress is either tampered with (the
		// blob digest says so) or was stored damaged.
		v.done = true
		if derr := v.checkBlob(); derr != nil {
			v.checked = derr
		} else {
			v.checked = fmt.Errorf("layer %s: decompressing: %w: %w", v.desc.Digest, ErrCorruptStore, err)
		}
		return n, v.checked
	}
	return n, nil
}

func (v *verifier) checkBlob() error {
	if _, err := io.Copy(io.Discard, v.blob); err != nil {
		return fmt.Errorf("layer %s: %w", v.desc.Digest, err)
	}
	if got := "sha256:" + hexOf(v.blobHash); got != v.desc.Digest.String() {
		return fmt.Errorf("layer blob %s has digest %s: %w", v.desc.Digest, got, ErrDigest)
	}
	return nil
}

// check drains the compressed blob and compares both digests.
func (v *verifier) check() error {
	if err := v.checkBlob(); err != nil {
		return err
	}
	if got := "sha256:" + hexOf(v.diffHash); got != v.diffID.String() {
		return fmt.Errorf("layer %s uncompressed digest %s differs from the config's diff ID %s: %w", v.desc.Digest, got, v.diffID, ErrDigest)
	}
	return io.EOF
}

func (v *verifier) Close() error {
	if v.closeDec != nil {
		return v.closeDec()
	}
	return nil
}
