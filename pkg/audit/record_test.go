package audit

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"lazaret.dev/pkg/escalation"
	"lazaret.dev/pkg/ids"
	"lazaret.dev/pkg/phase"
	"lazaret.dev/pkg/protocol"
)

var (
	testGen     = ids.GenerationID{0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, 0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef}
	testSession = ids.SessionID{0x5e, 0x55, 0x10, 0x4e, 15: 0x01}
	testRequest = ids.RequestID{0x3f, 0x00, 0xaa, 15: 0x02}
	testTime    = time.Date(2026, 12, 2, 15, 4, 5, 42, time.UTC)
)

func code(c uint8) *uint8 { return &c }

// completed is the record of an auto-approved request that exited 0.
func completed() Record {
	return Record{
		Time: testTime, Generation: testGen, Session: testSession, Request: testRequest,
		Phase: escalation.PhaseCompleted, SessionPhase: escalation.SessionAttached,
		Source: escalation.SourceAutoRule, Rule: 0, Argv: []string{"/usr/bin/git", "status"},
		Outcome: OutcomeCompleted, ExitCode: code(0),
	}
}

// lifecycle is the records of one prompted request that the developer
// approved with an edit, and that failed, then one refused request.
func lifecycle() []Record {
	base := Record{Time: testTime, Generation: testGen, Session: testSession, Request: testRequest,
		SessionPhase: escalation.SessionAttached, Rule: -1, Argv: []string{"/usr/bin/rm", "-rf", "build"}}
	at := func(d time.Duration, f func(r *Record)) Record {
		r := base
		r.Time = base.Time.Add(d)
		r.Argv = append([]string(nil), base.Argv...)
		f(&r)
		return r
	}
	return []Record{
		at(0, func(r *Record) { r.Phase = escalation.PhaseVerified }),
		at(1, func(r *Record) {
			r.Phase = escalation.PhaseAwaitingApproval
			r.Reason = escalation.ErrNoRule.Error()
		}),
		at(2, func(r *Record) {
			r.Phase, r.SessionPhase = escalation.PhaseAwaitingApproval, escalation.SessionPrompting
		}),
		at(3, func(r *Record) {
			r.Phase, r.SessionPhase, r.Source = escalation.PhaseApproved, escalation.SessionPrompting, escalation.SourceDeveloper
			r.Argv = []string{"/usr/bin/rm", "-r", "build <old>"}
		}),
		at(4, func(r *Record) {
			r.Phase, r.SessionPhase, r.Source = escalation.PhaseExecuting, escalation.SessionHostExecuting, escalation.SourceDeveloper
			r.Argv = []string{"/usr/bin/rm", "-r", "build <old>"}
		}),
		at(5, func(r *Record) {
			r.Phase, r.Source, r.Outcome = escalation.PhaseFailurePending, escalation.SourceDeveloper, OutcomeFailed
			r.Argv = []string{"/usr/bin/rm", "-r", "build <old>"}
			r.Reason = "host command killed by a signal: \"/usr/bin/rm\" was killed by signal killed"
		}),
		at(6, func(r *Record) {
			r.Phase, r.Source, r.Outcome = escalation.PhaseFailed, escalation.SourceDeveloper, OutcomeFailed
			r.Argv = []string{"/usr/bin/rm", "-r", "build <old>"}
		}),
		at(7, func(r *Record) {
			r.Request = ids.RequestID{0xee}
			r.Phase, r.SessionPhase, r.Outcome = escalation.PhaseRefused, escalation.SessionHostExecuting, OutcomeFailed
			r.Argv = []string{"/usr/bin/echo", "\x1b[2Jhi\u00e9"}
			r.Reason = "session already has an active request (request 3f00aa)"
		}),
	}
}

func TestPath(t *testing.T) {
	id := ids.DomainID{0xab, 31: 0x01}
	got := Path("/data/lazaret", id)
	want := "/data/lazaret/domains/ab00000000000000000000000000000000000000000000000000000000000001.audit"
	if got != want {
		t.Errorf("Path = %q, want %q", got, want)
	}
}

