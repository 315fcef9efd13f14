package config

import (
	"slices"
	"strings"
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
// (uppercase, a trailing dot, any other byte), matches nothing.
func MatchHost(pattern, name string) bool {
	if checkHostPattern(pattern) != "" || checkDNSName(name) != "" {
		return false
	}
	return matchHost(pattern, name)
}

// matchHost is MatchHost for a valid pattern and name.
func matchHost(pattern, name string) bool {
	base, wild := strings.CutPrefix(pattern, wildcardPrefix)
	if !wild {
		return name == pattern
	}
	// A suffix "."+base with at least one byte before it: the name has one
	// or more labels in front of the base.
	return len(name) > len(base)+1 && strings.HasSuffix(name, base) && name[len(name)-len(base)-1] == '.'
}

// moreSpecific reports whether pattern a is more specific than b: an exact
// name beats a wildcard, and a longer wildcard base beats a shorter one.
func moreSpecific(a, b string) bool {
	aw, bw := strings.HasPrefix(a, wildcardPrefix), strings.HasPrefix(b, wildcardPrefix)
	if aw != bw {
		return !aw
	}
	return len(a) > len(b)
}

// bestMatch returns the most specific valid pattern in list matching name.
func bestMatch(list []string, name string) (string, bool) {
	best, found := "", false
	for _, p := range list {
		if checkHostPattern(p) != "" || !matchHost(p, name) {
			continue
		}
		if !found || moreSpecific(p, best) {
			best, found = p, true
		}
	}
	return best, found
}

// DecideHost applies host-name policy to a query name, which the caller has
// already lowercased: deny beats allow, so a name matched by any deny
// pattern is refused even when a narrower allow pattern matches it too. It
// returns whether the name is allowed and the deciding pattern (the most
// specific matching deny pattern, else the most specific matching allow
// pattern), or "" when no pattern matches, which refuses. A name that is
// not a strict DNS name is refused with rule "". Invalid patterns in the
// lists match nothing. DecideHost never panics, whatever the bytes.
func DecideHost(allow, deny []string, name string) (allowed bool, rule string) {
	if checkDNSName(name) != "" {
		return false, ""
	}
	if p, ok := bestMatch(deny, name); ok {
		return false, p
	}
	if p, ok := bestMatch(allow, name); ok {
		return true, p
	}
	return false, ""
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
