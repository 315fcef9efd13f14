package prepare

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/sys/unix"

	"lazaret.dev/pkg/catalog"
	"lazaret.dev/pkg/ids"
	"lazaret.dev/pkg/image/idmap"
	"lazaret.dev/pkg/image/store"
	"lazaret.dev/pkg/image/unpack"
	pstore "lazaret.dev/pkg/store"
)

// ArtifactDomain separates the artifact ID preimage.
const ArtifactDomain = "lazaret-prepared-artifact-v1"

const (
	artifactsDir = "artifacts"
	stagePrefix  = "stage-"
	lockSuffix   = ".lock"
)

// Errors callers test with errors.Is.
var (
	// ErrIdentity means a directory's device and inode no longer match
	// what the catalog recorded; Lazaret will not use or delete it.
	ErrIdentity = errors.New("directory identity does not match the catalog")
	// ErrReclaiming means the artifact is being reclaimed; prepare again
	// once reclaim finishes.
	ErrReclaiming = errors.New("prepared artifact is being reclaimed")
)

// Identity is what a prepared artifact is made from.
type Identity struct {
	Source   ids.Digest
	Manifest ids.Digest
	Policy   ids.Digest
	IDMap    ids.Digest
}

// ArtifactID returns prepared_artifact_id for the identity.
func (i Identity) ArtifactID() ids.Digest {
	h := sha256.New()
	h.Write([]byte(ArtifactDomain))
	h.Write([]byte{0})
	for _, d := range []ids.Digest{i.Source, i.Manifest, i.Policy, i.IDMap} {
		h.Write(d[:])
	}
	var out ids.Digest
	h.Sum(out[:0])
	return out
}

// PolicyDigest returns policy_id: SHA-256 of unpack.PolicyID.
func PolicyDigest() ids.Digest { return sha256.Sum256([]byte(unpack.PolicyID)) }

func digestOf(h v1.Hash) (ids.Digest, error) {
	var d ids.Digest
	if h.Algorithm != "sha256" {
		return d, fmt.Errorf("digest %s: only sha256 is supported", h)
	}
	if err := ids.ParseHex(d[:], h.Hex, "digest "+h.String()); err != nil {
		return d, err
	}
	return d, nil
}

// Preparer prepares, leases and reclaims artifacts of one storage root.
type Preparer struct {
	// Root is the storage root: absolute and canonical.
	Root string
	// Images is the image store to read from.
	Images *store.Store
	// OpenCatalog opens the Storage Catalog for a short sequence of
	// transactions; nil opens catalog.Open(Root) with Create.
	OpenCatalog func() (*catalog.Catalog, error)
	// Log receives one record per step; nil discards.
	Log *slog.Logger
}

func (p *Preparer) log() *slog.Logger {
	if p.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return p.Log
}

func (p *Preparer) dir() string { return filepath.Join(p.Root, artifactsDir) }

// ArtifactPath returns where artifact id lives.
func (p *Preparer) ArtifactPath(id ids.Digest) string { return filepath.Join(p.dir(), id.String()) }

func (p *Preparer) withCatalog(fn func(c *catalog.Catalog) error) error {
	open := p.OpenCatalog
	if open == nil {
		open = func() (*catalog.Catalog, error) {
			return catalog.Open(p.Root, catalog.Options{Create: true, LockTimeout: 30 * time.Second})
		}
	}
	c, err := open()
	if err != nil {
		return fmt.Errorf("opening the storage catalog: %w", err)
	}
	err = fn(c)
	if cerr := c.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("closing the storage catalog: %w", cerr)
	}
	return err
}

func (p *Preparer) ensureDir() error {
	if !filepath.IsAbs(p.Root) {
		return fmt.Errorf("storage root %q is not absolute", p.Root)
	}
	if err := os.MkdirAll(p.dir(), 0o700); err != nil {
		return fmt.Errorf("creating artifact directory %q: %w", p.dir(), err)
	}
	return nil
}

type fileID struct{ dev, ino uint64 }

func identityOf(path string) (fileID, error) {
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		return fileID{}, &os.PathError{Op: "lstat", Path: path, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return fileID{}, fmt.Errorf("%q is not a directory: %w", path, ErrIdentity)
	}
	return fileID{st.Dev, st.Ino}, nil
}

