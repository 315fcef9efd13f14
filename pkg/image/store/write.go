package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"golang.org/x/sys/unix"
)

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }

func sha256Hash(b []byte) v1.Hash {
	sum := sha256.Sum256(b)
	return v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(sum[:])}
}

// Progress receives an Event at each step of storing one image. It is
// called from the goroutine that stores, never concurrently.
type Progress func(Event)

// EventKind says what an Event reports.
type EventKind int

const (
	// ImageStart opens an image: Total and Layers are set, nothing is
	// stored yet.
	ImageStart EventKind = iota
	// BlobStart: Blob is missing from the store and its copy begins.
	BlobStart
	// BlobBytes: bytes of Blob were copied; Done and Copied grew.
	BlobBytes
	// BlobDone: Blob was copied and verified.
	BlobDone
	// BlobPresent: the store already holds Blob, so it was not read from
	// the source at all.
	BlobPresent
)

// Blob names one blob of the image being stored.
type Blob struct {
	What   string // "manifest", "config" or "layer"
	Index  int    // 1-based position among the layers; 0 for manifest and config
	Digest v1.Hash
	Size   int64
}

// Event is the state of storing one image after a step.
type Event struct {
	Kind EventKind
	Blob Blob // the blob concerned; zero for ImageStart
	// Done counts the bytes of the image's blobs copied or found present,
	// of Total (manifest, config and every layer).
	Done, Total int64
	// Copied counts the bytes read from the source: blobs the store did
	// not hold. A second pull of the same image copies none.
	Copied int64
	// LayersDone of Layers are copied or found present.
	LayersDone, Layers int
}

// staging is one load or pull's private directory under tmp/. Its lock
// file is held for the staging's lifetime so Prune can tell a live staging
// from an abandoned one.
type staging struct {
	s     *Store
	dir   string
	lockf *os.File
	blobs map[string]bool // hex digests staged here

	progress Progress
	ev       Event // the current image's state
}

