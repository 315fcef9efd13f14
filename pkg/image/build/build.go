// Package build writes small OCI images from directory trees: the test
// images of Lazaret's own suites and images a developer makes without a
// registry (`lazaret-cli image build-dir`). It is not a Dockerfile
// builder: one directory becomes one layer, and the config carries only
// the fields a sandbox uses.
//
// Layers are reproducible: entries appear in byte order of their path,
// owned by 0:0, with hard links recorded once, and with every time set to
// Options.Time when it is nonzero.
package build

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// ErrSource means the directory tree holds something a layer cannot
// carry (a socket or device node).
var ErrSource = errors.New("directory entry cannot go into an image layer")

// Options shape a layer.
type Options struct {
	// Time, when nonzero, replaces every modification time, so the same
	// tree gives the same layer digest.
	Time time.Time
}

// Config is the image configuration a sandbox reads.
type Config struct {
	Entrypoint []string
	Cmd        []string
	Env        []string
	User       string
	WorkingDir string
	// Platform defaults to linux on the host architecture.
	Platform v1.Platform
	// Created defaults to the Unix epoch, for reproducible images.
	Created time.Time
}

// LayerTar writes the tree below dir as an uncompressed layer tar to w.
// Symbolic links are stored as links, never followed.
func LayerTar(dir string, w io.Writer, opts Options) error {
	tw := tar.NewWriter(w)
	links := map[[2]uint64]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == dir {
			return nil
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		var target string
		if fi.Mode()&fs.ModeSymlink != 0 {
			if target, err = os.Readlink(p); err != nil {
				return err
			}
		}
		h, err := tar.FileInfoHeader(fi, target)
		if err != nil {
			return fmt.Errorf("%q: %w: %w", p, ErrSource, err)
		}
		switch h.Typeflag {
		case tar.TypeReg, tar.TypeDir, tar.TypeSymlink:
		default:
			return fmt.Errorf("%q has type %q: %w", p, h.Typeflag, ErrSource)
		}
		h.Name = rel
		if h.Typeflag == tar.TypeDir {
			h.Name += "/"
		}
		h.Uid, h.Gid, h.Uname, h.Gname = 0, 0, "", ""
		h.Format = tar.FormatPAX
		h.AccessTime, h.ChangeTime = time.Time{}, time.Time{}
		if !opts.Time.IsZero() {
			h.ModTime = opts.Time
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && h.Typeflag == tar.TypeReg && st.Nlink > 1 {
			key := [2]uint64{st.Dev, st.Ino}
			if first, ok := links[key]; ok {
				h.Typeflag, h.Linkname, h.Size = tar.TypeLink, first, 0
			} else {
				links[key] = rel
			}
		}
		if err := tw.WriteHeader(h); err != nil {
			return fmt.Errorf("%q: %w", p, err)
		}
		if h.Typeflag != tar.TypeReg {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		if _, err := io.Copy(tw, f); err != nil {
			return fmt.Errorf("%q: %w", p, err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("layer from %q: %w", dir, err)
	}
	return tw.Close()
}

// Layer returns the tree below dir as a gzip-compressed OCI layer. The
// uncompressed tar is held in memory: this is for small trees.
func Layer(dir string, opts Options) (v1.Layer, error) {
	var b bytes.Buffer
	if err := LayerTar(dir, &b, opts); err != nil {
		return nil, err
	}
	data := b.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithMediaType(types.OCILayer))
}

// Image assembles an OCI image from layers (lowest first) and cfg.
func Image(layers []v1.Layer, cfg Config) (v1.Image, error) {
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err := mutate.AppendLayers(img, layers...)
	if err != nil {
		return nil, fmt.Errorf("appending layers: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("reading config: %w", err)
	}
	cf = cf.DeepCopy()
	p := cfg.Platform
	if p.OS == "" {
		p = v1.Platform{OS: "linux", Architecture: hostArch()}
	}
	cf.OS, cf.Architecture, cf.Variant = p.OS, p.Architecture, p.Variant
	created := cfg.Created
	if created.IsZero() {
		created = time.Unix(0, 0)
	}
	cf.Created = v1.Time{Time: created.UTC()}
	cf.Config.Entrypoint = cfg.Entrypoint
	cf.Config.Cmd = cfg.Cmd
	cf.Config.Env = cfg.Env
	cf.Config.User = cfg.User
	cf.Config.WorkingDir = cfg.WorkingDir
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("setting config: %w", err)
	}
	return img, nil
}

func hostArch() string { return runtime.GOARCH }
