package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/sys/unix"

	"lazaret.dev/pkg/sys"
)

// Annotation keys on index.json descriptors.
const (
	AnnotationRef          = "org.opencontainers.image.ref.name"
	AnnotationSourceDigest = "dev.lazaret.image.source-digest"
	// annotationContainerdName is where containerd and docker save put the
	// full reference in an OCI layout.
	annotationContainerdName = "io.containerd.image.name"
)

const (
	layoutFile    = "oci-layout"
	layoutContent = `{"imageLayoutVersion":"1.0.0"}`
	indexFile     = "index.json"
	lockFile      = "lock"
	tmpDir        = "tmp"
	dirMode       = 0o700
	fileMode      = 0o600
)

// Errors callers test with errors.Is.
var (
	// ErrNotFound means no image has the reference.
	ErrNotFound = errors.New("image not found in the local store")
	// ErrBadReference means a string is not an OCI image reference.
	ErrBadReference = errors.New("invalid image reference")
	// ErrFormat means a file to load is neither an OCI image layout (a
	// directory or a tar of one) nor a docker-archive tar.
	ErrFormat = errors.New("unrecognized image archive")
	// ErrDigest means content does not match the digest or size that names
	// it.
	ErrDigest = errors.New("content does not match its digest")
	// ErrMissingBlob means a manifest names a blob the source lacks.
	ErrMissingBlob = errors.New("blob missing from the image source")
	// ErrUnsupported means a manifest, layer media type or platform the
	// store does not accept.
	ErrUnsupported = errors.New("unsupported image content")
	// ErrCorruptStore means the store's own files are damaged.
	ErrCorruptStore = errors.New("local image store is damaged")
)

// Store is an open image store.
type Store struct {
	dir string
	log *slog.Logger
}

// Entry describes one stored reference.
type Entry struct {
	// Ref is the normalized reference, e.g. docker.io/library/debian:bookworm.
	Ref string
	// Manifest is the digest of the stored image manifest.
	Manifest v1.Hash
	// Source is the digest the image's source named: the index digest when
	// a platform was selected from an index, else Manifest.
	Source v1.Hash
	// Size is the manifest, config and layers in bytes, as stored.
	Size int64
	// Created is the image config's creation time, zero when absent.
	Created time.Time
	// Platform is the image's os/architecture[/variant].
	Platform string
}

