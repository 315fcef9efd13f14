package cli

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"lazaret.dev/pkg/image/store"
)

// fakeClock advances by step at every reading.
type fakeClock struct {
	t    time.Time
	step time.Duration
}

func (c *fakeClock) now() time.Time { c.t = c.t.Add(c.step); return c.t }

func layerBlob(i int, size int64) store.Blob {
	return store.Blob{What: "layer", Index: i, Size: size, Digest: v1.Hash{Algorithm: "sha256", Hex: strings.Repeat(string(rune('a'+i)), 64)}}
}

// pullEvents is what the store reports for an image of two layers of 1000
// and 3000 bytes (manifest and config 100 each): fetched, or all present.
func pullEvents(present bool) []store.Event {
	const total = 4200
	e := store.Event{Total: total, Layers: 2}
	var out []store.Event
	add := func(k store.EventKind, b store.Blob, copied int64) {
		e.Kind, e.Blob = k, b
		e.Done += copied
		if !present {
			e.Copied += copied
		}
		if b.What == "layer" && (k == store.BlobDone || k == store.BlobPresent) {
			e.LayersDone++
		}
		out = append(out, e)
	}
	add(store.ImageStart, store.Blob{}, 0)
	small := []store.Blob{{What: "manifest", Size: 100}, {What: "config", Size: 100}}
	for _, b := range append(small, layerBlob(1, 1000), layerBlob(2, 3000)) {
		if present {
			add(store.BlobPresent, b, b.Size)
			continue
		}
		add(store.BlobStart, b, 0)
		add(store.BlobBytes, b, b.Size/2)
		add(store.BlobBytes, b, b.Size-b.Size/2)
		add(store.BlobDone, b, 0)
	}
	return out
}

func run(p *imageProgress, evs []store.Event, upToDate bool) {
	for _, e := range evs {
		p.update(e)
	}
	p.finish(upToDate)
}

func TestImageProgressPlain(t *testing.T) {
	tests := []struct {
		name     string
		present  bool
		upToDate bool
		want     string
	}{
		{"first pull", false, false, `localhost/a:1: 2 layers, 4.2 kB
layer 1/2 sha256:bbbbbbbbbbbb 1.0 kB: downloading
layer 1/2 sha256:bbbbbbbbbbbb 1.0 kB: done
layer 2/2 sha256:cccccccccccc 3.0 kB: downloading
layer 2/2 sha256:cccccccccccc 3.0 kB: done
localhost/a:1: 4.2 kB downloaded in 1s (4.2 kB/s)
`},
		{"pulled again", true, true, `localhost/a:1: 2 layers, 4.2 kB
layer 1/2 sha256:bbbbbbbbbbbb 1.0 kB: already stored
layer 2/2 sha256:cccccccccccc 3.0 kB: already stored
localhost/a:1: up to date, 0 B downloaded
`},
		{"new name for stored layers", true, false, `localhost/a:1: 2 layers, 4.2 kB
layer 1/2 sha256:bbbbbbbbbbbb 1.0 kB: already stored
layer 2/2 sha256:cccccccccccc 3.0 kB: already stored
localhost/a:1: 0 B downloaded in 1s, 2 of 2 layers already stored
`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			p := newImageProgress(&out, "localhost/a:1", true)
			p.start = time.Unix(0, 0)
			p.now = func() time.Time { return time.Unix(1, 0) }
			run(p, pullEvents(tt.present), tt.upToDate)
			if out.String() != tt.want {
				t.Errorf("output:\n%s\nwant:\n%s", out.String(), tt.want)
			}
			if strings.ContainsAny(out.String(), "\r\x1b") {
				t.Errorf("plain output redraws: %q", out.String())
			}
		})
	}
	if p := newImageProgress(&bytes.Buffer{}, "x", false); p != nil {
		t.Error("progress without a terminal or plain lines is not silent")
	}
}

// controls matches every control character but the two the terminal
// rendering may use, and escape sequences other than clear-to-end-of-line.
var controls = regexp.MustCompile("[\x00-\x09\x0b\x0c\x0e-\x1a\x1c-\x1f\x7f]|\x1b[^\\[]|\x1b\\[[^K]")

func TestImageProgressTerminal(t *testing.T) {
	for _, cols := range []int{120, 60, 30, 8} {
		var out bytes.Buffer
		p := &imageProgress{w: &out, label: "registry.example/team/agent:1", cols: cols}
		clock := &fakeClock{t: time.Unix(0, 0), step: 150 * time.Millisecond}
		p.now, p.start = clock.now, clock.t
		run(p, pullEvents(false), false)
		s := out.String()
		if controls.MatchString(s) {
			t.Errorf("%d columns: output has escape sequences beyond \\r and clear-line: %q", cols, s)
		}
		body, summary, ok := strings.Cut(s, "\n")
		if !ok || !strings.HasPrefix(summary, "registry.example/team/agent:1: 4.2 kB downloaded in ") {
			t.Fatalf("%d columns: no summary after the line: %q", cols, s)
		}
		frames := strings.Split(strings.TrimPrefix(body, "\r"), "\r")
		for _, f := range frames {
			f = strings.TrimSuffix(f, "\x1b[K")
			if len(f) >= cols {
				t.Errorf("%d columns: frame %q reaches the last column", cols, f)
			}
		}
		last := strings.TrimSuffix(frames[len(frames)-1], "\x1b[K")
		// A narrow terminal loses the bar, then the label, then the end
		// of the numbers; the line never wraps.
		stats := " 4.2 kB/4.2 kB  layers 2/2"
		if cols >= 80 {
			want := "registry.example/team/agent:1 [==============================]" + stats + "  "
			if !strings.HasPrefix(last, want) {
				t.Errorf("%d columns: last frame %q, want it to start %q", cols, last, want)
			}
		} else if strings.Contains(last, "[") || !strings.Contains(last, stats[:min(len(stats), cols-1)]) {
			t.Errorf("%d columns: last frame %q, want %q without a bar", cols, last, stats)
		}
		if cols >= 80 && !strings.HasSuffix(last, "/s") {
			t.Errorf("%d columns: last frame %q shows no rate", cols, last)
		}
	}
}

func TestImageProgressTerminalThrottles(t *testing.T) {
	var out bytes.Buffer
	p := &imageProgress{w: &out, label: "a", cols: 80}
	clock := &fakeClock{t: time.Unix(0, 0), step: time.Millisecond}
	p.now, p.start = clock.now, clock.t
	evs := pullEvents(false)
	for _, e := range evs {
		p.update(e)
	}
	bytesEvents := 0
	for _, e := range evs {
		if e.Kind == store.BlobBytes {
			bytesEvents++
		}
	}
	if frames := strings.Count(out.String(), "\r"); frames > len(evs)-bytesEvents+1 {
		t.Errorf("%d redraws for %d events 1ms apart, want byte counts throttled", frames, len(evs))
	}
}
