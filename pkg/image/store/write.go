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

// Progress receives the bytes written so far and the total expected for
// one image; total counts manifest, config and every layer.
type Progress func(done, total int64)

// staging is one load or pull's private directory under tmp/. Its lock
// file is held for the staging's lifetime so Prune can tell a live staging
// from an abandoned one.
type staging struct {
	s     *Store
	dir   string
	lockf *os.File
	blobs map[string]bool // hex digests staged here

	progress    Progress
	done, total int64
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

// putBlob stores the content of open under the name want, verifying its
// digest and size as it is written. A blob the store already holds is not
// copied again.
func (st *staging) putBlob(what string, want v1.Hash, size int64, open func() (io.ReadCloser, error)) error {
	if want.Algorithm != "sha256" {
		return fmt.Errorf("%s %s: digest algorithm %q: %w", what, want, want.Algorithm, ErrUnsupported)
	}
	if st.blobs[want.Hex] {
		return nil
	}
	if fi, err := os.Lstat(st.s.blobPath(want)); err == nil && fi.Mode().IsRegular() && fi.Size() == size {
		st.advance(size)
		return nil
	}
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
	n, err := io.Copy(io.MultiWriter(f, h, progressWriter{st}), rc)
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
	return nil
}

func hexOf(h hash.Hash) string { return hex.EncodeToString(h.Sum(nil)) }

type progressWriter struct{ st *staging }

func (w progressWriter) Write(p []byte) (int, error) {
	w.st.advance(int64(len(p)))
	return len(p), nil
}

func (st *staging) advance(n int64) {
	st.done += n
	if st.progress != nil {
		st.progress(st.done, st.total)
	}
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
	st.done, st.total = 0, int64(len(raw))+m.Config.Size
	for _, l := range m.Layers {
		st.total += l.Size
	}
	if err := st.putBlob("manifest", digest, int64(len(raw)), func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(raw)), nil
	}); err != nil {
		return v1.Descriptor{}, err
	}
	rawCfg, err := img.RawConfigFile()
	if err != nil {
		return v1.Descriptor{}, fmt.Errorf("config %s: %w: %w", m.Config.Digest, ErrMissingBlob, err)
	}
	if err := st.putBlob("config", m.Config.Digest, m.Config.Size, func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(rawCfg)), nil
	}); err != nil {
		return v1.Descriptor{}, err
	}
	cfg, err := v1.ParseConfigFile(bytes.NewReader(rawCfg))
	if err != nil {
		return v1.Descriptor{}, fmt.Errorf("parsing config %s: %w", m.Config.Digest, err)
	}
	if len(cfg.RootFS.DiffIDs) != len(m.Layers) {
		return v1.Descriptor{}, fmt.Errorf("config %s lists %d layer diff IDs for %d layers: %w", m.Config.Digest, len(cfg.RootFS.DiffIDs), len(m.Layers), ErrDigest)
	}
	for _, l := range m.Layers {
		layer, err := img.LayerByDigest(l.Digest)
		if err != nil {
			return v1.Descriptor{}, fmt.Errorf("layer %s: %w: %w", l.Digest, ErrMissingBlob, err)
		}
		if err := st.putBlob("layer", l.Digest, l.Size, layer.Compressed); err != nil {
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
