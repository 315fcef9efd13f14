package coordinator

import (
	"fmt"
	"os"
	"strings"
	"sync"
)

// report is the HC's end of the start report (fd 4): `step NAME` lines,
// before `ready` the `kept "PATH"` and `kept-more N` lines of sticky
// isolation (sticky.go), then exactly one `ready` or `error SENTENCE`,
// then close.
type report struct {
	mu       sync.Mutex
	f        *os.File
	finished bool
}

func newReport(f *os.File) *report { return &report{f: f} }

func (r *report) line(s string) {
	if r.f == nil {
		return
	}
	// A CLI that went away must not stop the coordinator: write errors are
	// ignored, the log has everything.
	_, _ = r.f.WriteString(s + "\n")
}

// step reports progress.
func (r *report) step(s Step) { r.progress(s.String()) }

// progress reports a named step, such as "recover", which comes before
// the start order.
func (r *report) progress(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.finished {
		r.line("step " + name)
	}
}

// ready reports success and closes the report.
func (r *report) ready() {
	r.finish("ready")
}

// fail reports err as one sentence and closes the report.
func (r *report) fail(err error) {
	r.finish("error " + oneLine(err.Error()))
}

func (r *report) finish(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.finished {
		return
	}
	r.finished = true
	r.line(s)
	if r.f != nil {
		r.f.Close()
		r.f = nil
	}
}

// oneLine makes s a single line of printable text.
func oneLine(s string) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
	return strings.TrimSpace(s)
}

// stepError names the start step that failed.
type stepError struct {
	Step Step
	Err  error
}

func (e *stepError) Error() string { return fmt.Sprintf("%s step: %v", e.Step, e.Err) }
func (e *stepError) Unwrap() error { return e.Err }
