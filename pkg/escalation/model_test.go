package escalation_test

import (
	"fmt"
	"slices"
	"testing"

	"lazaret.dev/pkg/escalation"
	"lazaret.dev/pkg/ids"
)

// modelNext are the request phase transitions of the model
// (tla/Lazaret.tla, "Host escalation protocol"); a transition to the same
// phase reports a change of session phase or a reason only.
var modelNext = map[escalation.Phase][]escalation.Phase{
	"": {escalation.PhaseVerified},
	escalation.PhaseVerified: {escalation.PhaseApproved, escalation.PhaseAwaitingApproval,
		escalation.PhaseTimeoutPending, escalation.PhaseCancellationPending},
	escalation.PhaseAwaitingApproval: {escalation.PhaseApproved, escalation.PhaseDenialPending,
		escalation.PhaseTimeoutPending, escalation.PhaseCancellationPending},
	escalation.PhaseApproved: {escalation.PhaseExecuting, escalation.PhaseTimeoutPending, escalation.PhaseCancellationPending},
	escalation.PhaseExecuting: {escalation.PhaseCompletionPending, escalation.PhaseTimeoutPending,
		escalation.PhaseCancellationPending, escalation.PhaseFailurePending},
	escalation.PhaseCompletionPending:   {escalation.PhaseCompleted},
	escalation.PhaseDenialPending:       {escalation.PhaseDenied},
	escalation.PhaseTimeoutPending:      {escalation.PhaseTimedOut},
	escalation.PhaseCancellationPending: {escalation.PhaseCancelled},
	escalation.PhaseFailurePending:      {escalation.PhaseFailed},
}

var pendingPhase = map[escalation.Phase]bool{
	escalation.PhaseCompletionPending: true, escalation.PhaseDenialPending: true, escalation.PhaseTimeoutPending: true,
	escalation.PhaseCancellationPending: true, escalation.PhaseFailurePending: true,
}

// checkModel checks every request's reported transitions against the
// model's actions and the invariants the engine is responsible for:
// AutoApprovalNoShell, HostExecutionAuthorized (execution only after an
// approval), and ResultDeliveryStateConsistent (a pending result leaves
// the session Attached).
func checkModel(t testing.TB, events []escalation.Event) {
	t.Helper()
	for _, v := range modelViolations(events) {
		t.Error(v)
	}
}

func modelViolations(events []escalation.Event) []string {
	var out []string
	byRequest := map[ids.RequestID][]escalation.Event{}
	var order []ids.RequestID
	for _, ev := range events {
		if _, ok := byRequest[ev.Request]; !ok {
			order = append(order, ev.Request)
		}
		byRequest[ev.Request] = append(byRequest[ev.Request], ev)
	}
	for _, id := range order {
		evs := byRequest[id]
		if evs[0].Phase == escalation.PhaseRefused {
			if len(evs) != 1 {
				out = append(out, fmt.Sprintf("request %v: refused, then %+v", id, evs[1:]))
			}
			continue
		}
		var prev escalation.Phase
		var requested []string
		for i, ev := range evs {
			if i == 0 {
				requested = ev.Argv
			}
			if ev.Phase != prev && !slices.Contains(modelNext[prev], ev.Phase) {
				out = append(out, fmt.Sprintf("request %v: %q -> %q is not a model transition", id, prev, ev.Phase))
			}
			switch {
			case ev.Phase == escalation.PhaseExecuting && ev.Source == escalation.SourceNone:
				out = append(out, fmt.Sprintf("request %v executes without an approval source", id))
			case ev.Phase == escalation.PhaseExecuting && ev.SessionPhase != escalation.SessionHostExecuting:
				out = append(out, fmt.Sprintf("request %v executes while its session is %s", id, ev.SessionPhase))
			case pendingPhase[ev.Phase] && ev.SessionPhase != escalation.SessionAttached:
				out = append(out, fmt.Sprintf("request %v is %s while its session is %s", id, ev.Phase, ev.SessionPhase))
			case ev.Source == escalation.SourceAutoRule && (!slices.Equal(ev.Argv, requested) || escalation.CommandRequiresShell(ev.Argv)):
				out = append(out, fmt.Sprintf("request %v auto-approved argv %q for requested %q", id, ev.Argv, requested))
			}
			prev = ev.Phase
		}
	}
	return out
}

func TestModelViolationsCatch(t *testing.T) {
	var id ids.RequestID
	id[0] = 1
	argv := []string{"/usr/bin/true"}
	tests := []struct {
		name   string
		events []escalation.Event
	}{
		{"skips approval", []escalation.Event{
			{Request: id, Phase: escalation.PhaseVerified, Argv: argv},
			{Request: id, Phase: escalation.PhaseExecuting, Source: escalation.SourceAutoRule, SessionPhase: escalation.SessionHostExecuting, Argv: argv},
		}},
		{"auto-approves an edited argv", []escalation.Event{
			{Request: id, Phase: escalation.PhaseVerified, Argv: argv},
			{Request: id, Phase: escalation.PhaseApproved, Source: escalation.SourceAutoRule, Argv: []string{"/usr/bin/id"}},
		}},
		{"auto-approves a shell form", []escalation.Event{
			{Request: id, Phase: escalation.PhaseVerified, Argv: []string{"true"}},
			{Request: id, Phase: escalation.PhaseApproved, Source: escalation.SourceAutoRule, Argv: []string{"true"}},
		}},
		{"pending while executing", []escalation.Event{
			{Request: id, Phase: escalation.PhaseVerified, Argv: argv},
			{Request: id, Phase: escalation.PhaseApproved, Source: escalation.SourceAutoRule, Argv: argv},
			{Request: id, Phase: escalation.PhaseExecuting, Source: escalation.SourceAutoRule, SessionPhase: escalation.SessionHostExecuting, Argv: argv},
			{Request: id, Phase: escalation.PhaseCompletionPending, Source: escalation.SourceAutoRule, SessionPhase: escalation.SessionHostExecuting, Argv: argv},
		}},
		{"denied after approval", []escalation.Event{
			{Request: id, Phase: escalation.PhaseVerified, Argv: argv},
			{Request: id, Phase: escalation.PhaseApproved, Source: escalation.SourceDeveloper, Argv: argv},
			{Request: id, Phase: escalation.PhaseDenialPending, Argv: argv},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if v := modelViolations(tt.events); len(v) == 0 {
				t.Error("no violation reported")
			}
		})
	}
}
