package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"lazaret.dev/pkg/escalation"
	"lazaret.dev/pkg/ids"
	"lazaret.dev/pkg/protocol"
)

// MaxLineBytes bounds one line without its newline. A maximal request
// argv (protocol.MaxArgvBytes) fits even when every byte is escaped.
const MaxLineBytes = 1 << 20

// timeLayout is RFC 3339 with exactly nine fractional digits; records are
// written in UTC, so it always ends in "Z".
const timeLayout = "2006-01-02T15:04:05.000000000Z07:00"

// sourceNone is how a line spells escalation.SourceNone.
const sourceNone = "none"

// Path returns the audit log file of id under a storage root, next to its
// Domain Store (domainstore.Path).
func Path(storageRoot string, id ids.DomainID) string {
	return filepath.Join(storageRoot, "domains", id.String()+".audit")
}

// Outcome is how a request ended, spelled as in the model.
type Outcome string

// Outcomes. OutcomeNone is a request that has not reached a pending phase.
const (
	OutcomeNone      Outcome = ""
	OutcomeCompleted Outcome = "Completed"
	OutcomeDenied    Outcome = "Denied"
	OutcomeTimedOut  Outcome = "TimedOut"
	OutcomeCancelled Outcome = "Cancelled"
	OutcomeFailed    Outcome = "Failed"
)

// OutcomeOf names a protocol outcome; OutcomeNone for an unknown value.
func OutcomeOf(o protocol.EscalationOutcome) Outcome {
	switch o {
	case protocol.OutcomeCompleted:
		return OutcomeCompleted
	case protocol.OutcomeDenied:
		return OutcomeDenied
	case protocol.OutcomeTimedOut:
		return OutcomeTimedOut
	case protocol.OutcomeCancelled:
		return OutcomeCancelled
	case protocol.OutcomeFailed:
		return OutcomeFailed
	}
	return OutcomeNone
}

// phaseOutcome is the outcome each phase carries: OutcomeNone before the
// pending phases.
var phaseOutcome = map[escalation.Phase]Outcome{
	escalation.PhaseVerified:            OutcomeNone,
	escalation.PhaseAwaitingApproval:    OutcomeNone,
	escalation.PhaseApproved:            OutcomeNone,
	escalation.PhaseExecuting:           OutcomeNone,
	escalation.PhaseCompletionPending:   OutcomeCompleted,
	escalation.PhaseCompleted:           OutcomeCompleted,
	escalation.PhaseDenialPending:       OutcomeDenied,
	escalation.PhaseDenied:              OutcomeDenied,
	escalation.PhaseTimeoutPending:      OutcomeTimedOut,
	escalation.PhaseTimedOut:            OutcomeTimedOut,
	escalation.PhaseCancellationPending: OutcomeCancelled,
	escalation.PhaseCancelled:           OutcomeCancelled,
	escalation.PhaseFailurePending:      OutcomeFailed,
	escalation.PhaseFailed:              OutcomeFailed,
	escalation.PhaseRefused:             OutcomeFailed,
}

var sessionPhases = map[escalation.SessionPhase]bool{
	escalation.SessionAttached:      true,
	escalation.SessionPrompting:     true,
	escalation.SessionHostExecuting: true,
}

// Record is one line of the audit log.
type Record struct {
	// Time is when the transition was recorded, in UTC.
	Time       time.Time
	Generation ids.GenerationID
	Session    ids.SessionID
	Request    ids.RequestID
	Phase      escalation.Phase
	// SessionPhase is the session's phase after the transition.
	SessionPhase escalation.SessionPhase
	Source       escalation.Source
	// Rule is the admitting rule's index when Source is SourceAutoRule,
	// else -1.
	Rule int
	// Argv is the requested argv until approval, then the approved argv.
	Argv []string
	// Outcome is set from the pending phases on.
	Outcome Outcome
	// ExitCode is the host command's exit status, exactly for
	// OutcomeCompleted.
	ExitCode *uint8
	// Reason explains the transition when it has a reason; "" otherwise.
	Reason string
	// Prev is the SHA-256 of the previous line without its newline, zero
	// for the first line. Writer.Append sets it.
	Prev ids.Digest
}