func TestGoldenLine(t *testing.T) {
	r := completed()
	r.Prev = ids.Digest{0xde, 0xad, 31: 0xff}
	got, err := r.encode()
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"time":"2026-12-02T15:04:05.000000042Z","generation":"0123456789abcdef0123456789abcdef",` +
		`"session":"5e55104e000000000000000000000001","request":"3f00aa00000000000000000000000002",` +
		`"phase":"Completed","session_phase":"Attached","source":"AutoRule","rule":0,` +
		`"argv":["/usr/bin/git","status"],"outcome":"Completed","exit_code":0,` +
		`"prev":"dead0000000000000000000000000000000000000000000000000000000000ff"}`
	if string(got) != want {
		t.Fatalf("line\n got %s\nwant %s", got, want)
	}
	back, err := decode(got)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, r) {
		t.Errorf("decoded %+v, want %+v", back, r)
	}
}

func TestGoldenLineOptionalFields(t *testing.T) {
	r := lifecycle()[7]
	got, err := r.encode()
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"time":"2026-12-02T15:04:05.000000049Z","generation":"0123456789abcdef0123456789abcdef",` +
		`"session":"5e55104e000000000000000000000001","request":"ee000000000000000000000000000000",` +
		`"phase":"Refused","session_phase":"HostExecuting","source":"none",` +
		`"argv":["/usr/bin/echo","\u001b[2Jhié"],"outcome":"Failed",` +
		`"reason":"session already has an active request (request 3f00aa)",` +
		`"prev":"0000000000000000000000000000000000000000000000000000000000000000"}`
	if string(got) != want {
		t.Fatalf("line\n got %s\nwant %s", got, want)
	}
}

func TestFromEvent(t *testing.T) {
	local := time.Date(2026, 12, 2, 16, 4, 5, 42, time.FixedZone("CET", 3600))
	tests := []struct {
		name string
		ev   escalation.Event
		want Record
	}{
		{"verified", escalation.Event{Session: testSession, Request: testRequest, Phase: escalation.PhaseVerified,
			SessionPhase: escalation.SessionAttached, Rule: -1, Argv: []string{"/usr/bin/true"}},
			Record{Phase: escalation.PhaseVerified, SessionPhase: escalation.SessionAttached, Rule: -1, Argv: []string{"/usr/bin/true"}}},
		{"auto rule", escalation.Event{Session: testSession, Request: testRequest, Phase: escalation.PhaseApproved,
			SessionPhase: escalation.SessionAttached, Source: escalation.SourceAutoRule, Rule: 2, Argv: []string{"/usr/bin/true"}},
			Record{Phase: escalation.PhaseApproved, SessionPhase: escalation.SessionAttached, Source: escalation.SourceAutoRule, Rule: 2, Argv: []string{"/usr/bin/true"}}},
		{"developer ignores rule field", escalation.Event{Session: testSession, Request: testRequest, Phase: escalation.PhaseApproved,
			SessionPhase: escalation.SessionPrompting, Source: escalation.SourceDeveloper, Rule: 0, Argv: []string{"/usr/bin/true", "x"}},
			Record{Phase: escalation.PhaseApproved, SessionPhase: escalation.SessionPrompting, Source: escalation.SourceDeveloper, Rule: -1, Argv: []string{"/usr/bin/true", "x"}}},
		{"outcome before pending is dropped", escalation.Event{Session: testSession, Request: testRequest, Phase: escalation.PhaseExecuting,
			SessionPhase: escalation.SessionHostExecuting, Source: escalation.SourceAutoRule, Rule: 0, Argv: []string{"/usr/bin/true"},
			Outcome: protocol.OutcomeCompleted},
			Record{Phase: escalation.PhaseExecuting, SessionPhase: escalation.SessionHostExecuting, Source: escalation.SourceAutoRule, Rule: 0, Argv: []string{"/usr/bin/true"}}},
		{"completed", escalation.Event{Session: testSession, Request: testRequest, Phase: escalation.PhaseCompletionPending,
			SessionPhase: escalation.SessionAttached, Source: escalation.SourceAutoRule, Rule: 0, Argv: []string{"/usr/bin/false"},
			Outcome: protocol.OutcomeCompleted, ExitCode: code(1)},
			Record{Phase: escalation.PhaseCompletionPending, SessionPhase: escalation.SessionAttached, Source: escalation.SourceAutoRule, Rule: 0,
				Argv: []string{"/usr/bin/false"}, Outcome: OutcomeCompleted, ExitCode: code(1)}},
		{"timed out with reason", escalation.Event{Session: testSession, Request: testRequest, Phase: escalation.PhaseTimeoutPending,
			SessionPhase: escalation.SessionAttached, Rule: -1, Argv: []string{"/usr/bin/sleep", "9"},
			Outcome: protocol.OutcomeTimedOut, Err: fmt.Errorf("waiting: %w", escalation.ErrTimedOut)},
			Record{Phase: escalation.PhaseTimeoutPending, SessionPhase: escalation.SessionAttached, Rule: -1, Argv: []string{"/usr/bin/sleep", "9"},
				Outcome: OutcomeTimedOut, Reason: "waiting: request timed out"}},
		{"invalid UTF-8 in reason", escalation.Event{Session: testSession, Request: testRequest, Phase: escalation.PhaseDenied,
			SessionPhase: escalation.SessionAttached, Source: escalation.SourceDeveloper, Rule: -1, Argv: []string{"/usr/bin/true"},
			Outcome: protocol.OutcomeDenied, Err: errors.New("bad \xff byte")},
			Record{Phase: escalation.PhaseDenied, SessionPhase: escalation.SessionAttached, Source: escalation.SourceDeveloper, Rule: -1,
				Argv: []string{"/usr/bin/true"}, Outcome: OutcomeDenied, Reason: "bad \uFFFD byte"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := FromEvent(testGen, local, tt.ev)
			tt.want.Time = testTime
			tt.want.Generation, tt.want.Session, tt.want.Request = testGen, testSession, testRequest
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("FromEvent\n got %+v\nwant %+v", got, tt.want)
			}
			if err := got.Check(); err != nil {
				t.Errorf("Check: %v", err)
			}
			if len(tt.ev.Argv) > 0 && &got.Argv[0] == &tt.ev.Argv[0] {
				t.Error("argv shares the event's backing array")
			}
		})
	}
}

