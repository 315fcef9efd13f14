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
func takeReviewBaseline(s *scope) error {
	var pending bool
	if err := s.store.View(func(tx *domainstore.Tx) error {
		var err error
		_, pending, err = tx.ReviewBaseline()
		return err
	}); err != nil {
		return fmt.Errorf("reading the review baseline: %w", err)
	}
	if pending {
		s.log.Info("review baseline pending; not taking a new one")
		return nil
	}
	b, err := hosttools.TakeBaseline(s.cfg.Workspace(), time.Now())
	if err != nil {
		return fmt.Errorf("taking the review baseline of %q: %w", s.cfg.Workspace(), err)
	}
	if err := s.store.Update(func(tx *domainstore.Tx) error { return tx.PutReviewBaseline(b) }); err != nil {
		return fmt.Errorf("recording the review baseline: %w", err)
	}
	s.log.Info("review baseline taken", "workspace", s.cfg.Workspace(), "files", len(b.Files))
	return nil
}
