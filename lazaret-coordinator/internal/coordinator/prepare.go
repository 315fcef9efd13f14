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
	"lazaret.dev/pkg/store"
)

// imageConfig is what the sandbox uses of the image configuration.
type imageConfig struct {
	Entrypoint, Cmd, Env []string
	User, WorkingDir     string
}

// ErrImageMissing means the profile's image is not in the local image
// store.
var ErrImageMissing = errors.New("image is not in the local image store")

// preparedLower is the PreparedLower participant: the profile's image
// prepared for the State Anchor's ID map, and this generation's catalog
// lease on it. Its fields are written by Start, before any later step
// reads them, and by Release, after every later step was released.
type preparedLower struct {
	s *scope
	// released carries the State Anchor's release evidence into the
	// lease's ReleaseIntent; the anchor participant is released first.
	released func() *domainstore.StateAnchorReleaseEvidence

	preparer *prepare.Preparer
	artifact catalog.PreparedArtifact
	leased   bool
	config   imageConfig
}

func (p *preparedLower) Step() Step            { return StepPrepare }
func (p *preparedLower) Lost() <-chan struct{} { return nil }

// Start prepares the image and takes the lease, recording the lease as
// intended before the catalog holds it.
func (p *preparedLower) Start(ctx context.Context) error {
	s := p.s
	const role = domainstore.RolePreparedLower
	if err := s.intent(role); err != nil {
		return err
	}
	ref := s.cfg.Image()
	imagesDir := filepath.Join(s.storageRoot, "images")
	if _, err := os.Stat(imagesDir); errors.Is(err, os.ErrNotExist) {
		return imageMissing(ref, imagesDir)
	}
	images, err := imgstore.Open(imagesDir, s.log)
	if err != nil {
		return fmt.Errorf("opening the image store %q: %w", imagesDir, err)
	}
	img, err := images.Open(ref)
	if errors.Is(err, imgstore.ErrNotFound) {
		return imageMissing(ref, imagesDir)
	}
	if err != nil {
		return fmt.Errorf("opening image %q: %w", ref, err)
	}
	if c := img.Config; c != nil {
		p.config = imageConfig{
			Entrypoint: c.Config.Entrypoint, Cmd: c.Config.Cmd, Env: c.Config.Env,
			User: c.Config.User, WorkingDir: c.Config.WorkingDir,
		}
	}
	img.Close()

	p.preparer = &prepare.Preparer{Root: s.storageRoot, Images: images, Log: s.log}
	art, err := p.preparer.Prepare(ctx, ref, s.idMap)
	if errors.Is(err, imgstore.ErrNotFound) {
		return imageMissing(ref, imagesDir)
	}
	if err != nil {
		return fmt.Errorf("preparing image %q for ID map %s: %w", ref, s.idMap, err)
	}
	p.artifact = art
	s.log.Info("image prepared", "image", ref, "artifact", art.PreparedArtifactID.String(), "path", art.Path)

	if err := s.update(role, domainstore.StateIntent, func(o *domainstore.ParticipantOwnership) {
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
	if err := p.preparer.Acquire(p.lease()); err != nil {
		return fmt.Errorf("leasing prepared artifact %s: %w", art.PreparedArtifactID, err)
	}
	p.leased = true
	return s.update(role, domainstore.StateLeaseHeld, func(o *domainstore.ParticipantOwnership) {
		o.PreparedLower.LeaseState = ptr(domainstore.LeaseHeld)
	})
}

func (p *preparedLower) lease() catalog.ArtifactLease {
	return catalog.ArtifactLease{PreparedArtifactID: p.artifact.PreparedArtifactID, DomainID: p.s.domain, GenerationID: p.s.id}
}

func imageMissing(ref, dir string) error {
	return fmt.Errorf("%w: %q is not in %q; add it with `lazaret-cli image load FILE`, `lazaret-cli image pull %s` or `lazaret-cli image build-dir DIR --tag %s`",
		ErrImageMissing, ref, dir, ref, ref)
}

// Release releases the lease, after the State Anchor (whose release
// evidence it carries) is gone.
func (p *preparedLower) Release(context.Context) error {
	s := p.s
	const role = domainstore.RolePreparedLower
	var anchorEvidence *domainstore.StateAnchorReleaseEvidence
	if p.released != nil {
		anchorEvidence = p.released()
	}
	if err := s.releaseIntent(role, func(o *domainstore.ParticipantOwnership) {
		if o.PreparedLower.LeaseState != nil {
			o.PreparedLower.LeaseState = ptr(domainstore.LeaseReleaseIntent)
		}
		o.PreparedLower.ReleasedStateAnchor = anchorEvidence
	}); err != nil {
		return err
	}
	if p.leased {
		s.log.Info("releasing the image lease", "artifact", p.artifact.PreparedArtifactID.String(),
			"state_anchor_release_evidence", anchorEvidence != nil)
		if err := p.preparer.Release(p.lease()); err != nil {
			return fmt.Errorf("releasing the lease on prepared artifact %s: %w", p.artifact.PreparedArtifactID, err)
		}
		p.leased = false
	}
	return s.clean(role, "catalog lease removed in the same catalog transaction that checked it")
}

// recoverPreparedLower removes the recorded lease in the catalog
// transaction that checks it.
func recoverPreparedLower(s *scope, o *domainstore.ParticipantOwnership) (string, error) {
	pl := o.PreparedLower
	if pl.PreparedArtifactID == nil || pl.LeaseState == nil {
		return "no lease was taken", nil
	}
	prep := &prepare.Preparer{Root: s.storageRoot, Log: s.log}
	err := prep.Release(catalog.ArtifactLease{PreparedArtifactID: *pl.PreparedArtifactID, DomainID: s.domain, GenerationID: s.id})
	switch {
	case errors.Is(err, store.ErrNotFound):
		return "the catalog holds no lease for this generation any more", nil
	case err != nil:
		return "", fmt.Errorf("releasing the lease on prepared artifact %s: %w", *pl.PreparedArtifactID, err)
	}
	return "catalog lease removed in the same catalog transaction that checked it", nil
}
