package store

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Format is a loadable image archive format.
type Format string

// Formats Load recognizes.
const (
	FormatOCIDir        Format = "OCI image layout directory"
	FormatOCITar        Format = "OCI image layout tar"
	FormatDockerArchive Format = "docker-archive tar"
)

// DefaultPlatform is linux on the host's architecture.
func DefaultPlatform() v1.Platform {
	return v1.Platform{OS: "linux", Architecture: runtime.GOARCH}
}

// LoadOptions configure Load.
type LoadOptions struct {
	// Tag names the image when the archive holds exactly one; it replaces
	// the archive's own names.
	Tag string
	// Platform selects from multi-platform indexes and must match a
	// single image's config; zero means DefaultPlatform.
	Platform v1.Platform
	// Progress, when set, reports bytes stored per image.
	Progress Progress
}

// LoadResult says what Load found and stored.
type LoadResult struct {
	Format  Format
	Entries []Entry
}

// Detect reports the format of the file or directory at p, or an error
// wrapping ErrFormat that says why it is neither.
func Detect(p string) (Format, error) {
	fi, err := os.Stat(p)
	if err != nil {
		return "", fmt.Errorf("image archive %q: %w", p, err)
	}
	if fi.IsDir() {
		if _, err := os.Stat(filepath.Join(p, layoutFile)); err != nil {
			return "", fmt.Errorf("directory %q is not an OCI image layout (it has no oci-layout file): %w", p, ErrFormat)
		}
		return FormatOCIDir, nil
	}
	f, err := os.Open(p)
	if err != nil {
		return "", fmt.Errorf("image archive %q: %w", p, err)
	}
	defer f.Close()
	head := make([]byte, 4)
	n, _ := io.ReadFull(f, head)
	switch {
	case n == 0:
		return "", fmt.Errorf("file %q is empty: %w", p, ErrFormat)
	case n >= 2 && bytes.Equal(head[:2], []byte{0x1f, 0x8b}):
		return "", fmt.Errorf("file %q is gzip-compressed; decompress it (gunzip) and load the tar: %w", p, ErrFormat)
	case n == 4 && bytes.Equal(head, []byte{0x28, 0xb5, 0x2f, 0xfd}):
		return "", fmt.Errorf("file %q is zstd-compressed; decompress it (zstd -d) and load the tar: %w", p, ErrFormat)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return "", fmt.Errorf("image archive %q: %w", p, err)
	}
	tr := tar.NewReader(f)
	var entries int
	var hasLayout, hasIndex, hasManifest bool
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			if entries == 0 {
				return "", fmt.Errorf("file %q is not a tar archive (%v): %w", p, err, ErrFormat)
			}
			return "", fmt.Errorf("tar %q is damaged after %d entries (%v): %w", p, entries, err, ErrFormat)
		}
		entries++
		switch path.Clean(strings.TrimPrefix(h.Name, "./")) {
		case layoutFile:
			hasLayout = true
		case indexFile:
			hasIndex = true
		case "manifest.json":
			hasManifest = true
		}
	}
	switch {
	case entries == 0:
		return "", fmt.Errorf("tar %q has no entries: %w", p, ErrFormat)
	case hasLayout && hasIndex:
		return FormatOCITar, nil
	case hasLayout:
		return "", fmt.Errorf("tar %q has oci-layout but no index.json: %w", p, ErrFormat)
	case hasManifest:
		return FormatDockerArchive, nil
	}
	return "", fmt.Errorf("tar %q has neither oci-layout (OCI image layout) nor manifest.json (docker-archive): %w", p, ErrFormat)
}

// Load stores the images of the OCI image layout or docker-archive at p.
func (s *Store) Load(ctx context.Context, p string, opts LoadOptions) (LoadResult, error) {
	if opts.Platform.OS == "" {
		opts.Platform = DefaultPlatform()
	}
	format, err := Detect(p)
	if err != nil {
		return LoadResult{}, err
	}
	res := LoadResult{Format: format}
	st, err := s.newStaging()
	if err != nil {
		return res, err
	}
	defer st.close()
	st.progress = opts.Progress
	var refs []named
	switch format {
	case FormatOCIDir:
		refs, err = st.loadLayout(ctx, p, p, opts)
	case FormatOCITar:
		dir := filepath.Join(st.dir, "layout")
		if err = extractLayout(p, dir); err == nil {
			refs, err = st.loadLayout(ctx, p, dir, opts)
		}
	case FormatDockerArchive:
		refs, err = st.loadDockerArchive(ctx, p, opts)
	}
	if err != nil {
		return res, fmt.Errorf("loading %s %q: %w", format, p, err)
	}
	res.Entries, err = st.commit(refs)
	return res, err
}