func TestCheck(t *testing.T) {
	tests := []struct {
		name   string
		edit   func(r *Record)
		reason string // "" for a valid record
	}{
		{"valid", func(*Record) {}, ""},
		{"developer", func(r *Record) { r.Source, r.Rule = escalation.SourceDeveloper, -1 }, ""},
		{"zero time", func(r *Record) { r.Time = time.Time{} }, "field time: missing"},
		{"not UTC", func(r *Record) { r.Time = r.Time.In(time.FixedZone("X", 60)) }, "not in UTC"},
		{"five-digit year", func(r *Record) { r.Time = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) }, "four digits"},
		{"unknown phase", func(r *Record) { r.Phase = "Running" }, `field phase: "Running"`},
		{"empty phase", func(r *Record) { r.Phase = "" }, "field phase"},
		{"unknown session phase", func(r *Record) { r.SessionPhase = phase.SessionClosed }, "field session_phase"},
		{"unknown source", func(r *Record) { r.Source = "Agent" }, "field source"},
		{"auto rule without rule", func(r *Record) { r.Rule = -1 }, "field rule"},
		{"developer with rule", func(r *Record) { r.Source = escalation.SourceDeveloper }, "field rule: only an AutoRule"},
		{"no argv", func(r *Record) { r.Argv = nil }, "field argv"},
		{"argv not UTF-8", func(r *Record) { r.Argv = []string{"/usr/bin/x", "\xc3"} }, "element 1 is not valid UTF-8"},
		{"outcome missing", func(r *Record) { r.Outcome, r.ExitCode = OutcomeNone, nil }, "field outcome: missing"},
		{"outcome of another phase", func(r *Record) { r.Outcome, r.ExitCode = OutcomeDenied, nil }, "carries outcome Completed"},
		{"outcome too early", func(r *Record) { r.Phase = escalation.PhaseExecuting }, "has no outcome yet"},
		{"exit code missing", func(r *Record) { r.ExitCode = nil }, "field exit_code: missing"},
		{"exit code on failure", func(r *Record) { r.Phase, r.Outcome = escalation.PhaseFailed, OutcomeFailed }, "only a Completed request"},
		{"reason not UTF-8", func(r *Record) { r.Reason = "\xff" }, "field reason"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := completed()
			tt.edit(&r)
			err := r.Check()
			if tt.reason == "" {
				if err != nil {
					t.Fatalf("Check: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidRecord) || !strings.Contains(err.Error(), tt.reason) {
				t.Fatalf("Check = %v, want ErrInvalidRecord with %q", err, tt.reason)
			}
			if _, err := r.encode(); err == nil {
				t.Error("encode accepted the record")
			}
		})
	}
}

