package session

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// ProgressDelay is how long a start or wait runs before progress is shown:
// a Domain that is ready quickly prints nothing.
const ProgressDelay = time.Second

// Printer shows start progress on a terminal, one line per step, once the
// start has taken longer than Delay. It is safe for concurrent use.
type Printer struct {
	w     io.Writer
	delay time.Duration

	mu      sync.Mutex
	timer   *time.Timer
	shown   bool   // the delay has passed
	pending string // the line to print when it does
	done    bool
}

// NewPrinter returns a Printer writing to w after delay.
func NewPrinter(w io.Writer, delay time.Duration) *Printer {
	p := &Printer{w: w, delay: delay}
	p.timer = time.AfterFunc(delay, p.reveal)
	return p
}

func (p *Printer) reveal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done {
		return
	}
	p.shown = true
	if p.pending != "" {
		fmt.Fprintln(p.w, p.pending)
		p.pending = ""
	}
}

func (p *Printer) line(s string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done {
		return
	}
	if p.shown {
		fmt.Fprintln(p.w, s)
		return
	}
	p.pending = s
}

// Step shows a start report step.
func (p *Printer) Step(name string) { p.line("lazaret: starting the Domain: " + name) }

// Waiting shows that another process is starting or stopping the Domain.
func (p *Printer) Waiting() {
	p.line("lazaret: waiting for the Domain, which another terminal is starting or stopping")
}

// Done stops the display; nothing is printed afterwards.
func (p *Printer) Done() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done = true
	p.timer.Stop()
}
