package session

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// StartTrace writes, as they happen, when the parts of a start or a join
// took place, in milliseconds since the command began: the CLI's own
// parts (Mark) and the coordinator's steps as its start report names
// them (StepBegan, StepDone). Steps of the start may overlap; each end
// line says how long that step took as the CLI saw it. A nil
// *StartTrace writes nothing.
type StartTrace struct {
	w     io.Writer
	t0    time.Time
	mu    sync.Mutex
	began map[string]time.Time
}

// NewStartTrace returns a trace on w whose times count from t0.
func NewStartTrace(w io.Writer, t0 time.Time) *StartTrace {
	return &StartTrace{w: w, t0: t0, began: map[string]time.Time{}}
}

func (t *StartTrace) line(now time.Time, format string, args ...any) {
	ms := float64(now.Sub(t.t0).Microseconds()) / 1000
	fmt.Fprintf(t.w, "lazaret-cli: trace %9.1f ms  %s\n", ms, fmt.Sprintf(format, args...))
}

// Mark records that the CLI reached what.
func (t *StartTrace) Mark(what string) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.line(time.Now(), "%s", what)
}

// StepBegan records the coordinator's `step NAME` line.
func (t *StartTrace) StepBegan(name string) {
	if t == nil {
		return
	}
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.began[name] = now
	t.line(now, "step %s began", name)
}

// StepDone records the coordinator's `done NAME` line.
func (t *StartTrace) StepDone(name string) {
	if t == nil {
		return
	}
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if b, ok := t.began[name]; ok {
		t.line(now, "step %s done (%.1f ms)", name, float64(now.Sub(b).Microseconds())/1000)
		return
	}
	t.line(now, "step %s done", name)
}
