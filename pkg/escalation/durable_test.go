package escalation_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"lazaret.dev/pkg/config"
	"lazaret.dev/pkg/escalation"
	"lazaret.dev/pkg/escalation/escalationtest"
	"lazaret.dev/pkg/ids"
	"lazaret.dev/pkg/mailbox"
	"lazaret.dev/pkg/protocol"
)

// journalEntry is one record the engine journaled, and whether the
// journal had to make it durable.
type journalEntry struct {
	phase   escalation.Phase
	sphase  escalation.SessionPhase
	durable bool
}

// recordingJournal keeps every record and counts what a write-then-sync
// journal would make durable; at each durable record it calls check with
// that record, before the engine can act on it.
type recordingJournal struct {
	mu      sync.Mutex
	entries []journalEntry
	synced  int // entries durable so far
	check   func(escalation.Event)
}

func (j *recordingJournal) journal(ev escalation.Event) error {
	if ev.Durable && j.check != nil {
		j.check(ev)
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	j.entries = append(j.entries, journalEntry{ev.Phase, ev.SessionPhase, ev.Durable})
	if ev.Durable {
		j.synced = len(j.entries)
	}
	return nil
}

func (j *recordingJournal) snapshot() ([]journalEntry, int) {
	j.mu.Lock()
	defer j.mu.Unlock()
	return slices.Clone(j.entries), j.synced
}

// TestDurablePoints: the records the audit log must hold before the
// engine acts are made durable exactly there, and only there. An
// auto-approved request has two durable points: before its command
// starts (Executing, covering Verified and Approved) and before its
// result is written (the pending phase); its terminal phase is made
// durable by the next request's first durable point. A prompted request
// has one more, before the prompt is shown.
func TestDurablePoints(t *testing.T) {
	tests := []struct {
		name   string
		prompt bool
		want   []journalEntry
	}{
		{"auto-approved", false, []journalEntry{
			{escalation.PhaseVerified, escalation.SessionAttached, false},
			{escalation.PhaseApproved, escalation.SessionAttached, false},
			{escalation.PhaseExecuting, escalation.SessionHostExecuting, true},
			{escalation.PhaseCompletionPending, escalation.SessionAttached, true},
			{escalation.PhaseCompleted, escalation.SessionAttached, false},
		}},
		{"prompted and approved", true, []journalEntry{
			{escalation.PhaseVerified, escalation.SessionAttached, false},
			{escalation.PhaseAwaitingApproval, escalation.SessionAttached, false},
			{escalation.PhaseAwaitingApproval, escalation.SessionPrompting, true},
			{escalation.PhaseApproved, escalation.SessionPrompting, false},
			{escalation.PhaseExecuting, escalation.SessionHostExecuting, true},
			{escalation.PhaseCompletionPending, escalation.SessionAttached, true},
			{escalation.PhaseCompleted, escalation.SessionAttached, false},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := &recordingJournal{}
			var exe, marker string
			h := newHarness(t, func(bin string) []config.AutoApprovalRule {
				marker = filepath.Join(bin, "ran")
				exe = escalationtest.Executable(t, bin, "tool", "echo ran > "+marker)
				if tt.prompt {
					return nil
				}
				return []config.AutoApprovalRule{{CanonicalExecutable: exe}}
			}, func(c *escalation.Config) { c.Journal = j.journal })
			var violations []string
			j.check = func(ev escalation.Event) {
				result := mailbox.Name{RequestID: ev.Request, Kind: mailbox.KindResult}
				_, inInbox := h.f.Inbox.Read(result)
				_, ran := os.Stat(marker)
				switch {
				case ev.Phase == escalation.PhaseExecuting && ran == nil:
					violations = append(violations, "the command ran before Executing was durable")
				case ev.Phase == escalation.PhaseCompletionPending && inInbox == nil:
					violations = append(violations, "the result was written before its pending phase was durable")
				}
			}
			h.prompter.decide = func(_ context.Context, p protocol.TerminalPrompt) (protocol.SignedProtocolRecord, error) {
				entries, synced := j.snapshot()
				if synced != len(entries) || entries[synced-1].sphase != escalation.SessionPrompting {
					violations = append(violations, fmt.Sprintf("prompted with %d of %d records durable", synced, len(entries)))
				}
				return h.f.Decision(p, p.CommandArgv)
			}
			res := h.run(t, exe)
			outcome(t, res, protocol.OutcomeCompleted, 0)
			h.waitPhase(t, res.Result.RequestID, escalation.PhaseCompleted)
			got, _ := j.snapshot()
			if !slices.Equal(got, tt.want) {
				t.Errorf("journal\n got  %v\n want %v", got, tt.want)
			}
			for _, v := range violations {
				t.Error(v)
			}
		})
	}
}

// TestRefusalIsDurableBeforeItsAnswer: a refused request's record is
// durable before its Failed result is written.
func TestRefusalIsDurableBeforeItsAnswer(t *testing.T) {
	j := &recordingJournal{}
	release := make(chan struct{})
	var exe string
	h := newHarness(t, func(bin string) []config.AutoApprovalRule {
		exe = escalationtest.Executable(t, bin, "slow", "sleep 30")
		return []config.AutoApprovalRule{{CanonicalExecutable: exe}}
	}, func(c *escalation.Config) { c.Journal = j.journal })
	var answeredEarly bool
	j.check = func(ev escalation.Event) {
		if ev.Phase == escalation.PhaseRefused {
			_, err := h.f.Inbox.Read(mailbox.Name{RequestID: ev.Request, Kind: mailbox.KindResult})
			answeredEarly = err == nil
			close(release)
		}
	}
	first := h.guest(t, exe)
	if err := first.Send(); err != nil {
		t.Fatal(err)
	}
	h.waitPhase(t, first.Request.RequestID, escalation.PhaseExecuting)
	second := h.guest(t, "/usr/bin/true")
	if err := second.Send(); err != nil {
		t.Fatal(err)
	}
	res := wait(t, second)
	outcome(t, res, protocol.OutcomeFailed, -1)
	<-release
	if answeredEarly {
		t.Error("the refusal was answered before its record was durable")
	}
	h.e.CancelSession(h.f.Binding.SessionID)
	wait(t, first)
}

// TestFinalAckDeliversBeforeNextRequest: when one drain of the outbox
// finds a request's final acknowledgment and the session's next request
// together, the first request is delivered before the second is received,
// whatever their IDs, so the second is not refused as busy. This is the
// order of a guest that exits after its final acknowledgment and is
// followed at once by the next one.
func TestFinalAckDeliversBeforeNextRequest(t *testing.T) {
	for _, order := range []string{"next sorts first", "next sorts last"} {
		t.Run(order, func(t *testing.T) {
			f := escalationtest.New(t)
			var mu sync.Mutex
			var events []escalation.Event
			e, err := escalation.New(escalation.Config{
				Verifier: f.Verifier, CoordinatorKey: f.CoordinatorKey, Sessions: f.Sessions,
				Prompter: &fakePrompter{decide: func(_ context.Context, p protocol.TerminalPrompt) (protocol.SignedProtocolRecord, error) {
					return f.Decision(p, nil)
				}},
				Outbox: f.Outbox, Inbox: f.Inbox, Workspace: t.TempDir(), UID: os.Getuid(),
				Rules: []config.AutoApprovalRule{{CanonicalExecutable: "/usr/bin/true"}},
				OnEvent: func(ev escalation.Event) {
					mu.Lock()
					events = append(events, ev)
					mu.Unlock()
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			// No Serve loop: the test drains the outbox itself.
			guest := func(id ids.RequestID) *escalationtest.Guest {
				signed, req := f.RequestWithID(t, id, "/usr/bin/true")
				return &escalationtest.Guest{F: f, Signed: signed, Request: req}
			}
			lo, hi := ids.RequestID{0x01}, ids.RequestID{0xfe}
			firstID, nextID := hi, lo
			if order == "next sorts last" {
				firstID, nextID = lo, hi
			}
			first := guest(firstID)
			if err := first.Send(); err != nil {
				t.Fatal(err)
			}
			if err := f.Outbox.Drain(e.Handle); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			res, err := first.Wait(ctx) // the result, then the final acknowledgment
			if err != nil {
				t.Fatal(err)
			}
			outcome(t, res, protocol.OutcomeCompleted, 0)
			next := guest(nextID)
			if err := next.Send(); err != nil {
				t.Fatal(err)
			}
			if err := f.Outbox.Drain(e.Handle); err != nil {
				t.Fatal(err)
			}
			res, err = next.Wait(ctx)
			if err != nil {
				t.Fatal(err)
			}
			outcome(t, res, protocol.OutcomeCompleted, 0)
			mu.Lock()
			defer mu.Unlock()
			var phases []string
			for _, ev := range events {
				phases = append(phases, fmt.Sprintf("%x:%s", ev.Request[0], ev.Phase))
			}
			want := []string{
				fmt.Sprintf("%x:Verified", firstID[0]), fmt.Sprintf("%x:Approved", firstID[0]),
				fmt.Sprintf("%x:Executing", firstID[0]), fmt.Sprintf("%x:CompletionPending", firstID[0]),
				fmt.Sprintf("%x:Completed", firstID[0]),
				fmt.Sprintf("%x:Verified", nextID[0]), fmt.Sprintf("%x:Approved", nextID[0]),
				fmt.Sprintf("%x:Executing", nextID[0]), fmt.Sprintf("%x:CompletionPending", nextID[0]),
			}
			if len(phases) < len(want) || !slices.Equal(phases[:len(want)], want) {
				t.Errorf("events %v, want %v first", phases, want)
			}
		})
	}
}
