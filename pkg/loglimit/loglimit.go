// Package loglimit bounds the log lines an untrusted party can cause: a
// slog.Handler that passes records through a token bucket shared by every
// handler derived from it, counts what it drops, and says so in a summary
// line when lines pass again (or at Flush).
//
// What belongs here: the limiter and its handler. What does not: deciding
// which lines are sandbox-caused (the caller routes those through a
// Limiter's logger and keeps its own lines on the plain one).
package loglimit

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Defaults of a Limiter: ten lines at once, then one every 2 seconds.
const (
	DefaultBurst    = 10
	DefaultInterval = 2 * time.Second
)

// SummaryMessage is the message of the line that reports dropped lines.
const SummaryMessage = "log lines caused by the sandbox suppressed"

// Limiter is one token bucket: at most burst lines at once, then one per
// interval. Every handler from Handler shares it.
type Limiter struct {
	next  slog.Handler
	burst float64
	every time.Duration
	now   func() time.Time

	mu         sync.Mutex
	tokens     float64
	last       time.Time
	suppressed uint64
	since      time.Time // when the first suppressed line of the count was dropped
}

// New returns a Limiter writing to next. burst <= 0 and interval <= 0 take
// the defaults.
func New(next slog.Handler, burst int, interval time.Duration) *Limiter {
	if burst <= 0 {
		burst = DefaultBurst
	}
	if interval <= 0 {
		interval = DefaultInterval
	}
	return &Limiter{next: next, burst: float64(burst), every: interval, now: time.Now, tokens: float64(burst)}
}

// Logger is a logger whose lines go through the limiter.
func (l *Limiter) Logger() *slog.Logger { return slog.New(&handler{l: l, next: l.next}) }

// Suppressed is how many lines were dropped since the last summary.
func (l *Limiter) Suppressed() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.suppressed
}

// take reports whether a line may pass, and the summary to write before
// it (n > 0).
func (l *Limiter) take() (ok bool, n uint64, since time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	if !l.last.IsZero() {
		l.tokens = min(l.burst, l.tokens+float64(now.Sub(l.last))/float64(l.every))
	}
	l.last = now
	if l.tokens < 1 {
		if l.suppressed == 0 {
			l.since = now
		}
		l.suppressed++
		return false, 0, time.Time{}
	}
	l.tokens--
	n, since = l.suppressed, l.since
	l.suppressed = 0
	return true, n, since
}

func (l *Limiter) summary(ctx context.Context, n uint64, since time.Time) error {
	r := slog.NewRecord(l.now(), slog.LevelWarn, SummaryMessage, 0)
	r.AddAttrs(slog.Uint64("suppressed", n), slog.Time("since", since))
	return l.next.Handle(ctx, r)
}

// Flush writes the summary of lines dropped since the last one, if any;
// call it when the source of the lines goes away.
func (l *Limiter) Flush(ctx context.Context) error {
	l.mu.Lock()
	n, since := l.suppressed, l.since
	l.suppressed = 0
	l.mu.Unlock()
	if n == 0 {
		return nil
	}
	return l.summary(ctx, n, since)
}

// handler is one view (attributes, groups) onto the shared limiter.
type handler struct {
	l    *Limiter
	next slog.Handler
}

func (h *handler) Enabled(ctx context.Context, lvl slog.Level) bool { return h.next.Enabled(ctx, lvl) }

func (h *handler) Handle(ctx context.Context, r slog.Record) error {
	ok, n, since := h.l.take()
	if !ok {
		return nil
	}
	if n > 0 {
		if err := h.l.summary(ctx, n, since); err != nil {
			return err
		}
	}
	return h.next.Handle(ctx, r)
}

func (h *handler) WithAttrs(as []slog.Attr) slog.Handler {
	return &handler{l: h.l, next: h.next.WithAttrs(as)}
}

func (h *handler) WithGroup(name string) slog.Handler {
	return &handler{l: h.l, next: h.next.WithGroup(name)}
}