func (s *Store) newStaging() (*staging, error) {
	dir, err := os.MkdirTemp(filepath.Join(s.dir, tmpDir), "stage-")
	if err != nil {
		return nil, fmt.Errorf("creating staging directory: %w", err)
	}
	lf, err := os.OpenFile(filepath.Join(dir, lockFile), os.O_RDWR|os.O_CREATE|os.O_EXCL|unix.O_CLOEXEC, fileMode)
	if err == nil {
		err = unix.Flock(int(lf.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	}
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("locking staging directory %q: %w", dir, err)
	}
	return &staging{s: s, dir: dir, lockf: lf, blobs: map[string]bool{}}, nil
}

func (st *staging) close() {
	os.RemoveAll(st.dir)
	st.lockf.Close()
}

// pruneStagings removes staging directories whose lock nobody holds.
// Callers hold the store lock exclusively.
func (s *Store) pruneStagings() (int, error) {
	base := filepath.Join(s.dir, tmpDir)
	ents, err := os.ReadDir(base)
	if err != nil {
		return 0, fmt.Errorf("listing %q: %w", base, err)
	}
	n := 0
	for _, e := range ents {
		dir := filepath.Join(base, e.Name())
		lf, err := os.OpenFile(filepath.Join(dir, lockFile), os.O_RDWR|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
		if err == nil {
			err = unix.Flock(int(lf.Fd()), unix.LOCK_EX|unix.LOCK_NB)
			if errors.Is(err, unix.EWOULDBLOCK) {
				lf.Close()
				continue
			}
			lf.Close()
		}
		if err := os.RemoveAll(dir); err != nil {
			return n, fmt.Errorf("removing abandoned staging %q: %w", dir, err)
		}
		n++
	}
	return n, nil
}

// present reports whether this staging or the store already holds b (a
// regular file of b's size under its digest), and if so reports it present.
func (st *staging) present(b Blob) bool {
	if !st.blobs[b.Digest.Hex] {
		fi, err := os.Lstat(st.s.blobPath(b.Digest))
		if err != nil || !fi.Mode().IsRegular() || fi.Size() != b.Size {
			return false
		}
	}
	st.ev.Done += b.Size
	st.emit(BlobPresent, b)
	return true
}

// putBlob stores the content of open as the blob b, verifying its digest
// and size as it is written. A blob the store already holds is not read
// from the source at all: open is not called.
func (st *staging) putBlob(b Blob, open func() (io.ReadCloser, error)) error {
	what, want, size := b.What, b.Digest, b.Size
	if want.Algorithm != "sha256" {
		return fmt.Errorf("%s %s: digest algorithm %q: %w", what, want, want.Algorithm, ErrUnsupported)
	}
	if st.present(b) {
		return nil
	}
	st.emit(BlobStart, b)
	rc, err := open()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %w", what, want, ErrMissingBlob, err)
	}
	defer rc.Close()
	p := filepath.Join(st.dir, want.Hex)
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_CLOEXEC|unix.O_NOFOLLOW, fileMode)
	if err != nil {
		return fmt.Errorf("staging %s %s: %w", what, want, err)
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, h, progressWriter{st, b}), rc)
	if err != nil {
		f.Close()
		if errors.Is(err, fs.ErrNotExist) {
			err = fmt.Errorf("%w: %w", ErrMissingBlob, err)
		}
		return fmt.Errorf("%s %s: %w", what, want, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("syncing %s %s: %w", what, want, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("staging %s %s: %w", what, want, err)
	}
	if got := hexOf(h); got != want.Hex {
		return fmt.Errorf("%s %s: content has digest sha256:%s: %w", what, want, got, ErrDigest)
	}
	if size >= 0 && n != size {
		return fmt.Errorf("%s %s: content is %d bytes, the manifest says %d: %w", what, want, n, size, ErrDigest)
	}
	st.blobs[want.Hex] = true
	st.emit(BlobDone, b)
	return nil
}

func hexOf(h hash.Hash) string { return hex.EncodeToString(h.Sum(nil)) }

type progressWriter struct {
	st *staging
	b  Blob
}

func (w progressWriter) Write(p []byte) (int, error) {
	w.st.ev.Done += int64(len(p))
	w.st.ev.Copied += int64(len(p))
	w.st.emit(BlobBytes, w.b)
	return len(p), nil
}

// emit reports a step; a finished layer counts towards LayersDone.
func (st *staging) emit(k EventKind, b Blob) {
	if b.What == "layer" && (k == BlobDone || k == BlobPresent) {
		st.ev.LayersDone++
	}
	if st.progress == nil {
		return
	}
	st.ev.Kind, st.ev.Blob = k, b
	st.progress(st.ev)
}

var (
	manifestTypes = []types.MediaType{types.OCIManifestSchema1, types.DockerManifestSchema2}
	layerTypes    = []types.MediaType{
		types.OCILayer, types.OCILayerZStd, types.OCIUncompressedLayer,
		types.DockerLayer, types.DockerUncompressedLayer,
	}
)

// putImage stages every blob of img and returns its manifest descriptor.
func (st *staging) putImage(img v1.Image) (v1.Descriptor, error) {
	raw, err := img.RawManifest()
	if err != nil {
		return v1.Descriptor{}, fmt.Errorf("reading manifest: %w", err)
	}
	digest := sha256Hash(raw)
	m, err := v1.ParseManifest(bytes.NewReader(raw))
	if err != nil {
		return v1.Descriptor{}, fmt.Errorf("parsing manifest %s: %w", digest, err)
	}
	mt := m.MediaType
	if mt == "" {
		if mt, err = img.MediaType(); err != nil {
			return v1.Descriptor{}, fmt.Errorf("manifest %s media type: %w", digest, err)
		}
	}
	if !slices.Contains(manifestTypes, mt) {
		return v1.Descriptor{}, fmt.Errorf("manifest %s has media type %q; only OCI and Docker schema 2 image manifests are stored: %w", digest, mt, ErrUnsupported)
	}
	for _, l := range m.Layers {
		if !slices.Contains(layerTypes, l.MediaType) {
			return v1.Descriptor{}, fmt.Errorf("layer %s has media type %q (non-distributable or unknown): %w", l.Digest, l.MediaType, ErrUnsupported)
		}
	}
	st.ev = Event{Total: int64(len(raw)) + m.Config.Size, Layers: len(m.Layers)}
	for _, l := range m.Layers {
		st.ev.Total += l.Size
	}
	st.emit(ImageStart, Blob{})
	if err := st.putBlob(Blob{What: "manifest", Digest: digest, Size: int64(len(raw))}, func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(raw)), nil
	}); err != nil {
		return v1.Descriptor{}, err
	}
	rawCfg, err := st.config(img, m.Config)
	if err != nil {
		return v1.Descriptor{}, err
	}
	cfg, err := v1.ParseConfigFile(bytes.NewReader(rawCfg))
	if err != nil {
		return v1.Descriptor{}, fmt.Errorf("parsing config %s: %w", m.Config.Digest, err)
	}
	if len(cfg.RootFS.DiffIDs) != len(m.Layers) {
		return v1.Descriptor{}, fmt.Errorf("config %s lists %d layer diff IDs for %d layers: %w", m.Config.Digest, len(cfg.RootFS.DiffIDs), len(m.Layers), ErrDigest)
	}
	for i, l := range m.Layers {
		// The source is asked for a layer only when the store lacks it.
		open := func() (io.ReadCloser, error) {
			layer, err := img.LayerByDigest(l.Digest)
			if err != nil {
				return nil, err
			}
			return layer.Compressed()
		}
		if err := st.putBlob(Blob{What: "layer", Index: i + 1, Digest: l.Digest, Size: l.Size}, open); err != nil {
			return v1.Descriptor{}, err
		}
	}
	return v1.Descriptor{
		MediaType: mt,
		Size:      int64(len(raw)),
		Digest:    digest,
		Platform:  cfg.Platform(),
	}, nil
}

