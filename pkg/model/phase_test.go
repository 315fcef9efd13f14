package model

import (
	"testing"

	"lazaret.dev/pkg/phase"
)

// Every DomainPhase maps to one phase.Domain of the same name and back,
// and every phase.Domain is a DomainPhase.
func TestDomainPhaseConversion(t *testing.T) {
	seen := map[phase.Domain]bool{}
	for p := DomainPhase(0); p < numDomainPhases; p++ {
		d := p.Phase()
		if !d.Valid() || seen[d] || d.String() != p.String() {
			t.Fatalf("DomainPhase %d (%v) maps to %v (valid %v, seen %v)", uint8(p), p, d, d.Valid(), seen[d])
		}
		seen[d] = true
		if back, ok := DomainPhaseOf(d); !ok || back != p {
			t.Fatalf("DomainPhaseOf(%v) = %v, %v; want %v", d, back, ok, p)
		}
	}
	for _, d := range phase.Domains() {
		if !seen[d] {
			t.Errorf("phase %v is no DomainPhase", d)
		}
	}
	if d := numDomainPhases.Phase(); d.Valid() {
		t.Errorf("DomainPhase %d maps to the valid phase %v", uint8(numDomainPhases), d)
	}
	if _, ok := DomainPhaseOf(0); ok {
		t.Error("DomainPhaseOf accepts the invalid zero phase")
	}
	if got := numDomainPhases.String(); got != "<invalid DomainPhase 6>" {
		t.Errorf("String of an invalid DomainPhase = %q", got)
	}
}

// Every SessionPhase maps to one phase.Session of the same name and back,
// and every phase.Session is a SessionPhase.
func TestSessionPhaseConversion(t *testing.T) {
	seen := map[phase.Session]bool{}
	for p := SessionPhase(0); p < numSessionPhases; p++ {
		s := p.Phase()
		if !s.Valid() || seen[s] || s.String() != p.String() {
			t.Fatalf("SessionPhase %d (%v) maps to %v (valid %v, seen %v)", uint8(p), p, s, s.Valid(), seen[s])
		}
		seen[s] = true
		if back, ok := SessionPhaseOf(s); !ok || back != p {
			t.Fatalf("SessionPhaseOf(%v) = %v, %v; want %v", s, back, ok, p)
		}
	}
	for _, s := range phase.Sessions() {
		if !seen[s] {
			t.Errorf("phase %v is no SessionPhase", s)
		}
	}
	if s := numSessionPhases.Phase(); s.Valid() {
		t.Errorf("SessionPhase %d maps to the valid phase %v", uint8(numSessionPhases), s)
	}
	if _, ok := SessionPhaseOf(phase.NumSession + 1); ok {
		t.Error("SessionPhaseOf accepts an invalid phase")
	}
	if got := numSessionPhases.String(); got != "<invalid SessionPhase 8>" {
		t.Errorf("String of an invalid SessionPhase = %q", got)
	}
}

// The model's names are the TLA+ strings: a rename in package phase shows
// here as well as in the Domain Store.
func TestPhaseNames(t *testing.T) {
	for p, want := range map[DomainPhase]string{DomainAbsent: "Absent", DomainStarting: "Starting", DomainReady: "Ready",
		DomainStopping: "Stopping", DomainFailed: "Failed", DomainRecovering: "Recovering"} {
		if p.String() != want {
			t.Errorf("DomainPhase %d = %q, want %q", uint8(p), p, want)
		}
	}
	for p, want := range map[SessionPhase]string{SessionNew: "New", SessionWaiting: "Waiting", SessionRegistering: "Registering",
		SessionAttached: "Attached", SessionPrompting: "Prompting", SessionHostExecuting: "HostExecuting",
		SessionClosed: "Closed", SessionFailed: "Failed"} {
		if p.String() != want {
			t.Errorf("SessionPhase %d = %q, want %q", uint8(p), p, want)
		}
	}
}
