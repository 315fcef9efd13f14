package coordinator

import (
	"fmt"
	"time"

	"lazaret.dev/pkg/domainstore"
	"lazaret.dev/pkg/hosttools"
)

// takeReviewBaseline records the state of the workspace files host tools
// run (package hosttools) before anything of the generation can change
// them, unless a baseline is pending: then the changes of earlier
// generations stay visible to `lazaret-cli workspace review` until the
// developer accepts them.
func (g *generation) takeReviewBaseline() error {
	var pending bool
	if err := g.store.View(func(tx *domainstore.Tx) error {
		var err error
		_, pending, err = tx.ReviewBaseline()
		return err
	}); err != nil {
		return fmt.Errorf("reading the review baseline: %w", err)
	}
	if pending {
		g.log.Info("review baseline pending; not taking a new one")
		return nil
	}
	b, err := hosttools.TakeBaseline(g.cfg.Workspace(), time.Now())
	if err != nil {
		return fmt.Errorf("taking the review baseline of %q: %w", g.cfg.Workspace(), err)
	}
	if err := g.store.Update(func(tx *domainstore.Tx) error { return tx.PutReviewBaseline(b) }); err != nil {
		return fmt.Errorf("recording the review baseline: %w", err)
	}
	g.log.Info("review baseline taken", "workspace", g.cfg.Workspace(), "files", len(b.Files))
	return nil
}