// FromEvent makes the record of an engine event of generation gen,
// recorded at time at.
func FromEvent(gen ids.GenerationID, at time.Time, ev escalation.Event) Record {
	r := Record{
		Time:       at.UTC().Round(0),
		Generation: gen, Session: ev.Session, Request: ev.Request,
		Phase: ev.Phase, SessionPhase: ev.SessionPhase, Source: ev.Source,
		Rule: -1, Argv: slices.Clone(ev.Argv),
	}
	if ev.Source == escalation.SourceAutoRule {
		r.Rule = ev.Rule
	}
	if phaseOutcome[ev.Phase] != OutcomeNone {
		r.Outcome = OutcomeOf(ev.Outcome)
		if ev.ExitCode != nil {
			code := *ev.ExitCode
			r.ExitCode = &code
		}
	}
	if ev.Err != nil {
		r.Reason = strings.ToValidUTF8(ev.Err.Error(), "\uFFFD")
	}
	return r
}

// line is the JSON object of one record, fields in line order.
type line struct {
	Time         string   `json:"time"`
	Generation   string   `json:"generation"`
	Session      string   `json:"session"`
	Request      string   `json:"request"`
	Phase        string   `json:"phase"`
	SessionPhase string   `json:"session_phase"`
	Source       string   `json:"source"`
	Rule         *int     `json:"rule,omitempty"`
	Argv         []string `json:"argv"`
	Outcome      string   `json:"outcome,omitempty"`
	ExitCode     *uint8   `json:"exit_code,omitempty"`
	Reason       string   `json:"reason,omitempty"`
	Prev         string   `json:"prev"`
}

// Check applies the field rules of the format to r (all but the chain).
func (r *Record) Check() error {
	if err := r.check(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidRecord, err)
	}
	return nil
}

func (r *Record) check() error {
	switch {
	case r.Time.IsZero():
		return errors.New("field time: missing")
	case r.Time.Location() != time.UTC:
		return fmt.Errorf("field time: %v is not in UTC", r.Time)
	case r.Time.Year() > 9999:
		return fmt.Errorf("field time: year %d has more than four digits", r.Time.Year())
	}
	want, ok := phaseOutcome[r.Phase]
	if !ok {
		return fmt.Errorf("field phase: %q is not an escalation phase", r.Phase)
	}
	if !sessionPhases[r.SessionPhase] {
		return fmt.Errorf("field session_phase: %q is not Attached, Prompting or HostExecuting", r.SessionPhase)
	}
	switch r.Source {
	case escalation.SourceAutoRule:
		if r.Rule < 0 {
			return fmt.Errorf("field rule: %d: an AutoRule approval names its rule (an index from 0)", r.Rule)
		}
	case escalation.SourceDeveloper, escalation.SourceNone:
		if r.Rule != -1 {
			return fmt.Errorf("field rule: only an AutoRule approval names a rule (source %s, rule %d)", sourceName(r.Source), r.Rule)
		}
	default:
		return fmt.Errorf("field source: %q is not AutoRule, Developer or none", r.Source)
	}
	if len(r.Argv) == 0 {
		return errors.New("field argv: missing or empty")
	}
	for i, a := range r.Argv {
		if !utf8.ValidString(a) {
			return fmt.Errorf("field argv: element %d is not valid UTF-8", i)
		}
	}
	if r.Outcome != want {
		if want == OutcomeNone {
			return fmt.Errorf("field outcome: phase %s has no outcome yet, got %q", r.Phase, r.Outcome)
		}
		if r.Outcome == OutcomeNone {
			return fmt.Errorf("field outcome: missing; phase %s carries outcome %s", r.Phase, want)
		}
		return fmt.Errorf("field outcome: phase %s carries outcome %s, got %q", r.Phase, want, r.Outcome)
	}
	if (r.ExitCode != nil) != (r.Outcome == OutcomeCompleted) {
		if r.ExitCode == nil {
			return errors.New("field exit_code: missing; a Completed request has an exit code")
		}
		return fmt.Errorf("field exit_code: only a Completed request has an exit code (outcome %q)", r.Outcome)
	}
	if !utf8.ValidString(r.Reason) {
		return errors.New("field reason: not valid UTF-8")
	}
	return nil
}

func sourceName(s escalation.Source) string {
	if s == escalation.SourceNone {
		return sourceNone
	}
	return string(s)
}

