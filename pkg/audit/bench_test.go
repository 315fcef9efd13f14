package audit

import (
	"path/filepath"
	"testing"

	"lazaret.dev/pkg/escalation"
)

// BenchmarkAppend measures one record: encoding, the locked write and the
// fsync, which dominates.
func BenchmarkAppend(b *testing.B) {
	w, err := Open(filepath.Join(b.TempDir(), "bench.audit"))
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	r := completed()
	b.ReportAllocs()
	for b.Loop() {
		if err := w.Append(r); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRead measures reading and verifying a log of 1000 records.
func BenchmarkRead(b *testing.B) {
	path := filepath.Join(b.TempDir(), "bench.audit")
	w, err := Open(path)
	if err != nil {
		b.Fatal(err)
	}
	for _, r := range lifecycle() {
		for range 125 {
			if err := w.Append(r); err != nil {
				b.Fatal(err)
			}
		}
	}
	w.Close()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Read(path); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRequestRecords measures the five records of an auto-approved
// request (Verified, Approved, Executing, CompletionPending, Completed):
// "each" makes every record durable (Append), as the coordinator did;
// "durable-points" writes them all and commits at Executing and at the
// pending phase only, as it does now (escalation.Event.Durable).
func BenchmarkRequestRecords(b *testing.B) {
	phases := []escalation.Phase{escalation.PhaseVerified, escalation.PhaseApproved, escalation.PhaseExecuting,
		escalation.PhaseCompletionPending, escalation.PhaseCompleted}
	durable := map[escalation.Phase]bool{escalation.PhaseExecuting: true, escalation.PhaseCompletionPending: true}
	for _, mode := range []string{"each", "durable-points"} {
		b.Run(mode, func(b *testing.B) {
			w, err := Open(filepath.Join(b.TempDir(), "bench.audit"))
			if err != nil {
				b.Fatal(err)
			}
			defer w.Close()
			r := completed()
			b.ReportAllocs()
			for b.Loop() {
				for _, p := range phases {
					r.Phase = p
					r.Outcome, r.ExitCode = phaseRecordOutcome(p)
					put := w.Append
					if mode == "durable-points" && !durable[p] {
						put = w.Write
					}
					if err := put(r); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// phaseRecordOutcome is the outcome and exit code an auto-approved
// /usr/bin/true's record carries at phase p.
func phaseRecordOutcome(p escalation.Phase) (Outcome, *uint8) {
	if p == escalation.PhaseCompletionPending || p == escalation.PhaseCompleted {
		code := uint8(0)
		return OutcomeCompleted, &code
	}
	return OutcomeNone, nil
}
