package coordinator

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"lazaret.dev/pkg/catalog"
	"lazaret.dev/pkg/domainstore"
	"lazaret.dev/pkg/image/prepare"
	imgstore "lazaret.dev/pkg/image/store"
)

// imageConfig is what the sandbox uses of the image configuration.
type imageConfig struct {
	Entrypoint, Cmd, Env []string
	User, WorkingDir     string
}

// ErrImageMissing means the profile's image is not in the local image
// store.
var ErrImageMissing = errors.New("image is not in the local image store")

// startPrepare is the PreparedLower step: the profile's image prepared for
// the State Anchor's ID map, and this generation's lease on it.
func (g *generation) startPrepare(ctx context.Context) error {
	const role = domainstore.RolePreparedLower
	if err := g.intent(role); err != nil {
		return err
	}
	ref := g.cfg.Image()
	imagesDir := filepath.Join(g.cfg.StorageRoot(), "images")
	if _, err := os.Stat(imagesDir); errors.Is(err, os.ErrNotExist) {
		return imageMissing(ref, imagesDir)
	}
	images, err := imgstore.Open(imagesDir, g.log)
	if err != nil {
		return fmt.Errorf("opening the image store %q: %w", imagesDir, err)
	}
	g.images = images
	img, err := images.Open(ref)
	if errors.Is(err, imgstore.ErrNotFound) {
		return imageMissing(ref, imagesDir)
	}
	if err != nil {
		return fmt.Errorf("opening image %q: %w", ref, err)
	}
	if c := img.Config; c != nil {
		g.imageCfg = imageConfig{
			Entrypoint: c.Config.Entrypoint, Cmd: c.Config.Cmd, Env: c.Config.Env,
			User: c.Config.User, WorkingDir: c.Config.WorkingDir,
		}
	}
	img.Close()

	g.preparer = &prepare.Preparer{Root: g.cfg.StorageRoot(), Images: images, Log: g.log}
	art, err := g.preparer.Prepare(ctx, ref, g.idMap)
	if errors.Is(err, imgstore.ErrNotFound) {
		return imageMissing(ref, imagesDir)
	}
	if err != nil {
		return fmt.Errorf("preparing image %q for ID map %s: %w", ref, g.idMap, err)
	}
	g.artifact = art
	g.log.Info("image prepared", "image", ref, "artifact", art.PreparedArtifactID.String(), "path", art.Path)

	// The lease is recorded as intended before the catalog holds it.
	if err := g.update(role, domainstore.StateIntent, func(o *domainstore.ParticipantOwnership) {
		pl := o.PreparedLower
		pl.PreparedArtifactID = ptr(art.PreparedArtifactID)
		pl.SourceIdentity = ptr(art.SourceIdentity)
		pl.LeaseState = ptr(domainstore.LeaseIntent)
		pl.Path = ptr(art.Path)
		pl.Device = ptr(art.Device)
		pl.Inode = ptr(art.Inode)
	}); err != nil {
		return err
	}
	if err := g.preparer.Acquire(g.lease()); err != nil {
		return fmt.Errorf("leasing prepared artifact %s: %w", art.PreparedArtifactID, err)
	}
	g.leased = true
	return g.update(role, domainstore.StateLeaseHeld, func(o *domainstore.ParticipantOwnership) {
		o.PreparedLower.LeaseState = ptr(domainstore.LeaseHeld)
	})
}

func (g *generation) lease() catalog.ArtifactLease {
	return catalog.ArtifactLease{PreparedArtifactID: g.artifact.PreparedArtifactID, DomainID: g.domain, GenerationID: g.id}
}

func imageMissing(ref, dir string) error {
	return fmt.Errorf("%w: %q is not in %q; add it with `lazaret-cli image load FILE`, `lazaret-cli image pull %s` or `lazaret-cli image build-dir DIR --tag %s`",
		ErrImageMissing, ref, dir, ref, ref)
}

// releasePrepare releases the lease, after the State Anchor (whose release
// evidence it carries) is gone.
func (g *generation) releasePrepare() error {
	const role = domainstore.RolePreparedLower
	if err := g.releaseIntent(role, func(o *domainstore.ParticipantOwnership) {
		if o.PreparedLower.LeaseState != nil {
			o.PreparedLower.LeaseState = ptr(domainstore.LeaseReleaseIntent)
		}
		if g.released != nil {
			ev := *g.released
			o.PreparedLower.ReleasedStateAnchor = &domainstore.StateAnchorReleaseEvidence{
				Daemon:         committed(ev.Daemon),
				UserNamespace:  ev.UserNamespace,
				MountNamespace: ev.MountNamespace,
				Mount:          ev.Mount,
			}
		}
	}); err != nil {
		return err
	}
	if g.leased {
		if err := g.preparer.Release(g.lease()); err != nil {
			return fmt.Errorf("releasing the lease on prepared artifact %s: %w", g.artifact.PreparedArtifactID, err)
		}
		g.leased = false
	}
	return g.clean(role, "catalog lease removed in the same catalog transaction that checked it")
}
