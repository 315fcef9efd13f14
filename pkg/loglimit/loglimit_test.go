package loglimit

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestLimiter(t *testing.T) {
	var buf bytes.Buffer
	l := New(slog.NewTextHandler(&buf, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey || a.Key == "since" {
			return slog.Attr{}
		}
		return a
	}}), 3, time.Second)
	now := time.Unix(1000, 0)
	l.now = func() time.Time { return now }
	a := l.Logger().With("mailbox", "outbox")
	b := l.Logger()
	for i := range 10 {
		a.Warn("discarding", "i", i)
	}
	b.Warn("other view, same bucket")
	if got := strings.Count(buf.String(), "\n"); got != 3 {
		t.Fatalf("a burst of 3 passed %d lines:\n%s", got, buf.String())
	}
	if n := l.Suppressed(); n != 8 {
		t.Errorf("suppressed %d, want 8", n)
	}
	buf.Reset()
	now = now.Add(1500 * time.Millisecond) // one token back
	a.Warn("discarding", "i", 10)
	a.Warn("discarding", "i", 11)
	want := "level=WARN msg=\"log lines caused by the sandbox suppressed\" suppressed=8\n" +
		"level=WARN msg=discarding mailbox=outbox i=10\n"
	if buf.String() != want {
		t.Errorf("after refill:\n%s\nwant:\n%s", buf.String(), want)
	}
	buf.Reset()
	if err := l.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if want := "level=WARN msg=\"log lines caused by the sandbox suppressed\" suppressed=1\n"; buf.String() != want {
		t.Errorf("flush wrote %q, want %q", buf.String(), want)
	}
	buf.Reset()
	l.Flush(context.Background())
	if buf.Len() != 0 {
		t.Errorf("a second flush wrote %q", buf.String())
	}
}

// TestBounded: however many lines arrive, what passes in a span is at
// most the burst plus one per interval, plus one summary per passed line.
func TestBounded(t *testing.T) {
	var buf bytes.Buffer
	l := New(slog.NewTextHandler(&buf, nil), 0, 0)
	now := time.Unix(0, 0)
	l.now = func() time.Time { return now }
	log := l.Logger()
	for i := range 100000 {
		now = now.Add(time.Millisecond) // 100 s in all
		log.Warn("x", "i", i)
	}
	lines := strings.Count(buf.String(), "\n")
	if max := 2 * (DefaultBurst + 100/2 + 1); lines > max {
		t.Errorf("%d lines passed in 100 s, more than %d", lines, max)
	}
}
