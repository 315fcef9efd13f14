package coordinator

import (
	"fmt"
	"os"

	"lazaret.dev/pkg/startup"
)

// report is the HC's end of the start report (fd 4), in the format of
// package startup: `step` lines, the `kept` lines of sticky isolation
// (sticky.go) before `ready`, then exactly one `ready` or `error`, then
// close.
type report struct {
	w *startup.Writer
}

func newReport(f *os.File) *report {
	if f == nil {
		return &report{w: startup.NewWriter(nil)}
	}
	return &report{w: startup.NewWriter(f)}
}

// step reports progress.
func (r *report) step(s Step) { r.progress(s.String()) }

// stepDone reports the end of a step of the start order.
func (r *report) stepDone(s Step) { r.w.Done(s.String()) }

// progress reports a named step, such as "recover", which comes before
// the start order.
func (r *report) progress(name string) { r.w.Step(name) }

// ready reports success and closes the report.
func (r *report) ready() { r.w.Ready() }

// fail reports err as one sentence and closes the report.
func (r *report) fail(err error) { r.w.Fail(err.Error()) }

// oneLine makes s a single line of printable text.
func oneLine(s string) string { return startup.OneLine(s) }

// stepError names the start step that failed.
type stepError struct {
	Step Step
	Err  error
}

func (e *stepError) Error() string { return fmt.Sprintf("%s step: %v", e.Step, e.Err) }
func (e *stepError) Unwrap() error { return e.Err }
