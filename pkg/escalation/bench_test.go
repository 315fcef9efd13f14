package escalation_test

import (
	"context"
	"crypto/rand"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"lazaret.dev/pkg/config"
	"lazaret.dev/pkg/escalation"
	"lazaret.dev/pkg/escalation/escalationtest"
	"lazaret.dev/pkg/mailbox"
	"lazaret.dev/pkg/protocol"
)

// waitIdle waits until the session has no active request (DeliverResult).
func (h *harness) waitIdle(b testing.TB) {
	for {
		if _, _, active := h.e.Active(h.f.Binding.SessionID); !active {
			return
		}
		time.Sleep(20 * time.Microsecond)
	}
}

// rawRoundTrip is the mailbox path alone: the guest writes a file to the
// outbox, the host's Serve loop takes it and writes one to the inbox, the
// guest takes that, waiting on the fixture's one inbox watcher as the
// engine cases do.
func rawRoundTrip(b *testing.B) float64 {
	f := escalationtest.New(b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	reply := protocol.SignedProtocolRecord{Kind: protocol.RecordMailboxResult, PayloadBytes: make([]byte, 400)}
	go f.Outbox.Serve(ctx, time.Second, func(e mailbox.Entry) {
		f.Inbox.Write(mailbox.Name{RequestID: e.Name.RequestID, Kind: mailbox.KindResult}, &reply)
	})
	signed, _ := f.Request(b, "/usr/bin/true")
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var id [16]byte
		rand.Read(id[:])
		if err := f.Outbox.Write(mailbox.Name{RequestID: id, Kind: mailbox.KindRequest}, &signed); err != nil {
			b.Fatal(err)
		}
		for {
			changed := f.InboxChanged()
			_, err := f.Inbox.Take(mailbox.Name{RequestID: id, Kind: mailbox.KindResult})
			if err == nil {
				break
			}
			if !errors.Is(err, mailbox.ErrMissing) {
				b.Fatal(err)
			}
			if err := f.WaitInbox(ctx, changed); err != nil {
				b.Fatal(err)
			}
		}
	}
	return float64(b.Elapsed().Nanoseconds()) / float64(b.N)
}

// roundTrips runs b.N auto-approved /usr/bin/true through h, each from
// writing the request to the delivered result.
func roundTrips(b *testing.B, h *harness) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		g := h.guest(b, "/usr/bin/true")
		if err := g.Send(); err != nil {
			b.Fatal(err)
		}
		res, err := g.Wait(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if res.Result.Outcome != protocol.OutcomeCompleted {
			b.Fatalf("outcome %v", res.Result.Outcome)
		}
		h.waitIdle(b)
	}
}

// BenchmarkRoundTrip measures, on the host:
//
//   - raw: the mailbox round trip alone (rawRoundTrip);
//   - exec: a bare fork/exec of /usr/bin/true from Go, to its exit;
//   - true: an auto-approved /usr/bin/true from writing the request to
//     the delivered result (the guest's final acknowledgment processed),
//     without an audit log; "x-raw" is its ratio to raw.
//
// Every guest side waits on its fixture's one inbox watcher.
// BenchmarkRoundTripAudited is the same with the audit log.
func BenchmarkRoundTrip(b *testing.B) {
	b.ReportAllocs()
	var raw float64
	b.Run("raw", func(b *testing.B) { raw = rawRoundTrip(b) })
	b.Run("exec", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if err := exec.Command("/usr/bin/true").Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("true", func(b *testing.B) {
		h := newHarness(b, trueRule, func(c *escalation.Config) { c.OnEvent = nil })
		roundTrips(b, h)
		if raw > 0 {
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/raw, "x-raw")
		}
	})
}

func trueRule(string) []config.AutoApprovalRule {
	return []config.AutoApprovalRule{{CanonicalExecutable: "/usr/bin/true"}}
}

// BenchmarkTransfer10MB streams 10 MB of host output to the guest side.
func BenchmarkTransfer10MB(b *testing.B) {
	var exe string
	h := newHarness(b, func(bin string) []config.AutoApprovalRule {
		exe = escalationtest.Executable(b, bin, "cat", `cat "$1"`)
		return []config.AutoApprovalRule{{CanonicalExecutable: exe, Args: []string{"data"}}}
	}, func(c *escalation.Config) { c.OnEvent = nil })
	data := make([]byte, 10<<20)
	rand.Read(data)
	if err := os.WriteFile(filepath.Join(h.work, "data"), data, 0o644); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res := h.run(b, exe, "data")
		if len(res.Stdout) != len(data) {
			b.Fatalf("received %d bytes", len(res.Stdout))
		}
		h.waitIdle(b)
	}
}
