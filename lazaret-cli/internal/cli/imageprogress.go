package cli

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"lazaret.dev/lazaret-cli/internal/session"
	"lazaret.dev/pkg/image/store"
)

// imageProgress shows an image being stored. On a terminal it redraws one
// line (bytes, layers, download rate) with a carriage return and a
// clear-to-end-of-line; elsewhere, when plain lines are asked for, it
// writes one line per layer started, finished or already stored, and
// never redraws. A nil *imageProgress shows nothing.
type imageProgress struct {
	w     io.Writer
	label string
	cols  int // terminal width; 0 writes plain lines
	now   func() time.Time

	mu     sync.Mutex
	start  time.Time
	drawn  time.Time // last redraw; zero before the first
	ev     store.Event
	base   int64 // bytes copied for earlier images of a load
	copied int64 // bytes copied so far, all images
	held   int   // layers found already stored, all images
}

// minRedraw is the shortest time between two redraws of the terminal line.
const minRedraw = 100 * time.Millisecond

// newImageProgress returns progress for w labelled label: a redrawn line
// when w is a terminal, plain lines when plain is set, else nil.
func newImageProgress(w io.Writer, label string, plain bool) *imageProgress {
	p := &imageProgress{w: w, label: label, now: time.Now}
	if f, ok := w.(*os.File); ok && session.IsTerminal(int(f.Fd())) {
		_, cols, _, _, err := session.Size(int(f.Fd()))
		if err != nil || cols == 0 {
			cols = 80
		}
		p.cols = int(cols)
	} else if !plain {
		return nil
	}
	p.start = p.now()
	return p
}

// update is a store.Progress.
func (p *imageProgress) update(e store.Event) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if e.Kind == store.ImageStart {
		p.base = p.copied
	}
	p.ev = e
	p.copied = p.base + e.Copied
	if e.Kind == store.BlobPresent && e.Blob.What == "layer" {
		p.held++
	}
	if p.cols == 0 {
		p.plainLine(e)
		return
	}
	now := p.now()
	if e.Kind == store.BlobBytes && !p.drawn.IsZero() && now.Sub(p.drawn) < minRedraw {
		return
	}
	p.drawn = now
	fmt.Fprintf(p.w, "\r%s\x1b[K", p.render(now))
}

func layers(n int) string {
	if n == 1 {
		return "1 layer"
	}
	return fmt.Sprintf("%d layers", n)
}

func shortDigest(e store.Event) string {
	s := e.Blob.Digest.String()
	if i := len(e.Blob.Digest.Algorithm) + 1 + 12; len(s) > i {
		s = s[:i]
	}
	return s
}

// plainLine writes the line for e, if e deserves one.
func (p *imageProgress) plainLine(e store.Event) {
	if e.Kind == store.ImageStart {
		fmt.Fprintf(p.w, "%s: %s, %s\n", p.label, layers(e.Layers), humanSize(e.Total))
		return
	}
	if e.Blob.What != "layer" {
		return
	}
	var what string
	switch e.Kind {
	case store.BlobStart:
		what = "downloading"
	case store.BlobDone:
		what = "done"
	case store.BlobPresent:
		what = "already stored"
	default:
		return
	}
	fmt.Fprintf(p.w, "layer %d/%d %s %s: %s\n", e.Blob.Index, e.Layers, shortDigest(e), humanSize(e.Blob.Size), what)
}

// rate is the download rate since the start, or 0 before there is one.
func (p *imageProgress) rate(now time.Time) int64 {
	d := now.Sub(p.start)
	if d <= 0 {
		return 0
	}
	return int64(float64(p.copied) / d.Seconds())
}

// render is the terminal line: label, a bar when there is room, bytes,
// layers and rate, never reaching the last column (where some terminals
// wrap).
func (p *imageProgress) render(now time.Time) string {
	e := p.ev
	stats := fmt.Sprintf(" %s/%s  layers %d/%d", humanSize(e.Done), humanSize(e.Total), e.LayersDone, e.Layers)
	if r := p.rate(now); r > 0 {
		stats += fmt.Sprintf("  %s/s", humanSize(r))
	}
	width := p.cols - 1
	label := p.label
	const maxBar, minBar = 30, 10
	barW := min(maxBar, width-len(label)-len(stats)-3)
	var b strings.Builder
	if barW < minBar {
		if room := width - len(stats); len(label) > room {
			label = label[:max(room, 0)]
		}
		b.WriteString(label)
	} else {
		fill := barW
		if e.Total > 0 {
			fill = int(int64(barW) * min(e.Done, e.Total) / e.Total)
		}
		fmt.Fprintf(&b, "%s [%s%s]", label, strings.Repeat("=", fill), strings.Repeat(" ", barW-fill))
	}
	b.WriteString(stats)
	s := b.String()
	return s[:min(len(s), max(width, 0))]
}

// finish ends the redrawn line and writes the summary: bytes downloaded,
// time and rate, and how many layers were already stored; upToDate says
// the store held this very image under this name before, so nothing
// changed.
func (p *imageProgress) finish(upToDate bool) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cols > 0 && !p.drawn.IsZero() {
		fmt.Fprintln(p.w)
	}
	now := p.now()
	if p.copied == 0 && upToDate {
		fmt.Fprintf(p.w, "%s: up to date, 0 B downloaded\n", p.label)
		return
	}
	took := now.Sub(p.start).Round(time.Millisecond)
	line := fmt.Sprintf("%s: %s downloaded in %s", p.label, humanSize(p.copied), took)
	if r := p.rate(now); r > 0 {
		line += fmt.Sprintf(" (%s/s)", humanSize(r))
	}
	if p.held > 0 {
		line += fmt.Sprintf(", %d of %d layers already stored", p.held, p.ev.Layers)
	}
	fmt.Fprintln(p.w, line)
}

// end ends the redrawn line, if any, without a summary.
func (p *imageProgress) end() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cols > 0 && !p.drawn.IsZero() {
		fmt.Fprintln(p.w)
	}
}