// extractLayout unpacks the regular files of an OCI layout tar below dir
// through an os.Root, so no name can leave it. Other entry types (docker
// save adds legacy symbolic links) are skipped.
func extractLayout(tarPath, dir string) error {
	if err := os.Mkdir(dir, dirMode); err != nil {
		return fmt.Errorf("creating %q: %w", dir, err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("opening %q: %w", dir, err)
	}
	defer root.Close()
	f, err := os.Open(tarPath)
	if err != nil {
		return err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading tar: %w: %w", ErrFormat, err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		rel := path.Clean(strings.TrimPrefix(h.Name, "./"))
		if rel != layoutFile && rel != indexFile && !strings.HasPrefix(rel, "blobs/") {
			continue
		}
		if path.IsAbs(rel) || rel == ".." || strings.HasPrefix(rel, "../") {
			return fmt.Errorf("tar entry %q leaves the layout: %w", h.Name, ErrFormat)
		}
		if d := path.Dir(rel); d != "." {
			if err := root.MkdirAll(d, dirMode); err != nil {
				return fmt.Errorf("tar entry %q: %w", h.Name, err)
			}
		}
		w, err := root.OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_EXCL, fileMode)
		if err != nil {
			return fmt.Errorf("tar entry %q: %w", h.Name, err)
		}
		_, err = io.Copy(w, tr)
		if cerr := w.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("tar entry %q: %w", h.Name, err)
		}
	}
}

func isIndex(mt types.MediaType) bool {
	return mt == types.OCIImageIndex || mt == types.DockerManifestList
}

func isImage(mt types.MediaType) bool {
	return mt == types.OCIManifestSchema1 || mt == types.DockerManifestSchema2
}

// platformMatches reports whether got (nil when unknown) runs as want.
func platformMatches(want v1.Platform, got *v1.Platform) bool {
	if got == nil || got.Architecture == "" {
		return true
	}
	if got.OS != want.OS || got.Architecture != want.Architecture {
		return false
	}
	return want.Variant == "" || got.Variant == "" || want.Variant == got.Variant
}

// layoutNames returns the normalized references an index descriptor
// carries: the containerd/docker full name, else ref.name when it is a
// full reference rather than a bare tag.
func layoutNames(d v1.Descriptor) []string {
	if n := d.Annotations[annotationContainerdName]; n != "" {
		if norm, _, err := Normalize(n); err == nil {
			return []string{norm}
		}
	}
	if n := d.Annotations[AnnotationRef]; strings.ContainsAny(n, "/:") {
		if norm, _, err := Normalize(n); err == nil {
			return []string{norm}
		}
	}
	return nil
}

type found struct {
	img    v1.Image
	source v1.Hash
	names  []string
}

func (st *staging) loadLayout(ctx context.Context, display, dir string, opts LoadOptions) ([]named, error) {
	lp, err := layout.FromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("opening layout: %w: %w", ErrFormat, err)
	}
	idx, err := lp.ImageIndex()
	if err != nil {
		return nil, fmt.Errorf("reading index.json: %w: %w", ErrFormat, err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("parsing index.json: %w: %w", ErrFormat, err)
	}
	var imgs []found
	for _, d := range im.Manifests {
		switch {
		case isImage(d.MediaType):
			img, err := idx.Image(d.Digest)
			if err != nil {
				return nil, fmt.Errorf("image %s: %w", d.Digest, err)
			}
			imgs = append(imgs, found{img, d.Digest, layoutNames(d)})
		case isIndex(d.MediaType):
			child, err := idx.ImageIndex(d.Digest)
			if err != nil {
				return nil, fmt.Errorf("index %s: %w: %w", d.Digest, ErrMissingBlob, err)
			}
			img, err := selectPlatform(child, opts.Platform)
			if err != nil {
				return nil, fmt.Errorf("index %s: %w", d.Digest, err)
			}
			imgs = append(imgs, found{img, d.Digest, layoutNames(d)})
		}
	}
	if len(imgs) == 0 {
		return nil, fmt.Errorf("index.json lists no image manifests: %w", ErrFormat)
	}
	return st.stageFound(ctx, display, imgs, opts)
}