// toLine checks r and converts it.
func (r *Record) toLine() (line, error) {
	if err := r.check(); err != nil {
		return line{}, err
	}
	l := line{
		Time:       r.Time.Format(timeLayout),
		Generation: r.Generation.String(), Session: r.Session.String(), Request: r.Request.String(),
		Phase: string(r.Phase), SessionPhase: r.SessionPhase.String(), Source: sourceName(r.Source),
		Argv: r.Argv, Outcome: string(r.Outcome), ExitCode: r.ExitCode, Reason: r.Reason,
		Prev: r.Prev.String(),
	}
	if r.Source == escalation.SourceAutoRule {
		rule := r.Rule
		l.Rule = &rule
	}
	return l, nil
}

// fromLine converts and checks a decoded line.
func fromLine(l *line) (Record, error) {
	var r Record
	for _, f := range []struct{ name, value string }{
		{"time", l.Time}, {"generation", l.Generation}, {"session", l.Session}, {"request", l.Request},
		{"phase", l.Phase}, {"session_phase", l.SessionPhase}, {"source", l.Source}, {"prev", l.Prev},
	} {
		if f.value == "" {
			return r, fmt.Errorf("field %s: missing or empty", f.name)
		}
	}
	t, err := time.Parse(time.RFC3339Nano, l.Time)
	if err != nil {
		return r, fmt.Errorf("field time: %w", err)
	}
	r.Time = t.UTC()
	if err := parseID(r.Generation[:], l.Generation, "generation"); err != nil {
		return r, err
	}
	if err := parseID(r.Session[:], l.Session, "session"); err != nil {
		return r, err
	}
	if err := parseID(r.Request[:], l.Request, "request"); err != nil {
		return r, err
	}
	if err := parseID(r.Prev[:], l.Prev, "prev"); err != nil {
		return r, err
	}
	r.Phase = escalation.Phase(l.Phase)
	switch l.Source {
	case sourceNone:
		r.Source = escalation.SourceNone
	case string(escalation.SourceAutoRule), string(escalation.SourceDeveloper):
		r.Source = escalation.Source(l.Source)
	default:
		return r, fmt.Errorf("field source: %q is not AutoRule, Developer or none", l.Source)
	}
	r.Rule = -1
	if l.Rule != nil {
		r.Rule = *l.Rule
		if r.Source != escalation.SourceAutoRule {
			return r, fmt.Errorf("field rule: only an AutoRule approval names a rule (source %s)", l.Source)
		}
	} else if r.Source == escalation.SourceAutoRule {
		return r, errors.New("field rule: missing; an AutoRule approval names its rule")
	}
	r.Argv = l.Argv
	r.Outcome = Outcome(l.Outcome)
	r.ExitCode = l.ExitCode
	r.Reason = l.Reason
	if err := r.SessionPhase.UnmarshalText([]byte(l.SessionPhase)); err != nil {
		return r, fmt.Errorf("field session_phase: %q is not Attached, Prompting or HostExecuting", l.SessionPhase)
	}
	if err := r.check(); err != nil {
		return r, err
	}
	return r, nil
}

func parseID(dst []byte, s, field string) error { return ids.ParseHex(dst, s, "field "+field) }

// encode returns r's line without the newline.
func (r *Record) encode() ([]byte, error) {
	l, err := r.toLine()
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(&l); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte{'\n'}), nil
}

// decode reads one line (without its newline) strictly: one JSON object,
// known fields only, every rule met, and the canonical encoding of its
// record.
func decode(b []byte) (Record, error) {
	if !utf8.Valid(b) {
		return Record{}, errors.New("the line is not valid UTF-8")
	}
	var l line
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&l); err != nil {
		return Record{}, fmt.Errorf("decoding the JSON object: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return Record{}, errors.New("bytes follow the JSON object")
	}
	r, err := fromLine(&l)
	if err != nil {
		return Record{}, err
	}
	canon, err := r.encode()
	if err != nil {
		return Record{}, err
	}
	if !bytes.Equal(canon, b) {
		return Record{}, errors.New("the line is not the canonical encoding of its record (field order, spacing, escaping or number form differ)")
	}
	return r, nil
}

// hash is the chain value of a line without its newline.
func hash(b []byte) ids.Digest { return sha256.Sum256(b) }

// MarshalJSON returns the record as its line's JSON object.
func (r Record) MarshalJSON() ([]byte, error) {
	b, err := r.encode()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidRecord, err)
	}
	return b, nil
}

// UnmarshalJSON reads a record object as the Reader does, without the
// canonical-bytes rule (the object may be indented or reordered).
func (r *Record) UnmarshalJSON(b []byte) error {
	var l line
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&l); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidRecord, err)
	}
	rec, err := fromLine(&l)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidRecord, err)
	}
	*r = rec
	return nil
}
