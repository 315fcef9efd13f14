package escalation_test

import (
	"path/filepath"
	"testing"
	"time"

	"lazaret.dev/pkg/audit"
	"lazaret.dev/pkg/escalation"
	"lazaret.dev/pkg/ids"
)

// auditJournal is the coordinator's journal without its logging: the
// audit log admits each request at Verified, writes every record, and
// syncs at the durable ones.
func auditJournal(w *audit.Writer) func(escalation.Event) error {
	gen := ids.GenerationID(ids.New())
	return func(ev escalation.Event) error {
		if ev.Phase == escalation.PhaseVerified {
			if err := w.Admit(); err != nil {
				return err
			}
		}
		r := audit.FromEvent(gen, time.Now(), ev)
		if ev.Durable {
			return w.Append(r)
		}
		return w.Write(r)
	}
}

// BenchmarkRoundTripAudited is BenchmarkRoundTrip/true with the Domain's
// audit log as the coordinator keeps it (Admit, a write per transition,
// an fsync at each durable one), in the test's temporary directory: the
// engine's figure in production. It is a file of its own so that
// bench/escalation can give an earlier revision this tree's harness
// (bench_test.go) without it.
func BenchmarkRoundTripAudited(b *testing.B) {
	w, err := audit.Open(filepath.Join(b.TempDir(), "bench.audit"))
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	h := newHarness(b, trueRule, func(c *escalation.Config) {
		c.OnEvent = nil
		c.Journal = auditJournal(w)
	})
	roundTrips(b, h)
}
