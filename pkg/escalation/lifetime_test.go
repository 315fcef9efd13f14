package escalation_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"lazaret.dev/pkg/config"
	"lazaret.dev/pkg/escalation"
	"lazaret.dev/pkg/escalation/escalationtest"
	"lazaret.dev/pkg/protocol"
)

func TestEndedSessionCapabilityRefused(t *testing.T) {
	var exe, marker string
	h := newHarness(t, func(bin string) []config.AutoApprovalRule {
		marker = filepath.Join(bin, "ran")
		exe = escalationtest.Executable(t, bin, "tool", `echo ran >> `+marker)
		return []config.AutoApprovalRule{{CanonicalExecutable: exe}}
	}, nil)
	outcome(t, h.run(t, exe), protocol.OutcomeCompleted, 0)
	h.waitIdle(t)
	if h.e.EndSession(h.f.Binding.SessionID) {
		t.Error("EndSession reported an active request after the result was delivered")
	}
	g := h.guest(t, exe)
	if err := g.Send(); err != nil {
		t.Fatal(err)
	}
	d := h.waitDiscard(t)
	if !errors.Is(d.reason, escalation.ErrSessionEnded) || !strings.Contains(d.reason.Error(), h.f.Binding.SessionID.String()) {
		t.Errorf("discard reason %v, want ErrSessionEnded naming the session", d.reason)
	}
	if evs := h.eventsOf(g.Request.RequestID); len(evs) != 0 {
		t.Errorf("a request of an ended session entered the request machine: %+v", evs)
	}
	if b, _ := os.ReadFile(marker); string(b) != "ran\n" {
		t.Errorf("the command ran %q times, want once (before the session ended)", b)
	}
	// A cancellation of the ended session is discarded the same way.
	if err := g.Cancel(); err != nil {
		t.Fatal(err)
	}
	if d := h.waitDiscard(t); !errors.Is(d.reason, escalation.ErrSessionEnded) {
		t.Errorf("cancellation discard reason %v, want ErrSessionEnded", d.reason)
	}
}

func TestEndSessionCancelsActiveRequest(t *testing.T) {
	var exe string
	h := newHarness(t, func(bin string) []config.AutoApprovalRule {
		exe = escalationtest.Executable(t, bin, "sleeper", `sleep 30`)
		return []config.AutoApprovalRule{{CanonicalExecutable: exe}}
	}, nil)
	g := h.guest(t, exe)
	if err := g.Send(); err != nil {
		t.Fatal(err)
	}
	h.waitPhase(t, g.Request.RequestID, escalation.PhaseExecuting)
	start := time.Now()
	if !h.e.EndSession(h.f.Binding.SessionID) {
		t.Fatal("EndSession found no active request")
	}
	// Nobody acknowledges: the request counts as delivered at once.
	if ev := h.waitPhase(t, g.Request.RequestID, escalation.PhaseCancellationPending); !errors.Is(ev.Err, escalation.ErrSessionEnded) {
		t.Errorf("cancellation reason %v, want ErrSessionEnded", ev.Err)
	}
	if ev := h.waitPhase(t, g.Request.RequestID, escalation.PhaseCancelled); !errors.Is(ev.Err, escalation.ErrSessionEnded) {
		t.Errorf("delivery reason %v, want ErrSessionEnded", ev.Err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("the request of an ended session was released after %v", d)
	}
	if _, _, active := h.e.Active(h.f.Binding.SessionID); active {
		t.Error("the ended session still has an active request")
	}
}

// failingJournal refuses every transition from the n-th on (counting
// from 0).
func failingJournal(n int32) func(escalation.Event) error {
	var seen atomic.Int32
	return func(ev escalation.Event) error {
		if seen.Add(1)-1 >= n {
			return errors.New("write audit.log: no space left on device")
		}
		return nil
	}
}

func TestAuditFailsClosed(t *testing.T) {
	tests := []struct {
		name    string
		after   int32 // journal records accepted before the first failure
		prompt  bool
		phase   escalation.Phase
		outcome protocol.EscalationOutcome
	}{
		{"verification not journaled: refused", 0, false, escalation.PhaseRefused, protocol.OutcomeFailed},
		{"approval not journaled: fails at execution", 1, false, escalation.PhaseFailurePending, protocol.OutcomeFailed},
		{"execution not journaled: fails before the command", 2, false, escalation.PhaseFailurePending, protocol.OutcomeFailed},
		{"prompt not journaled: cancelled before the prompt", 1, true, escalation.PhaseCancellationPending, protocol.OutcomeCancelled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var exe, marker string
			h := newHarness(t, func(bin string) []config.AutoApprovalRule {
				marker = filepath.Join(bin, "ran")
				exe = escalationtest.Executable(t, bin, "tool", `echo ran > `+marker)
				if tt.prompt {
					return nil
				}
				return []config.AutoApprovalRule{{CanonicalExecutable: exe}}
			}, func(c *escalation.Config) { c.Journal = failingJournal(tt.after) })
			res := h.run(t, exe)
			outcome(t, res, tt.outcome, -1)
			if !strings.Contains(string(res.Stderr), "lazaret: the host did not run the command: the escalation audit log cannot record the request") ||
				!strings.Contains(string(res.Stderr), "no space left on device") {
				t.Errorf("the guest was not told why: stderr %q", res.Stderr)
			}
			ev := h.waitPhase(t, res.Result.RequestID, tt.phase)
			if !errors.Is(ev.Err, escalation.ErrAudit) {
				t.Errorf("%s reason %v, want ErrAudit", tt.phase, ev.Err)
			}
			if _, err := os.Stat(marker); err == nil {
				t.Error("the command ran although its audit records were not durable")
			}
			if n := h.prompter.calls.Load(); n != 0 {
				t.Errorf("the developer was prompted %d times for a request that could not run", n)
			}
		})
	}
}

// TestEndSessionOrdersReceipt: however a request and the session's end
// race, once EndSession has returned no request of the session is
// reported Verified, so the trace records every receipt before the
// session's end.
func TestEndSessionOrdersReceipt(t *testing.T) {
	for i := range 20 {
		var ended atomic.Bool
		late := make(chan escalation.Event, 4)
		h := newHarness(t, func(bin string) []config.AutoApprovalRule {
			return []config.AutoApprovalRule{{CanonicalExecutable: "/usr/bin/true"}}
		}, func(c *escalation.Config) {
			inner := c.OnEvent
			c.OnEvent = func(ev escalation.Event) {
				if ev.Phase == escalation.PhaseVerified && ended.Load() {
					late <- ev
				}
				inner(ev)
			}
		})
		g := h.guest(t, "/usr/bin/true")
		if err := g.Send(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(i) * time.Millisecond)
		h.e.EndSession(h.f.Binding.SessionID)
		ended.Store(true)
		// Either the request was received before the end, or it is
		// discarded: wait for one of the two.
		deadline := time.Now().Add(5 * time.Second)
		for len(h.eventsOf(g.Request.RequestID)) == 0 && len(h.discards) == 0 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		select {
		case ev := <-late:
			t.Fatalf("round %d: request %x reported Verified after EndSession returned", i, ev.Request)
		default:
		}
	}
}