// Prepare returns the Available artifact of image ref for ID map m,
// preparing it when the catalog has none. Concurrent preparers of the same
// image and map, in this or other processes, end with one artifact.
func (p *Preparer) Prepare(ctx context.Context, ref string, m idmap.Map) (catalog.PreparedArtifact, error) {
	if err := p.ensureDir(); err != nil {
		return catalog.PreparedArtifact{}, err
	}
	img, err := p.Images.Open(ref)
	if err != nil {
		return catalog.PreparedArtifact{}, err
	}
	defer img.Close()
	id, err := p.identity(img, m)
	if err != nil {
		return catalog.PreparedArtifact{}, fmt.Errorf("image %s: %w", img.Ref, err)
	}
	artID := id.ArtifactID()
	log := p.log().With("image", img.Ref, "artifact", artID.String())

	opID := ids.OperationID(ids.New())
	stage := filepath.Join(p.dir(), stagePrefix+opID.String())
	lock, err := lockStage(stage)
	if err != nil {
		return catalog.PreparedArtifact{}, err
	}
	defer lock.release()

	// Intent, stage, Owned.
	var existing *catalog.PreparedArtifact
	var stageFD *os.File
	err = p.withCatalog(func(c *catalog.Catalog) error {
		if _, err := p.recover(c); err != nil {
			return err
		}
		err := c.Update(func(tx *catalog.Tx) error {
			a, err := tx.Artifact(artID)
			switch {
			case err == nil:
				existing = &a
				return nil
			case !errors.Is(err, pstore.ErrNotFound):
				return err
			}
			return tx.PutOperation(catalog.PrepareOperation{
				OperationID: opID, ExpectedArtifactID: artID,
				SourceIdentity: id.Source, SelectedManifestDigest: id.Manifest,
				PolicyID: id.Policy, IDMapDigest: id.IDMap,
				StagePath: stage, StageState: catalog.StageIntent,
			})
		})
		if err != nil || existing != nil {
			return err
		}
		log.Info("prepare operation recorded", "operation", opID.String(), "stage", stage)
		if err := os.Mkdir(stage, 0o700); err != nil {
			derr := c.Update(func(tx *catalog.Tx) error {
				return tx.DeleteOperation(opID, pstore.ProvenAbsent("stage directory was never created"))
			})
			return errors.Join(fmt.Errorf("creating stage %q: %w", stage, err), derr)
		}
		fd, err := os.OpenFile(stage, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("opening stage %q: %w", stage, err)
		}
		var st unix.Stat_t
		if err := unix.Fstat(int(fd.Fd()), &st); err != nil {
			fd.Close()
			return fmt.Errorf("inspecting stage %q: %w", stage, err)
		}
		dev, ino := st.Dev, st.Ino
		if err := c.Update(func(tx *catalog.Tx) error {
			o, err := tx.Operation(opID)
			if err != nil {
				return err
			}
			o.StageState, o.Device, o.Inode = catalog.StageOwned, &dev, &ino
			return tx.PutOperation(o)
		}); err != nil {
			fd.Close()
			return err
		}
		stageFD = fd
		return nil
	})
	if err != nil {
		if stageFD != nil {
			stageFD.Close()
		}
		return catalog.PreparedArtifact{}, fmt.Errorf("preparing %s: %w", img.Ref, err)
	}
	if existing != nil {
		return p.checkExisting(*existing)
	}
	defer stageFD.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(stageFD.Fd()), &st); err != nil {
		return catalog.PreparedArtifact{}, fmt.Errorf("inspecting stage %q: %w", stage, err)
	}
	owned := fileID{st.Dev, st.Ino}

	// Unpack.
	start := time.Now()
	layers := make([]unpack.Layer, len(img.Layers))
	for i, l := range img.Layers {
		layers[i] = unpack.Layer{Digest: l.Digest.String(), Open: func() (io.ReadCloser, error) { return img.OpenLayer(i) }}
	}
	stats, err := unpack.Apply(ctx, stageFD, layers, unpack.Options{IDMap: m, Logger: log})
	if err == nil {
		err = checkIdentity(stageFD, stage, owned)
	}
	if err != nil {
		return catalog.PreparedArtifact{}, errors.Join(fmt.Errorf("preparing %s: %w", img.Ref, err), p.discard(opID, stage, owned))
	}
	log.Info("layers applied", "stage", stage, "entries", stats.Entries, "duration", time.Since(start).String(),
		"owners_collapsed", stats.OwnersCollapsed, "mode_bits_dropped", stats.ModeBitsDropped, "xattrs_dropped", stats.XattrsDropped)

	// Publish, or lose to an earlier publisher.
	final := p.ArtifactPath(artID)
	var published catalog.PreparedArtifact
	lost := false
	err = p.withCatalog(func(c *catalog.Catalog) error {
		return c.Update(func(tx *catalog.Tx) error {
			if a, err := tx.Artifact(artID); err == nil {
				published, lost = a, true
				return nil
			} else if !errors.Is(err, pstore.ErrNotFound) {
				return err
			}
			if err := unix.Renameat2(unix.AT_FDCWD, stage, unix.AT_FDCWD, final, unix.RENAME_NOREPLACE); err != nil {
				return fmt.Errorf("renaming stage %q to %q (a leftover directory without a catalog record is removed by recovery): %w", stage, final, err)
			}
			a, err := tx.Publish(opID, final)
			if err != nil {
				if rerr := unix.Renameat2(unix.AT_FDCWD, final, unix.AT_FDCWD, stage, unix.RENAME_NOREPLACE); rerr != nil {
					err = errors.Join(err, fmt.Errorf("moving %q back to its stage: %w", final, rerr))
				}
				return err
			}
			published = a
			return nil
		})
	})
	if err != nil {
		return catalog.PreparedArtifact{}, errors.Join(fmt.Errorf("publishing %s: %w", img.Ref, err), p.discardIfStaged(opID, stage, owned))
	}
	if lost {
		log.Info("another preparer published first; discarding stage", "stage", stage)
		if err := p.discard(opID, stage, owned); err != nil {
			return catalog.PreparedArtifact{}, err
		}
		return p.checkExisting(published)
	}
	log.Info("artifact published", "path", final, "device", published.Device, "inode", published.Inode)
	return published, nil
}

