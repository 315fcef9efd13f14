package doctor

import (
	"fmt"
	"io"
	"strings"
)

// Status is the outcome of one check or leftover.
type Status uint8

// Statuses, from best to worst.
const (
	OK Status = iota
	Warn
	Fail
)

var statusNames = [...]string{OK: "ok", Warn: "warn", Fail: "fail"}

// MarshalText encodes the status as its name; a value outside the three
// statuses is an error.
func (s Status) MarshalText() ([]byte, error) {
	if int(s) >= len(statusNames) {
		return nil, fmt.Errorf("doctor status %d: no such status", uint8(s))
	}
	return []byte(statusNames[s]), nil
}

func (s Status) String() string {
	if name, err := s.MarshalText(); err == nil {
		return string(name)
	}
	return fmt.Sprintf("Status(%d)", uint8(s))
}

// Check is the outcome of one host check.
type Check struct {
	// Name identifies the check, e.g. "kernel" or "runsc version".
	Name   string `json:"name"`
	Status Status `json:"status"`
	// Summary is one sentence about what was found.
	Summary string `json:"summary"`
	// Fix says what to do; set for warn and fail.
	Fix string `json:"fix,omitempty"`
}

// Leftover kinds.
const (
	KindPublication = "publication" // identity file or socket with no coordinator
	KindStore       = "store"       // Domain Store that records unfinished work or cannot be read
	KindMount       = "mount"       // mount under the runtime or storage root
	KindProcess     = "process"     // Lazaret helper or runsc no coordinator owns
)

// Leftover is one piece of state an earlier generation left behind.
type Leftover struct {
	Kind   string `json:"kind"`
	Status Status `json:"status"`
	// Domain is the hexadecimal Domain ID the leftover belongs to, when
	// known.
	Domain string `json:"domain,omitempty"`
	// Path is the file, store or mount point concerned.
	Path string `json:"path,omitempty"`
	// PID is the process concerned.
	PID int `json:"pid,omitempty"`
	// Summary is one sentence about what was found.
	Summary string `json:"summary"`
	// Command is the exact shell command that cleans it up.
	Command string `json:"command"`
}

// Report is everything the doctor found.
type Report struct {
	RuntimeRoot string     `json:"runtime_root"`
	StorageRoot string     `json:"storage_root"`
	Checks      []Check    `json:"checks"`
	Leftovers   []Leftover `json:"leftovers"`
	// OK is true when no check and no leftover failed.
	OK bool `json:"ok"`
}

// Finish sets OK from the checks and leftovers.
func (r *Report) Finish() {
	r.OK = true
	for _, c := range r.Checks {
		if c.Status == Fail {
			r.OK = false
		}
	}
	for _, l := range r.Leftovers {
		if l.Status == Fail {
			r.OK = false
		}
	}
}

// WriteText writes the report for a terminal: one line per check, the fix
// indented below a warning or failure, then the leftovers with their
// commands.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	width := 0
	for _, c := range r.Checks {
		width = max(width, len(c.Name))
	}
	for _, c := range r.Checks {
		fmt.Fprintf(&b, "%-4s  %-*s  %s\n", c.Status, width, c.Name, c.Summary)
		if c.Fix != "" && c.Status != OK {
			fmt.Fprintf(&b, "      %*s  fix: %s\n", width, "", c.Fix)
		}
	}
	b.WriteByte('\n')
	if len(r.Leftovers) == 0 {
		fmt.Fprintf(&b, "no leftover state under %s or %s\n", r.RuntimeRoot, r.StorageRoot)
	} else {
		fmt.Fprintf(&b, "leftover state (%d):\n", len(r.Leftovers))
	}
	for _, l := range r.Leftovers {
		fmt.Fprintf(&b, "%-4s  %s: %s\n", l.Status, l.Kind, l.Summary)
		fmt.Fprintf(&b, "      run: %s\n", l.Command)
	}
	if r.OK {
		b.WriteString("\nno failures\n")
	} else {
		b.WriteString("\nthere are failures; see the fix or run line under each\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}
