package model

import (
	"errors"
	"fmt"
	"slices"
)

// ErrAssume is wrapped by every error that rejects a Fixture: a constant
// outside the set its ASSUME clause (Lazaret.tla lines 28-68) requires.
var ErrAssume = errors.New("fixture violates the model's ASSUME")

// Fixture holds the values of the model's CONSTANTS other than the finite
// sets whose sizes are fixed by NumDomains, NumSessions, NumRequests and
// NumCommands. Each field is named after its constant and indexed by the
// constant's domain; identities, session anchors and fingerprints are the
// strings the model uses.
type Fixture struct {
	Identities     []string // Identities
	SessionAnchors []string // SessionAnchors

	SessionDomain             [NumSessions]Domain
	SessionFingerprint        [NumSessions]string
	DomainFingerprint         [NumDomains]string
	DomainCoordinatorIdentity [NumDomains]string
	DomainSidecarIdentity     [NumDomains]string
	DomainSandboxIdentity     [NumDomains]string
	SessionCliIdentity        [NumSessions]string
	SessionAnchorIdentity     [NumSessions]string

	CoordinatorCertificateValid [NumDomains]bool
	SidecarCertificateValid     [NumDomains]bool
	SandboxCertificateValid     [NumDomains]bool
	CliCertificateValid         [NumSessions]bool
	ConfigSafe                  [NumDomains]bool
	SandboxIsolationSafe        [NumDomains]bool

	RequestSession         [NumRequests]Session
	RequestCommand         [NumRequests]Command
	RequestSandboxIdentity [NumRequests]string
	RequestCliIdentity     [NumRequests]string
	RequestSessionAnchor   [NumRequests]string
	RequestCredentialValid [NumRequests]bool
	RequestSignatureValid  [NumRequests]bool
	ApprovalCliIdentity    [NumRequests]string
	ApprovalSessionAnchor  [NumRequests]string
	ApprovalSignatureValid [NumRequests]bool
	ApprovalCommand        [NumRequests]Command
	AutoRuleMatches        [NumRequests]bool

	CommandRequiresShell [NumCommands]bool
	CommandContentSafe   [NumCommands]bool
}

// CfgFixture returns the fixture Lazaret.cfg binds: the *Fixture operators
// of Lazaret.tla, lines 119-198, value for value.
func CfgFixture() Fixture {
	return Fixture{
		// IdentitiesFixture, SessionAnchorsFixture (lines 127-131).
		Identities: []string{
			"coordinator-1", "sidecar-1", "sandbox-1", "sandbox-other", "cli-1", "cli-2",
		},
		SessionAnchors: []string{"anchor-1", "anchor-2"},

		// Lines 133-147.
		SessionDomain:             [NumSessions]Domain{S1: D1, S2: D1},
		SessionFingerprint:        [NumSessions]string{S1: "config-a", S2: "config-a"},
		DomainFingerprint:         [NumDomains]string{D1: "config-a"},
		DomainCoordinatorIdentity: [NumDomains]string{D1: "coordinator-1"},
		DomainSidecarIdentity:     [NumDomains]string{D1: "sidecar-1"},
		DomainSandboxIdentity:     [NumDomains]string{D1: "sandbox-1"},
		SessionCliIdentity:        [NumSessions]string{S1: "cli-1", S2: "cli-2"},
		SessionAnchorIdentity:     [NumSessions]string{S1: "anchor-1", S2: "anchor-2"},

		// Lines 149-159.
		CoordinatorCertificateValid: [NumDomains]bool{D1: true},
		SidecarCertificateValid:     [NumDomains]bool{D1: true},
		SandboxCertificateValid:     [NumDomains]bool{D1: true},
		CliCertificateValid:         [NumSessions]bool{S1: true, S2: true},
		ConfigSafe:                  [NumDomains]bool{D1: true},
		SandboxIsolationSafe:        [NumDomains]bool{D1: true},

		// Lines 161-190.
		RequestSession: [NumRequests]Session{R1: S1, R2: S2, R3: S1},
		RequestCommand: [NumRequests]Command{R1: ExactCmd, R2: PromptCmd, R3: ShellCmd},
		RequestSandboxIdentity: [NumRequests]string{
			R1: "sandbox-1", R2: "sandbox-1", R3: "sandbox-other",
		},
		RequestCliIdentity:     [NumRequests]string{R1: "cli-1", R2: "cli-2", R3: "cli-1"},
		RequestSessionAnchor:   [NumRequests]string{R1: "anchor-1", R2: "anchor-2", R3: "anchor-1"},
		RequestCredentialValid: [NumRequests]bool{R1: true, R2: true, R3: true},
		RequestSignatureValid:  [NumRequests]bool{R1: true, R2: true, R3: true},
		ApprovalCliIdentity:    [NumRequests]string{R1: "cli-1", R2: "cli-2", R3: "cli-1"},
		ApprovalSessionAnchor:  [NumRequests]string{R1: "anchor-1", R2: "anchor-2", R3: "anchor-1"},
		ApprovalSignatureValid: [NumRequests]bool{R1: true, R2: true, R3: true},
		ApprovalCommand:        [NumRequests]Command{R1: ExactCmd, R2: EditedCmd, R3: ShellCmd},
		AutoRuleMatches:        [NumRequests]bool{R1: true, R2: false, R3: true},

		// Lines 192-198.
		CommandRequiresShell: [NumCommands]bool{
			ExactCmd: false, PromptCmd: false, ShellCmd: true, EditedCmd: false,
		},
		CommandContentSafe: [NumCommands]bool{
			ExactCmd: true, PromptCmd: true, ShellCmd: true, EditedCmd: true,
		},
	}
}