// config stages the config blob d of img and returns its content. A config
// the store already holds is read from the store, not from img, so that
// storing an image again reads no blob from its source.
func (st *staging) config(img v1.Image, d v1.Descriptor) ([]byte, error) {
	b := Blob{What: "config", Digest: d.Digest, Size: d.Size}
	if d.Digest.Algorithm == "sha256" && !st.blobs[d.Digest.Hex] {
		if raw, err := st.s.readBlob(d.Digest); err == nil && int64(len(raw)) == d.Size {
			st.present(b)
			return raw, nil
		}
	}
	raw, err := img.RawConfigFile()
	if err != nil {
		return nil, fmt.Errorf("config %s: %w: %w", d.Digest, ErrMissingBlob, err)
	}
	if err := st.putBlob(b, func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(raw)), nil
	}); err != nil {
		return nil, err
	}
	return raw, nil
}

// named is one reference to commit.
type named struct {
	ref    string
	desc   v1.Descriptor
	source v1.Hash
}

// commit moves staged blobs into the store and points each reference at
// its manifest, replacing earlier images of the same reference.
func (st *staging) commit(refs []named) ([]Entry, error) {
	unlock, err := st.s.lock(unix.LOCK_EX)
	if err != nil {
		return nil, err
	}
	defer unlock()
	for hexd := range st.blobs {
		dst := st.s.blobPath(v1.Hash{Algorithm: "sha256", Hex: hexd})
		if err := os.Rename(filepath.Join(st.dir, hexd), dst); err != nil {
			return nil, fmt.Errorf("moving blob sha256:%s into the store: %w", hexd, err)
		}
	}
	ds, err := st.s.readIndex()
	if err != nil {
		return nil, err
	}
	for _, r := range refs {
		m, _, err := st.s.readManifest(r.desc.Digest)
		if err != nil {
			return nil, fmt.Errorf("image %s: %w (a concurrent prune removed a blob; run the command again)", r.ref, err)
		}
		for _, l := range m.Layers {
			if _, err := os.Lstat(st.s.blobPath(l.Digest)); err != nil {
				return nil, fmt.Errorf("image %s: layer %s: %w: %w (run the command again)", r.ref, l.Digest, ErrCorruptStore, err)
			}
		}
		d := r.desc
		d.Annotations = map[string]string{AnnotationRef: r.ref, AnnotationSourceDigest: r.source.String()}
		ds = slices.DeleteFunc(ds, func(x v1.Descriptor) bool { return x.Annotations[AnnotationRef] == r.ref })
		ds = append(ds, d)
	}
	if err := st.s.writeIndex(ds); err != nil {
		return nil, err
	}
	out := make([]Entry, 0, len(refs))
	for _, r := range refs {
		d := r.desc
		d.Annotations = map[string]string{AnnotationRef: r.ref, AnnotationSourceDigest: r.source.String()}
		e, err := st.s.entry(d)
		if err != nil {
			return nil, err
		}
		st.s.log.Info("image stored", "ref", e.Ref, "manifest", e.Manifest.String(), "source", e.Source.String())
		out = append(out, e)
	}
	return out, nil
}

// Put stores img under ref, as `image build-dir` does for an image made
// on this host.
func (s *Store) Put(ctx context.Context, ref string, img v1.Image, progress Progress) (Entry, error) {
	norm, _, err := Normalize(ref)
	if err != nil {
		return Entry{}, err
	}
	st, err := s.newStaging()
	if err != nil {
		return Entry{}, err
	}
	defer st.close()
	st.progress = progress
	if err := ctx.Err(); err != nil {
		return Entry{}, err
	}
	d, err := st.putImage(img)
	if err != nil {
		return Entry{}, fmt.Errorf("storing %s: %w", norm, err)
	}
	es, err := st.commit([]named{{ref: norm, desc: d, source: d.Digest}})
	if err != nil {
		return Entry{}, err
	}
	return es[0], nil
}

// PutFetched stores img under ref, a reference as Normalize returns it, recording
// source as the digest the image was named by (its manifest's, or an
// index's for an image resolved from a multi-platform index). An image
// that does not run as want is refused (ErrUnsupported). Every blob is
// verified against its digest and size before it is stored; progress, when
// set, reports bytes stored. Package registry stores a pulled image with
// it, so that the store itself links no registry client; Put stores an
// image made on this host.
func (s *Store) PutFetched(ref string, img v1.Image, source v1.Hash, want v1.Platform, progress Progress) (Entry, error) {
	st, err := s.newStaging()
	if err != nil {
		return Entry{}, err
	}
	defer st.close()
	st.progress = progress
	d, err := st.putImage(img)
	if err != nil {
		return Entry{}, fmt.Errorf("storing %s: %w", ref, err)
	}
	if !platformMatches(want, d.Platform) {
		return Entry{}, fmt.Errorf("%s is for %s, not %s: %w", ref, d.Platform.String(), want.String(), ErrUnsupported)
	}
	es, err := st.commit([]named{{ref: ref, desc: d, source: source}})
	if err != nil {
		return Entry{}, err
	}
	return es[0], nil
}