// selectPlatform returns the image of idx for platform p.
func selectPlatform(idx v1.ImageIndex, p v1.Platform) (v1.Image, error) {
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("parsing index: %w", err)
	}
	var seen []string
	for _, d := range im.Manifests {
		if !isImage(d.MediaType) || d.Platform == nil {
			continue
		}
		seen = append(seen, d.Platform.String())
		if d.Platform.OS == p.OS && d.Platform.Architecture == p.Architecture &&
			(p.Variant == "" || d.Platform.Variant == p.Variant) {
			img, err := idx.Image(d.Digest)
			if err != nil {
				return nil, fmt.Errorf("image %s: %w: %w", d.Digest, ErrMissingBlob, err)
			}
			return img, nil
		}
	}
	return nil, fmt.Errorf("no image for platform %s (the index has %s): %w", p.String(), strings.Join(seen, ", "), ErrUnsupported)
}

func (st *staging) stageFound(ctx context.Context, display string, imgs []found, opts LoadOptions) ([]named, error) {
	if opts.Tag != "" {
		if len(imgs) != 1 {
			return nil, fmt.Errorf("the archive holds %d images; --tag can name only one", len(imgs))
		}
		norm, _, err := Normalize(opts.Tag)
		if err != nil {
			return nil, err
		}
		imgs[0].names = []string{norm}
	}
	var out []named
	for _, f := range imgs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		desc, err := st.putImage(f.img)
		if err != nil {
			return nil, err
		}
		if !platformMatches(opts.Platform, desc.Platform) {
			return nil, fmt.Errorf("image %s is for %s, not %s: %w", desc.Digest, desc.Platform.String(), opts.Platform.String(), ErrUnsupported)
		}
		if len(f.names) == 0 {
			return nil, fmt.Errorf("image %s in %q has no reference name; name it with --tag", desc.Digest, display)
		}
		for _, n := range f.names {
			out = append(out, named{ref: n, desc: desc, source: f.source})
		}
	}
	return out, nil
}

func (st *staging) loadDockerArchive(ctx context.Context, p string, opts LoadOptions) ([]named, error) {
	opener := func() (io.ReadCloser, error) { return os.Open(p) }
	m, err := tarball.LoadManifest(opener)
	if err != nil {
		return nil, fmt.Errorf("reading manifest.json: %w: %w", ErrFormat, err)
	}
	if len(m) == 0 {
		return nil, fmt.Errorf("manifest.json lists no images: %w", ErrFormat)
	}
	var imgs []found
	for i, d := range m {
		var tag *name.Tag
		if len(d.RepoTags) > 0 {
			t, err := name.NewTag(d.RepoTags[0])
			if err != nil {
				return nil, fmt.Errorf("manifest.json image %d tag %q: %w: %w", i, d.RepoTags[0], ErrBadReference, err)
			}
			tag = &t
		} else if len(m) > 1 {
			return nil, fmt.Errorf("manifest.json image %d has no RepoTags in a multi-image archive: %w", i, ErrUnsupported)
		}
		img, err := tarball.Image(opener, tag)
		if err != nil {
			return nil, fmt.Errorf("image %d: %w", i, err)
		}
		var names []string
		for _, t := range d.RepoTags {
			norm, _, err := Normalize(t)
			if err != nil {
				return nil, err
			}
			names = append(names, norm)
		}
		// The manifest digest is known only once the image is staged;
		// stageFound fills the source below.
		imgs = append(imgs, found{img: img, names: names})
	}
	refs, err := st.stageFound(ctx, p, imgs, opts)
	if err != nil {
		return nil, err
	}
	for i := range refs {
		refs[i].source = refs[i].desc.Digest
	}
	return refs, nil
}
