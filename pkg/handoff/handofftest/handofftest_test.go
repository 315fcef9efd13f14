package handofftest

import (
	"errors"
	"strings"
	"testing"
)

// recorder is a testing.TB that keeps the first fatal message.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(format string, args ...any) {
	if r.failed == "" {
		r.failed = format
	}
}

func TestRoundTrip(t *testing.T) {
	render := func(s string) func() ([]string, error) {
		return func() ([]string, error) { return strings.Fields(s), nil }
	}
	join := func(a []string) (string, error) { return strings.Join(a, " "), nil }
	for _, tc := range []struct {
		name   string
		v      string
		render func() ([]string, error)
		want   []string
		parse  func([]string) (string, error)
		fails  bool
	}{
		{"round trip", "a b", render("a b"), []string{"a", "b"}, join, false},
		{"other argv", "a b", render("a c"), []string{"a", "b"}, join, true},
		{"render error", "a", func() ([]string, error) { return nil, errors.New("no") }, nil, join, true},
		{"parse differs", "a b", render("a b"), []string{"a", "b"}, func([]string) (string, error) { return "a", nil }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &recorder{TB: t}
			RoundTrip[string](r, tc.v, tc.render, tc.want, tc.parse)
			if got := r.failed != ""; got != tc.fails {
				t.Fatalf("failed = %v (%q), want %v", got, r.failed, tc.fails)
			}
		})
	}
}