// Validate checks the ASSUME clause (lines 28-68) for the constants a
// Fixture carries. The finiteness, non-emptiness and sentinel clauses hold
// by construction of the Go types. Every error wraps ErrAssume and names
// the constant, the argument and the set the value must belong to.
func (f *Fixture) Validate() error {
	var errs []error
	bad := func(constant, arg string, value any, set string) {
		errs = append(errs, fmt.Errorf("constant %s[%s] = %v is not in %s: %w",
			constant, arg, value, set, ErrAssume))
	}
	inSet := func(set []string, v string) bool { return slices.Contains(set, v) }
	for s := range Session(NumSessions) {
		if f.SessionDomain[s] >= NumDomains {
			bad("SessionDomain", s.String(), f.SessionDomain[s], "Domains")
		}
		if !inSet(f.Identities, f.SessionCliIdentity[s]) {
			bad("SessionCliIdentity", s.String(), fmt.Sprintf("%q", f.SessionCliIdentity[s]), "Identities")
		}
		if !inSet(f.SessionAnchors, f.SessionAnchorIdentity[s]) {
			bad("SessionAnchorIdentity", s.String(), fmt.Sprintf("%q", f.SessionAnchorIdentity[s]), "SessionAnchors")
		}
	}
	for d := range Domain(NumDomains) {
		for _, c := range []struct {
			name string
			v    string
		}{
			{"DomainCoordinatorIdentity", f.DomainCoordinatorIdentity[d]},
			{"DomainSidecarIdentity", f.DomainSidecarIdentity[d]},
			{"DomainSandboxIdentity", f.DomainSandboxIdentity[d]},
		} {
			if !inSet(f.Identities, c.v) {
				bad(c.name, d.String(), fmt.Sprintf("%q", c.v), "Identities")
			}
		}
	}
	for r := range Request(NumRequests) {
		if f.RequestSession[r] >= NumSessions {
			bad("RequestSession", r.String(), f.RequestSession[r], "Sessions")
		}
		if f.RequestCommand[r] >= NumCommands {
			bad("RequestCommand", r.String(), f.RequestCommand[r], "Commands")
		}
		if f.ApprovalCommand[r] >= NumCommands {
			bad("ApprovalCommand", r.String(), f.ApprovalCommand[r], "Commands")
		}
		for _, c := range []struct {
			name, v, set string
			in           []string
		}{
			{"RequestSandboxIdentity", f.RequestSandboxIdentity[r], "Identities", f.Identities},
			{"RequestCliIdentity", f.RequestCliIdentity[r], "Identities", f.Identities},
			{"RequestSessionAnchor", f.RequestSessionAnchor[r], "SessionAnchors", f.SessionAnchors},
			{"ApprovalCliIdentity", f.ApprovalCliIdentity[r], "Identities", f.Identities},
			{"ApprovalSessionAnchor", f.ApprovalSessionAnchor[r], "SessionAnchors", f.SessionAnchors},
		} {
			if !inSet(c.in, c.v) {
				bad(c.name, r.String(), fmt.Sprintf("%q", c.v), c.set)
			}
		}
	}
	return errors.Join(errs...)
}
