package prepare

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"lazaret.dev/pkg/catalog"
	"lazaret.dev/pkg/ids"
	pstore "lazaret.dev/pkg/store"
)

// Acquire records a generation's lease on an Available artifact.
func (p *Preparer) Acquire(l catalog.ArtifactLease) error {
	return p.withCatalog(func(c *catalog.Catalog) error {
		return c.Update(func(tx *catalog.Tx) error { return tx.AcquireLease(l) })
	})
}

// Release removes a generation's lease.
func (p *Preparer) Release(l catalog.ArtifactLease) error {
	return p.withCatalog(func(c *catalog.Catalog) error {
		return c.Update(func(tx *catalog.Tx) error { return tx.ReleaseLease(l) })
	})
}

// ReclaimResult lists what Reclaim removed and what it left.
type ReclaimResult struct {
	Reclaimed []ids.Digest
	// Leased counts artifacts kept because a lease names them.
	Leased int
}

// Reclaim removes every artifact no lease names, and finishes reclaims an
// earlier run left in Reclaiming. Each artifact moves to Reclaiming in one
// transaction (refused while leased, and a Reclaiming artifact cannot be
// leased), its directory is removed after its device and inode are checked,
// and its record is deleted with that proof.
func (p *Preparer) Reclaim() (ReclaimResult, error) {
	var res ReclaimResult
	var contents catalog.Contents
	err := p.withCatalog(func(c *catalog.Catalog) error {
		return c.View(func(tx *catalog.Tx) error {
			var err error
			contents, err = tx.Scan()
			return err
		})
	})
	if err != nil {
		return res, err
	}
	leased := map[ids.Digest]bool{}
	for _, l := range contents.Leases {
		leased[l.PreparedArtifactID] = true
	}
	for _, a := range contents.Artifacts {
		if leased[a.PreparedArtifactID] {
			res.Leased++
			continue
		}
		err := p.ReclaimArtifact(a.PreparedArtifactID)
		if errors.Is(err, pstore.ErrIllegalTransition) {
			// Leased since the scan.
			res.Leased++
			continue
		}
		if err != nil {
			return res, err
		}
		res.Reclaimed = append(res.Reclaimed, a.PreparedArtifactID)
	}
	return res, nil
}

// ReclaimArtifact reclaims one unleased artifact.
func (p *Preparer) ReclaimArtifact(id ids.Digest) error {
	var a catalog.PreparedArtifact
	err := p.withCatalog(func(c *catalog.Catalog) error {
		return c.Update(func(tx *catalog.Tx) error {
			if err := tx.SetArtifactState(id, catalog.ArtifactReclaiming); err != nil {
				return err
			}
			var err error
			a, err = tx.Artifact(id)
			return err
		})
	})
	if err != nil {
		return fmt.Errorf("reclaiming artifact %s: %w", id, err)
	}
	if err := removeOwned(a.Path, fileID{a.Device, a.Inode}); err != nil {
		return fmt.Errorf("reclaiming artifact %s: %w", id, err)
	}
	p.log().Info("artifact directory removed", "artifact", id.String(), "path", a.Path)
	return p.withCatalog(func(c *catalog.Catalog) error {
		return c.Update(func(tx *catalog.Tx) error {
			return tx.DeleteArtifact(id, pstore.ProvenAbsent("artifact directory removed after identity check"))
		})
	})
}

// RecoverResult lists what Recover cleaned and what it could not.
type RecoverResult struct {
	Removed int
	// Unresolved names stages Recover may not remove: an Intent stage that
	// exists (no identity was recorded for it) or a directory whose
	// identity differs from the record.
	Unresolved []string
}

// Recover cleans up preparations that ended without publishing: for each
// operation whose stage lock nobody holds, an Owned stage (or its artifact
// path, when the rename happened but the publish did not commit) whose
// device and inode match is removed and the operation deleted; an Intent
// operation whose stage never appeared is deleted.
func (p *Preparer) Recover() (RecoverResult, error) {
	if err := p.ensureDir(); err != nil {
		return RecoverResult{}, err
	}
	var res RecoverResult
	err := p.withCatalog(func(c *catalog.Catalog) error {
		var err error
		res, err = p.recover(c)
		return err
	})
	return res, err
}

func (p *Preparer) recover(c *catalog.Catalog) (RecoverResult, error) {
	var res RecoverResult
	var contents catalog.Contents
	if err := c.View(func(tx *catalog.Tx) error {
		var err error
		contents, err = tx.Scan()
		return err
	}); err != nil {
		return res, err
	}
	known := map[string]bool{}
	published := map[ids.Digest]bool{}
	for _, a := range contents.Artifacts {
		published[a.PreparedArtifactID] = true
	}
	for _, o := range contents.Operations {
		known[filepath.Base(o.StagePath)] = true
		if stageLive(o.StagePath) {
			continue
		}
		proof, unresolved, err := p.recoverOne(o, published[o.ExpectedArtifactID])
		if err != nil {
			return res, err
		}
		if unresolved != "" {
			res.Unresolved = append(res.Unresolved, unresolved)
			continue
		}
		if err := c.Update(func(tx *catalog.Tx) error {
			return tx.DeleteOperation(o.OperationID, pstore.ProvenAbsent(proof))
		}); err != nil {
			return res, err
		}
		p.log().Info("abandoned prepare operation recovered", "operation", o.OperationID.String(), "stage", o.StagePath, "proof", proof)
		res.Removed++
	}
	// Lock files of preparations that ended without removing them.
	ents, err := os.ReadDir(p.dir())
	if err != nil {
		return res, fmt.Errorf("listing %q: %w", p.dir(), err)
	}
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), lockSuffix)
		if !ok || !isStageName(name) || known[name] {
			continue
		}
		stage := filepath.Join(p.dir(), name)
		if _, err := os.Lstat(stage); err == nil || stageLive(stage) {
			continue
		}
		os.Remove(stage + lockSuffix)
	}
	return res, nil
}

// recoverOne removes what an abandoned operation left and returns the
// proof for deleting it, or the path it could not resolve.
func (p *Preparer) recoverOne(o catalog.PrepareOperation, published bool) (proof, unresolved string, err error) {
	_, serr := os.Lstat(o.StagePath)
	stageExists := serr == nil
	if serr != nil && !errors.Is(serr, os.ErrNotExist) {
		return "", "", fmt.Errorf("inspecting stage %q: %w", o.StagePath, serr)
	}
	if o.StageState == catalog.StageIntent {
		if stageExists {
			return "", o.StagePath, nil
		}
		return "stage directory never created", "", nil
	}
	owned := fileID{*o.Device, *o.Inode}
	if stageExists {
		if err := removeOwned(o.StagePath, owned); err != nil {
			if errors.Is(err, ErrIdentity) {
				return "", o.StagePath, nil
			}
			return "", "", err
		}
		return "owned stage removed after identity check", "", nil
	}
	final := p.ArtifactPath(o.ExpectedArtifactID)
	if !published {
		if got, err := identityOf(final); err == nil && got == owned {
			if err := removeOwned(final, owned); err != nil {
				return "", "", err
			}
			return "renamed but unpublished stage removed after identity check", "", nil
		}
	}
	return "owned stage absent", "", nil
}