func (p *Preparer) identity(img *store.Image, m idmap.Map) (Identity, error) {
	src, err := digestOf(img.Source)
	if err != nil {
		return Identity{}, err
	}
	man, err := digestOf(img.Manifest)
	if err != nil {
		return Identity{}, err
	}
	idm, err := m.Digest()
	if err != nil {
		return Identity{}, err
	}
	return Identity{Source: src, Manifest: man, Policy: PolicyDigest(), IDMap: idm}, nil
}

// checkExisting returns a published artifact after checking its directory
// is the one the catalog recorded.
func (p *Preparer) checkExisting(a catalog.PreparedArtifact) (catalog.PreparedArtifact, error) {
	if a.State != catalog.ArtifactAvailable {
		return a, fmt.Errorf("artifact %s: %w", a.PreparedArtifactID, ErrReclaiming)
	}
	got, err := identityOf(a.Path)
	if err != nil {
		return a, fmt.Errorf("artifact %s: %w", a.PreparedArtifactID, err)
	}
	if got != (fileID{a.Device, a.Inode}) {
		return a, fmt.Errorf("artifact %s at %q is device %d inode %d, the catalog recorded %d/%d: %w",
			a.PreparedArtifactID, a.Path, got.dev, got.ino, a.Device, a.Inode, ErrIdentity)
	}
	return a, nil
}

func checkIdentity(fd *os.File, path string, want fileID) error {
	var st unix.Stat_t
	if err := unix.Fstat(int(fd.Fd()), &st); err != nil {
		return fmt.Errorf("inspecting stage %q: %w", path, err)
	}
	got, err := identityOf(path)
	if err != nil {
		return err
	}
	if (fileID{st.Dev, st.Ino}) != want || got != want {
		return fmt.Errorf("stage %q was replaced while it was prepared: %w", path, ErrIdentity)
	}
	return nil
}

// discard removes an owned stage whose identity still matches and deletes
// its operation with that proof.
func (p *Preparer) discard(opID ids.OperationID, stage string, owned fileID) error {
	if err := removeOwned(stage, owned); err != nil {
		return err
	}
	return p.withCatalog(func(c *catalog.Catalog) error {
		return c.Update(func(tx *catalog.Tx) error {
			return tx.DeleteOperation(opID, pstore.ProvenAbsent("stage directory removed after identity check"))
		})
	})
}

// discardIfStaged discards after a failed publish when the stage is still
// in place; otherwise recovery handles it.
func (p *Preparer) discardIfStaged(opID ids.OperationID, stage string, owned fileID) error {
	if _, err := identityOf(stage); err != nil {
		return nil
	}
	return p.discard(opID, stage, owned)
}

// removeOwned removes dir when its device and inode are want; a missing
// dir is already gone.
func removeOwned(dir string, want fileID) error {
	got, err := identityOf(dir)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return err
	}
	if got != want {
		return fmt.Errorf("%q is device %d inode %d, recorded %d/%d; not removing it: %w", dir, got.dev, got.ino, want.dev, want.ino, ErrIdentity)
	}
	return unpack.RemoveTree(dir)
}

// stageLock is the flock held beside a stage while it is prepared.
type stageLock struct{ f *os.File }

func lockStage(stage string) (*stageLock, error) {
	f, err := os.OpenFile(stage+lockSuffix, os.O_RDWR|os.O_CREATE|os.O_EXCL|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("creating stage lock: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("locking stage %q: %w", stage, err)
	}
	return &stageLock{f}, nil
}

func (l *stageLock) release() {
	os.Remove(l.f.Name())
	l.f.Close()
}

// stageLive reports whether a preparer still holds stage's lock.
func stageLive(stage string) bool {
	f, err := os.OpenFile(stage+lockSuffix, os.O_RDWR|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	return errors.Is(unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB), unix.EWOULDBLOCK)
}

func isStageName(name string) bool {
	return strings.HasPrefix(name, stagePrefix) && len(name) == len(stagePrefix)+2*len(ids.OperationID{}) &&
		isHex(name[len(stagePrefix):])
}

func isHex(s string) bool {
	_, err := hex.DecodeString(s)
	return err == nil
}
