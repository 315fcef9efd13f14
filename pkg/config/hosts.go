package config

import (
	"slices"
	"strings"

	"lazaret.dev/pkg/netpolicy"
)

// A host pattern names the host names a profile allows or denies: a strict
// DNS name, which matches itself only, or "*." followed by a strict DNS name
// of at least two labels, which matches every name with one or more labels
// before that base but not the base itself.

const wildcardPrefix = "*."

// checkHostPattern returns why s is not a host pattern, or "".
func checkHostPattern(s string) string {
	if why := checkString(s); why != "" {
		return why
	}
	base, wild := strings.CutPrefix(s, wildcardPrefix)
	if why := checkDNSName(base); why != "" {
		if wild {
			return `must be a host pattern: after "*." comes a strict DNS name of at least two labels (lowercase LDH labels, at most 253 characters, no trailing dot), as in *.example.com`
		}
		return "must be a host pattern: a strict DNS name (lowercase LDH labels of 1 to 63 characters, at least two labels, at most 253 characters, no trailing dot, a final label that is not all digits) or *. followed by one"
	}
	return ""
}

// MatchHost reports whether the host pattern matches name. An exact pattern
// matches the identical name; "*.example.com" matches "a.example.com" and
// "a.b.example.com" but not "example.com". Both must be valid: a pattern
// that is not a host pattern, or a name that is not a strict DNS name
// (uppercase, a trailing dot, any other byte), matches nothing. The
// matcher is the network policy's (netpolicy.MatchHost), so what the
// configuration accepts is what the pinning resolver enforces.
func MatchHost(pattern, name string) bool { return netpolicy.MatchHost(pattern, name) }

// DecideHost applies host-name policy to a query name, which the caller has
// already lowercased: deny beats allow, so a name matched by any deny
// pattern is refused even when a narrower allow pattern matches it too. It
// returns whether the name is allowed and the deciding pattern (the most
// specific matching deny pattern, else the most specific matching allow
// pattern), or "" when no pattern matches, which refuses. A name that is
// not a strict DNS name is refused with rule "". Invalid patterns in the
// lists match nothing. DecideHost never panics, whatever the bytes.
func DecideHost(allow, deny []string, name string) (allowed bool, rule string) {
	rules := make([]netpolicy.NameRule, 0, len(allow)+len(deny))
	for _, p := range deny {
		rules = append(rules, netpolicy.NameRule{Pattern: p, Action: netpolicy.Deny})
	}
	for _, p := range allow {
		rules = append(rules, netpolicy.NameRule{Pattern: p, Action: netpolicy.Allow})
	}
	d := netpolicy.DecideHost(rules, name)
	return d.Allowed, d.Rule.Pattern
}

// hostSet is a deduplicated set of host patterns remembering where each
// first appeared.
type hostSet map[string]fieldPath

func (s hostSet) add(p string, at fieldPath) {
	if _, ok := s[p]; !ok {
		s[p] = at
	}
}

// sorted returns the patterns in bytewise order, or nil when there are
// none.
func (s hostSet) sorted() []string {
	if len(s) == 0 {
		return nil
	}
	out := make([]string, 0, len(s))
	for p := range s {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

// HostTarget is a readiness host name and the TCP port at which the start
// proves the name resolves and connects.
type HostTarget struct {
	Name string
	Port uint16
}

func compareHostTarget(a, b HostTarget) int {
	if c := strings.Compare(a.Name, b.Name); c != 0 {
		return c
	}
	return int(a.Port) - int(b.Port)
}
