// Package trace records the protocol events of a Domain as JSON lines, one
// file per Domain, for checking against the model (pkg/conform).
//
// Recording is off unless $LAZARET_TRACE_DIR names a directory: the Host
// Coordinator then appends one line per model action it takes to
// <dir>/<domain>.trace. The end-to-end tests turn it on; a user never
// needs it. A trace holds identifiers and classifications (whether a
// command needs a shell, whether a rule admits it), never an argv, an
// environment value or a secret.
package trace

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// EnvDir names the directory traces are written to; unset or empty turns
// recording off.
const EnvDir = "LAZARET_TRACE_DIR"

// Event is one protocol event: a model action taken by the implementation,
// named as in tla/Lazaret.tla, with the session or request it binds and the
// facts the checker needs to bind the model's constants.
type Event struct {
	Time    time.Time         `json:"time"`
	PID     int               `json:"pid"`
	Action  string            `json:"action"`
	Session string            `json:"session,omitempty"`
	Request string            `json:"request,omitempty"`
	Facts   map[string]string `json:"facts,omitempty"`
}

// Fact names used in Event.Facts.
const (
	FactGeneration = "generation" // the generation an event belongs to
	FactSandbox    = "sandbox"    // a sandbox ID: the generation's (StartSandbox) or a request's
	FactCLI        = "cli"        // a CLI ID: a session's (RegisterSession), a request's or a decision's
	FactAnchor     = "anchor"     // a session anchor ID, likewise
	FactShell      = "shell"      // "true" when the requested command needs a shell
	FactRule       = "rule"       // "true" when an auto-approval rule admits the requested command
	FactEdited     = "edited"     // "true" when the developer approved another argv than requested
	FactFrom       = "from"       // the durable phase a recovered generation was found in
)

// Path is the trace file of the Domain with the given ID (hex) in dir.
func Path(dir, domain string) string { return filepath.Join(dir, domain+".trace") }

// Recorder appends events to one trace file. A nil *Recorder records
// nothing, so callers need not test whether tracing is on.
type Recorder struct {
	mu  sync.Mutex
	f   *os.File
	err error
}

// Open opens (creating it) the trace file at path for appending. Every
// write is one whole line with O_APPEND, so the coordinators of successive
// generations, which hold the Domain lock in turn, add to one file.
func Open(path string) (*Recorder, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening the trace %q: %w", path, err)
	}
	return &Recorder{f: f}, nil
}

// Record appends ev, stamping its time and process. The first write error
// is kept and returned by every later call and by Close.
func (r *Recorder) Record(ev Event) error {
	if r == nil {
		return nil
	}
	ev.Time = time.Now().UTC()
	ev.PID = os.Getpid()
	line, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("encoding a trace event: %w", err)
	}
	line = append(line, '\n')
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return r.err
	}
	if _, err := r.f.Write(line); err != nil {
		r.err = fmt.Errorf("writing the trace %q: %w", r.f.Name(), err)
	}
	return r.err
}

// Close closes the file.
func (r *Recorder) Close() error {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	err := r.f.Close()
	if r.err != nil {
		return r.err
	}
	return err
}

// ErrFormat is wrapped by every error for a line that is not an event.
var ErrFormat = errors.New("malformed trace")

// Read reads every event of the trace file at path.
func Read(path string) ([]Event, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("opening the trace: %w", err)
	}
	defer f.Close()
	evs, err := Decode(f)
	if err != nil {
		return nil, fmt.Errorf("trace %q: %w", path, err)
	}
	return evs, nil
}

// Decode reads events, one JSON object per line; unknown fields and a
// line without an action are refused with the line number.
func Decode(r io.Reader) ([]Event, error) {
	var out []Event
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.DisallowUnknownFields()
		var ev Event
		if err := dec.Decode(&ev); err != nil {
			return out, fmt.Errorf("%w: line %d: %v", ErrFormat, n, err)
		}
		if ev.Action == "" {
			return out, fmt.Errorf("%w: line %d: no action", ErrFormat, n)
		}
		out = append(out, ev)
	}
	if err := sc.Err(); err != nil {
		return out, fmt.Errorf("%w: %v", ErrFormat, err)
	}
	return out, nil
}
