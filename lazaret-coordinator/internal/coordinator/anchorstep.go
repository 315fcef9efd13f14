package coordinator

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"lazaret.dev/pkg/anchor"
	"lazaret.dev/pkg/domainstore"
	"lazaret.dev/pkg/hostid"
)

func committed(id hostid.PidfsProcessIdentityV1) hostid.PersistedHostProcessOwnership {
	return hostid.CommittedOwnership(id)
}

// startAnchor is the StateAnchor step (MountStateAnchor): the user and
// mount namespaces and the overlay root, lower = the prepared artifact,
// upper and work = the Domain's state under the storage root, merged =
// the generation's rootfs directory.
func (g *generation) startAnchor(ctx context.Context, stderr io.Writer) error {
	const role = domainstore.RoleStateAnchor
	stateDir := filepath.Join(g.cfg.StorageRoot(), "state", g.domain.String())
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return fmt.Errorf("creating the Domain state directory %q: %w", stateDir, err)
	}
	upper, work, merged := filepath.Join(stateDir, "upper"), filepath.Join(stateDir, "work"), g.rootfsDir()
	if err := g.intent(role); err != nil {
		return err
	}
	if err := g.update(role, domainstore.StateIntent, func(o *domainstore.ParticipantOwnership) {
		sa := o.StateAnchor
		sa.LowerArtifactID = ptr(g.artifact.PreparedArtifactID)
		sa.UpperPath = ptr(upper)
		sa.WorkPath = ptr(work)
		sa.MergedPath = ptr(merged)
	}); err != nil {
		return err
	}
	g.log.Info("starting state anchor", "lower", g.artifact.Path, "upper", upper, "work", work, "merged", merged, "id_map", g.idMap.String())
	a, err := anchor.Start(ctx, anchor.Spec{
		AnchorPath: g.help.Anchor,
		Lower:      g.artifact.Path,
		Upper:      upper, Work: work, Merged: merged,
		IDMap:  g.idMap,
		Stderr: stderr,
		Logger: g.log,
	})
	if err != nil {
		return fmt.Errorf("starting the state anchor: %w", err)
	}
	g.anchor = a
	ready := a.Ready()
	// The anchor has no gate before its execve; it is staged as soon as its
	// identity is verified. Until Start returned, its only channel was this
	// process's, and it unmounts and exits when that closes.
	if err := g.update(role, domainstore.StateIntent, func(o *domainstore.ParticipantOwnership) {
		o.StateAnchor.Daemon = hostid.StagedOwnership(ready.Daemon)
		o.StateAnchor.Mount = ptr(ready.Mount)
	}); err != nil {
		return err
	}
	return g.update(role, role.ActiveState(), func(o *domainstore.ParticipantOwnership) {
		o.StateAnchor.Daemon = committed(ready.Daemon)
	})
}

// releaseAnchor is UnmountStateAnchor: Release, its evidence checked
// against Ready, then Clean.
func (g *generation) releaseAnchor(ctx context.Context) error {
	const role = domainstore.RoleStateAnchor
	if err := g.releaseIntent(role, nil); err != nil {
		return err
	}
	method := "state anchor never started"
	if g.anchor != nil {
		select {
		case <-g.anchor.Done():
			// It already ended (it unmounts on its way out, and the
			// kernel removes the namespace with its last process).
			g.anchor.Wait()
			method = "state anchor process reaped; its mount namespace ended with it"
		default:
			ev, err := g.anchor.Release(ctx)
			if err != nil {
				g.anchor.Kill()
				g.anchor.Wait()
				return fmt.Errorf("releasing the state anchor: %w", err)
			}
			g.released = &ev
			method = "state anchor reported release evidence equal to Ready and exited 0"
		}
		g.anchor = nil
	}
	return g.clean(role, method)
}