func TestDecodeRefuses(t *testing.T) {
	r := completed()
	good, err := r.encode()
	if err != nil {
		t.Fatal(err)
	}
	replace := func(old, new string) string {
		t.Helper()
		if !strings.Contains(string(good), old) {
			t.Fatalf("%q not in the line", old)
		}
		return strings.Replace(string(good), old, new, 1)
	}
	tests := []struct {
		name, line, reason string
	}{
		{"unknown field", replace(`"phase"`, `"extra":1,"phase"`), `unknown field "extra"`},
		{"missing time", replace(`"time":"2026-12-02T15:04:05.000000042Z",`, ""), "field time: missing"},
		{"missing prev", replace(`,"prev":"0000000000000000000000000000000000000000000000000000000000000000"`, ""), "field prev: missing"},
		{"missing argv", replace(`"argv":["/usr/bin/git","status"],`, ""), "field argv"},
		{"null argv", replace(`["/usr/bin/git","status"]`, "null"), "field argv"},
		{"missing rule", replace(`"rule":0,`, ""), "field rule: missing"},
		{"short generation", replace(`"0123456789abcdef0123456789abcdef"`, `"0123"`), "field generation"},
		{"uppercase id", replace(`"0123456789abcdef0123456789abcdef"`, `"0123456789ABCDEF0123456789ABCDEF"`), "canonical"},
		{"bad time", replace(`2026-12-02T15:04:05.000000042Z`, `yesterday`), "field time"},
		{"offset time", replace(`2026-12-02T15:04:05.000000042Z`, `2026-12-02T16:04:05.000000042+01:00`), "canonical"},
		{"short fraction", replace(`05.000000042Z`, `05.1Z`), "canonical"},
		{"exit code range", replace(`"exit_code":0`, `"exit_code":256`), "exit_code"},
		{"negative rule", replace(`"rule":0`, `"rule":-1`), "field rule"},
		{"source none spelled empty", replace(`"source":"AutoRule","rule":0,`, `"source":"",`), "field source: missing"},
		{"escaped character", replace(`"status"`, `"st\u0061tus"`), "canonical"},
		{"spacing", replace(`,"phase"`, `, "phase"`), "canonical"},
		{"field order", replace(`"session":"5e55104e000000000000000000000001","request":"3f00aa00000000000000000000000002"`,
			`"request":"3f00aa00000000000000000000000002","session":"5e55104e000000000000000000000001"`), "canonical"},
		{"duplicate field", replace(`"phase":"Completed"`, `"phase":"Verified","phase":"Completed"`), "canonical"},
		{"trailing bytes", string(good) + " {}", "bytes follow"},
		{"not an object", `["time"]`, "decoding"},
		{"invalid UTF-8", replace(`status`, "stat\xffs"), "not valid UTF-8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := decode([]byte(tt.line))
			if err == nil || !strings.Contains(err.Error(), tt.reason) {
				t.Fatalf("decode(%s) = %v, want an error with %q", tt.line, err, tt.reason)
			}
		})
	}
}

func TestRecordJSON(t *testing.T) {
	recs := lifecycle()
	b, err := json.MarshalIndent(recs, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	var back []Record
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, recs) {
		t.Errorf("round trip\n got %+v\nwant %+v", back, recs)
	}
	if err := json.Unmarshal([]byte(`[{"time":"2026-12-02T15:04:05Z","bogus":1}]`), &back); !errors.Is(err, ErrInvalidRecord) {
		t.Errorf("unknown field: %v, want ErrInvalidRecord", err)
	}
	bad := completed()
	bad.Phase = "Nope"
	if _, err := json.Marshal(bad); !errors.Is(err, ErrInvalidRecord) {
		t.Errorf("marshal of an invalid record: %v, want ErrInvalidRecord", err)
	}
}