// Open opens the store in dir, creating it (mode 0700) when missing. An
// existing directory must not be reachable by other users.
func Open(dir string, log *slog.Logger) (*Store, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if !filepath.IsAbs(dir) {
		return nil, fmt.Errorf("image store %q: path is not absolute", dir)
	}
	if err := os.MkdirAll(dir, dirMode); err != nil {
		return nil, fmt.Errorf("creating image store %q: %w", dir, err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return nil, fmt.Errorf("inspecting image store %q: %w", dir, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("image store %q is not a directory: %w", dir, ErrCorruptStore)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("image store %q has mode %04o; run chmod 0700 on it: %w", dir, fi.Mode().Perm(), ErrCorruptStore)
	}
	s := &Store{dir: dir, log: log}
	for _, d := range []string{filepath.Join(dir, "blobs", "sha256"), filepath.Join(dir, tmpDir)} {
		if err := os.MkdirAll(d, dirMode); err != nil {
			return nil, fmt.Errorf("creating %q: %w", d, err)
		}
	}
	if s.initialized() {
		return s, nil
	}
	unlock, err := s.lock(unix.LOCK_EX)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := s.ensureFile(layoutFile, []byte(layoutContent)); err != nil {
		return nil, err
	}
	if err := s.ensureFile(indexFile, mustIndexJSON(nil)); err != nil {
		return nil, err
	}
	return s, nil
}

// Dir returns the store directory.
func (s *Store) Dir() string { return s.dir }

// initialized reports whether oci-layout and index.json both exist.
func (s *Store) initialized() bool {
	for _, n := range []string{layoutFile, indexFile} {
		if _, err := os.Lstat(filepath.Join(s.dir, n)); err != nil {
			return false
		}
	}
	return true
}

func (s *Store) ensureFile(name string, content []byte) error {
	p := filepath.Join(s.dir, name)
	if _, err := os.Lstat(p); err == nil {
		return nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("inspecting %q: %w", p, err)
	}
	return writeFileAtomic(p, content)
}

// lock takes the store's flock (unix.LOCK_SH or unix.LOCK_EX) and returns
// its release.
func (s *Store) lock(how int) (func(), error) {
	p := filepath.Join(s.dir, lockFile)
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE|unix.O_CLOEXEC|unix.O_NOFOLLOW, fileMode)
	if err != nil {
		return nil, fmt.Errorf("opening image store lock %q: %w", p, err)
	}
	if err := sys.Flock(int(f.Fd()), how); err != nil {
		f.Close()
		return nil, fmt.Errorf("locking image store %q: %w", p, err)
	}
	return func() { f.Close() }, nil
}

func writeFileAtomic(p string, content []byte) error {
	f, err := os.CreateTemp(filepath.Dir(p), "."+filepath.Base(p)+".*")
	if err != nil {
		return fmt.Errorf("writing %q: %w", p, err)
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	if err := f.Chmod(fileMode); err != nil {
		f.Close()
		return fmt.Errorf("writing %q: %w", p, err)
	}
	if _, err := f.Write(content); err != nil {
		f.Close()
		return fmt.Errorf("writing %q: %w", p, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("syncing %q: %w", p, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("writing %q: %w", p, err)
	}
	if err := os.Rename(tmp, p); err != nil {
		return fmt.Errorf("replacing %q: %w", p, err)
	}
	return nil
}

func mustIndexJSON(ds []v1.Descriptor) []byte {
	if ds == nil {
		ds = []v1.Descriptor{}
	}
	b, err := json.Marshal(struct {
		SchemaVersion int             `json:"schemaVersion"`
		MediaType     string          `json:"mediaType"`
		Manifests     []v1.Descriptor `json:"manifests"`
	}{2, "application/vnd.oci.image.index.v1+json", ds})
	if err != nil {
		panic(fmt.Sprintf("encoding index.json: %v", err))
	}
	return b
}

// readIndex returns the stored descriptors. Callers hold the lock.
func (s *Store) readIndex() ([]v1.Descriptor, error) {
	p := filepath.Join(s.dir, indexFile)
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("reading %q: %w", p, err)
	}
	var idx v1.IndexManifest
	if err := json.Unmarshal(b, &idx); err != nil {
		return nil, fmt.Errorf("parsing %q: %w: %w", p, ErrCorruptStore, err)
	}
	for i, d := range idx.Manifests {
		if d.Annotations[AnnotationRef] == "" {
			return nil, fmt.Errorf("%q: manifest %d has no %s annotation: %w", p, i, AnnotationRef, ErrCorruptStore)
		}
	}
	return idx.Manifests, nil
}

func (s *Store) writeIndex(ds []v1.Descriptor) error {
	slices.SortFunc(ds, func(a, b v1.Descriptor) int {
		switch ra, rb := a.Annotations[AnnotationRef], b.Annotations[AnnotationRef]; {
		case ra < rb:
			return -1
		case ra > rb:
			return 1
		}
		return 0
	})
	return writeFileAtomic(filepath.Join(s.dir, indexFile), mustIndexJSON(ds))
}

func (s *Store) blobPath(h v1.Hash) string {
	return filepath.Join(s.dir, "blobs", h.Algorithm, h.Hex)
}

// List returns every stored reference, sorted.
func (s *Store) List() ([]Entry, error) {
	unlock, err := s.lock(unix.LOCK_SH)
	if err != nil {
		return nil, err
	}
	defer unlock()
	ds, err := s.readIndex()
	if err != nil {
		return nil, err
	}
	out := make([]Entry, 0, len(ds))
	for _, d := range ds {
		e, err := s.entry(d)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

// entry describes descriptor d, reading its manifest and config.
func (s *Store) entry(d v1.Descriptor) (Entry, error) {
	ref := d.Annotations[AnnotationRef]
	e := Entry{Ref: ref, Manifest: d.Digest, Source: d.Digest}
	if src := d.Annotations[AnnotationSourceDigest]; src != "" {
		h, err := v1.NewHash(src)
		if err != nil {
			return Entry{}, fmt.Errorf("image %s: source digest %q: %w: %w", ref, src, ErrCorruptStore, err)
		}
		e.Source = h
	}
	m, cfg, err := s.readManifest(d.Digest)
	if err != nil {
		return Entry{}, fmt.Errorf("image %s: %w", ref, err)
	}
	e.Size = d.Size + m.Config.Size
	for _, l := range m.Layers {
		e.Size += l.Size
	}
	e.Created = cfg.Created.Time
	e.Platform = platformString(cfg.Platform())
	return e, nil
}

func platformString(p *v1.Platform) string {
	if p == nil {
		return ""
	}
	return p.String()
}

func (s *Store) readManifest(h v1.Hash) (*v1.Manifest, *v1.ConfigFile, error) {
	raw, err := s.readBlob(h)
	if err != nil {
		return nil, nil, err
	}
	m, err := v1.ParseManifest(bytesReader(raw))
	if err != nil {
		return nil, nil, fmt.Errorf("parsing manifest %s: %w: %w", h, ErrCorruptStore, err)
	}
	rawCfg, err := s.readBlob(m.Config.Digest)
	if err != nil {
		return nil, nil, err
	}
	cfg, err := v1.ParseConfigFile(bytesReader(rawCfg))
	if err != nil {
		return nil, nil, fmt.Errorf("parsing config %s: %w: %w", m.Config.Digest, ErrCorruptStore, err)
	}
	return m, cfg, nil
}

// readBlob reads a small blob (manifest or config) and verifies it.
func (s *Store) readBlob(h v1.Hash) ([]byte, error) {
	if h.Algorithm != "sha256" {
		return nil, fmt.Errorf("blob %s: digest algorithm %q: %w", h, h.Algorithm, ErrUnsupported)
	}
	b, err := os.ReadFile(s.blobPath(h))
	if err != nil {
		return nil, fmt.Errorf("reading blob %s: %w: %w", h, ErrCorruptStore, err)
	}
	if got := sha256Hash(b); got != h {
		return nil, fmt.Errorf("blob %s has digest %s: %w", h, got, ErrDigest)
	}
	return b, nil
}

// Remove deletes the reference. Blobs stay until Prune.
func (s *Store) Remove(ref string) (Entry, error) {
	norm, _, err := Normalize(ref)
	if err != nil {
		return Entry{}, err
	}
	unlock, err := s.lock(unix.LOCK_EX)
	if err != nil {
		return Entry{}, err
	}
	defer unlock()
	ds, err := s.readIndex()
	if err != nil {
		return Entry{}, err
	}
	i := slices.IndexFunc(ds, func(d v1.Descriptor) bool { return d.Annotations[AnnotationRef] == norm })
	if i < 0 {
		return Entry{}, fmt.Errorf("image %s: %w", norm, ErrNotFound)
	}
	e := Entry{Ref: norm, Manifest: ds[i].Digest}
	if err := s.writeIndex(slices.Delete(ds, i, i+1)); err != nil {
		return Entry{}, err
	}
	s.log.Info("image removed", "ref", norm, "manifest", e.Manifest.String())
	return e, nil
}

// PruneResult counts what Prune removed.
type PruneResult struct {
	Blobs    int
	Bytes    int64
	Stagings int
}

// Prune deletes blobs no stored reference needs and staging directories
// whose load or pull has ended.
func (s *Store) Prune() (PruneResult, error) {
	unlock, err := s.lock(unix.LOCK_EX)
	if err != nil {
		return PruneResult{}, err
	}
	defer unlock()
	ds, err := s.readIndex()
	if err != nil {
		return PruneResult{}, err
	}
	keep := map[string]bool{}
	for _, d := range ds {
		m, _, err := s.readManifest(d.Digest)
		if err != nil {
			return PruneResult{}, fmt.Errorf("image %s: %w", d.Annotations[AnnotationRef], err)
		}
		keep[d.Digest.Hex] = true
		keep[m.Config.Digest.Hex] = true
		for _, l := range m.Layers {
			keep[l.Digest.Hex] = true
		}
	}
	var res PruneResult
	bdir := filepath.Join(s.dir, "blobs", "sha256")
	ents, err := os.ReadDir(bdir)
	if err != nil {
		return res, fmt.Errorf("listing %q: %w", bdir, err)
	}
	for _, e := range ents {
		if keep[e.Name()] {
			continue
		}
		p := filepath.Join(bdir, e.Name())
		fi, err := os.Lstat(p)
		if err != nil {
			return res, fmt.Errorf("inspecting %q: %w", p, err)
		}
		if err := os.Remove(p); err != nil {
			return res, fmt.Errorf("removing %q: %w", p, err)
		}
		res.Blobs++
		res.Bytes += fi.Size()
	}
	n, err := s.pruneStagings()
	res.Stagings = n
	if err != nil {
		return res, err
	}
	s.log.Info("image store pruned", "blobs", res.Blobs, "bytes", res.Bytes, "stagings", res.Stagings)
	return res, nil
}
