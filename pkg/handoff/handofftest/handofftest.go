// Package handofftest checks a hand-off's golden command line: the
// parent renders exactly the pinned argv, and the child parses it back to
// the value it was rendered from. For the tests of the packages that
// define hand-offs; nothing else imports it.
package handofftest

import (
	"reflect"
	"testing"
)

// RoundTrip checks that render gives want, and that parse turns want
// back into v. parse receives the whole rendered argv; a hand-off whose
// first word is its subcommand strips it there.
func RoundTrip[T any](t testing.TB, v T, render func() ([]string, error), want []string, parse func([]string) (T, error)) {
	t.Helper()
	got, err := render()
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("rendered argv = %q, %v\nwant %q", got, err, want)
	}
	back, err := parse(got)
	if err != nil || !reflect.DeepEqual(back, v) {
		t.Fatalf("parsed back = %+v, %v\nwant %+v", back, err, v)
	}
}
