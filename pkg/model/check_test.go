package model

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// The size of Lazaret.cfg's reachable state space as measured by this
// checker (TLC's "distinct states found"). TLC itself cannot be run where
// these tests run, so the figure is not cross-checked against TLC here; if
// the spec changes, re-measure with `go test -run TestCheckFixture -v` and
// update these, and cross-check with TLC as tla/CHECKER.md describes.
const (
	fixtureStates = 58452
	fixtureDepth  = 46 // TLC reports 47: it counts the initial state as depth 1
)

func TestCheckFixture(t *testing.T) {
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	res, err := Check(Config{})
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	if err != nil {
		var v *Violation
		if errors.As(err, &v) {
			t.Fatalf("Check: %v\n%s", err, v.Format())
		}
		t.Fatalf("Check: %v", err)
	}
	t.Logf("Lazaret.cfg: %d distinct states, %d generated, depth %d, %v, %d MiB allocated",
		res.States, res.Generated, res.Depth, res.Elapsed, (after.TotalAlloc-before.TotalAlloc)>>20)
	if !res.Complete {
		t.Errorf("Complete = false for an unbounded check")
	}
	if res.States != fixtureStates {
		t.Errorf("distinct states = %d, want %d", res.States, fixtureStates)
	}
	if res.Depth != fixtureDepth {
		t.Errorf("depth = %d, want %d", res.Depth, fixtureDepth)
	}
}

func TestCheckBounded(t *testing.T) {
	tests := []struct {
		maxDepth     int
		wantComplete bool
	}{
		{1, false},
		{10, false},
		{fixtureDepth - 1, false},
		{fixtureDepth, true},
		{fixtureDepth + 5, true},
	}
	prev := 0
	for _, tc := range tests {
		t.Run(fmt.Sprintf("MaxDepth=%d", tc.maxDepth), func(t *testing.T) {
			res, err := Check(Config{MaxDepth: tc.maxDepth})
			if err != nil {
				t.Fatalf("Check(MaxDepth %d): %v", tc.maxDepth, err)
			}
			t.Logf("MaxDepth %d: %d states, depth %d", tc.maxDepth, res.States, res.Depth)
			if res.Complete != tc.wantComplete {
				t.Errorf("Complete = %v, want %v", res.Complete, tc.wantComplete)
			}
			if want := min(tc.maxDepth, fixtureDepth); res.Depth != want {
				t.Errorf("Depth = %d, want %d", res.Depth, want)
			}
			if res.States < prev || res.States > fixtureStates {
				t.Errorf("States = %d, want between %d and %d", res.States, prev, fixtureStates)
			}
			if tc.wantComplete && res.States != fixtureStates {
				t.Errorf("States = %d, want all %d", res.States, fixtureStates)
			}
			prev = res.States
		})
	}
}

func TestCheckConfigErrors(t *testing.T) {
	badFixture := CfgFixture()
	badFixture.RequestCliIdentity[R2] = "cli-9"
	tests := []struct {
		name string
		cfg  Config
		want []error
	}{
		{"negative depth", Config{MaxDepth: -1}, []error{ErrConfig}},
		{"unknown override", Config{Overrides: map[string]ActionFunc{
			"StartNewDomian": func(m *Model, st State, a Args) (State, bool) { return st, false },
		}}, []error{ErrConfig}},
		{"nil override", Config{Overrides: map[string]ActionFunc{"StartNewDomain": nil}}, []error{ErrConfig}},
		{"fixture outside ASSUME", Config{Fixture: &badFixture}, []error{ErrConfig, ErrAssume}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Check(tc.cfg)
			if err == nil {
				t.Fatal("Check succeeded")
			}
			for _, want := range tc.want {
				if !errors.Is(err, want) {
					t.Errorf("error %q does not wrap %q", err, want)
				}
			}
			var v *Violation
			if errors.As(err, &v) {
				t.Errorf("configuration error reported as a violation: %v", err)
			}
		})
	}
}

func TestCfgFixtureSatisfiesAssume(t *testing.T) {
	f := CfgFixture()
	if err := f.Validate(); err != nil {
		t.Fatalf("CfgFixture: %v", err)
	}
	if got := Lazaret.Fixture(); got.Validate() != nil || got.RequestCommand != f.RequestCommand {
		t.Fatalf("Lazaret is not bound to CfgFixture")
	}
}

func TestFixtureValidateNamesConstant(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Fixture)
		want   string
	}{
		{"session domain", func(f *Fixture) { f.SessionDomain[S2] = 3 },
			"constant SessionDomain[S2] = <invalid Domain 3> is not in Domains"},
		{"request session", func(f *Fixture) { f.RequestSession[R1] = NoSession },
			"constant RequestSession[R1] = NoSession is not in Sessions"},
		{"request command", func(f *Fixture) { f.RequestCommand[R3] = NoCommand },
			"constant RequestCommand[R3] = NoCommand is not in Commands"},
		{"sandbox identity", func(f *Fixture) { f.DomainSandboxIdentity[D1] = "sandbox-9" },
			`constant DomainSandboxIdentity[D1] = "sandbox-9" is not in Identities`},
		{"approval anchor", func(f *Fixture) { f.ApprovalSessionAnchor[R2] = "anchor-3" },
			`constant ApprovalSessionAnchor[R2] = "anchor-3" is not in SessionAnchors`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := CfgFixture()
			tc.mutate(&f)
			err := f.Validate()
			if !errors.Is(err, ErrAssume) {
				t.Fatalf("Validate = %v, want an error wrapping ErrAssume", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Validate = %q, want it to contain %q", err, tc.want)
			}
			if _, err := New(f); !errors.Is(err, ErrAssume) {
				t.Errorf("New = %v, want an error wrapping ErrAssume", err)
			}
		})
	}
}

func BenchmarkCheckFixture(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		res, err := Check(Config{})
		if err != nil || res.States != fixtureStates {
			b.Fatalf("Check = %d states, %v", res.States, err)
		}
	}
	b.ReportMetric(float64(fixtureStates), "states")
}

func BenchmarkCheckDepth20(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Check(Config{MaxDepth: 20}); err != nil {
			b.Fatalf("Check: %v", err)
		}
	}
}
