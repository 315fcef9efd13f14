package netpolicy

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

// PolicySchemaIDV2 is the schema ID of a policy that also admits egress by
// host name. A v2 policy is the v1 record followed by its name rules and
// the upstream resolver the pinning resolver forwards allowed names to.
const PolicySchemaIDV2 = "lazaret-derived-network-policy-v2"

// Errors of host names and name rules.
var (
	ErrHostPattern  = errors.New("not a host pattern: a strict DNS name, optionally preceded by \"*.\" and at least two labels")
	ErrHostName     = errors.New("not a strict DNS name: lowercase LDH labels of 1 to 63 characters, at least two labels, at most 253 characters, no trailing dot, a last label not all digits")
	ErrNoNameAllow  = errors.New("a v2 policy needs at least one allowed host name")
	ErrNameUpstream = errors.New("the upstream resolver must be an IPv4 address outside the always-dropped ranges")
	ErrNamesInV1    = errors.New("a v1 policy has no name rules and no upstream resolver")
)

// NameRule allows or denies the host names a pattern matches.
type NameRule struct {
	Pattern string
	Action  PolicyAction
}

func (r NameRule) String() string { return fmt.Sprintf("%v host %s", r.Action, r.Pattern) }

// CheckHostName reports why name is not a strict DNS name, or nil. Strict:
// lowercase ASCII letters, digits and '-'; at least two labels of 1 to 63
// characters that neither begin nor end with '-'; at most 253 characters;
// no trailing dot; a last label that is not all digits.
func CheckHostName(name string) error {
	if len(name) == 0 || len(name) > 253 {
		return ErrHostName
	}
	labels := 0
	for label := range strings.SplitSeq(name, ".") {
		labels++
		if len(label) == 0 || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return ErrHostName
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return ErrHostName
			}
		}
	}
	last := name[strings.LastIndexByte(name, '.')+1:]
	if labels < 2 || strings.Trim(last, "0123456789") == "" {
		return ErrHostName
	}
	return nil
}

// CheckHostPattern reports why p is not a host pattern, or nil. A pattern
// is a strict DNS name, which matches itself only, or "*." followed by a
// strict DNS name, which matches every name with one or more labels before
// that name and not the name itself. The base of a wildcard has at least
// two labels, so "*.com" is refused.
func CheckHostPattern(p string) error {
	if base, ok := strings.CutPrefix(p, "*."); ok {
		if CheckHostName(base) != nil {
			return ErrHostPattern
		}
		return nil
	}
	if CheckHostName(p) != nil {
		return ErrHostPattern
	}
	return nil
}

// MatchHost reports whether the host pattern matches name. Both are
// compared bytewise; callers lowercase names first. An invalid pattern or
// name matches nothing.
func MatchHost(pattern, name string) bool {
	if CheckHostPattern(pattern) != nil || CheckHostName(name) != nil {
		return false
	}
	if base, ok := strings.CutPrefix(pattern, "*."); ok {
		return strings.HasSuffix(name, "."+base)
	}
	return name == pattern
}

// NameDecision is the outcome for one host name.
type NameDecision struct {
	Allowed bool
	// Rule is the rule that decided; the zero rule when none matches.
	Rule NameRule
}

// String explains the decision in one line.
func (d NameDecision) String() string {
	switch {
	case d.Rule.Pattern == "":
		return "refused: no allow_hosts pattern matches"
	case d.Allowed:
		return "allowed by host pattern " + d.Rule.Pattern
	}
	return "refused by deny_hosts pattern " + d.Rule.Pattern
}

// DecideName decides a host name against the policy's name rules; see
// DecideHost.
func (p *DerivedNetworkPolicy) DecideName(name string) NameDecision {
	return DecideHost(p.NameRules, name)
}

// DecideHost decides a host name against name rules: a matching deny rule
// wins over any allow rule; otherwise a matching allow rule admits the
// name; otherwise it is refused. The rule reported is the most specific
// that matched on the deciding side: an exact name before a wildcard, a
// longer wildcard base before a shorter one. A name that is not a strict
// DNS name, and a rule that is not a host pattern, match nothing. Safe for
// any string.
func DecideHost(rules []NameRule, name string) NameDecision {
	var deny, allow NameRule
	for _, r := range rules {
		if !MatchHost(r.Pattern, name) {
			continue
		}
		best := &allow
		if r.Action == Deny {
			best = &deny
		}
		if best.Pattern == "" || moreSpecific(r.Pattern, best.Pattern) {
			*best = r
		}
	}
	switch {
	case deny.Pattern != "":
		return NameDecision{Rule: deny}
	case allow.Pattern != "":
		return NameDecision{Allowed: true, Rule: allow}
	}
	return NameDecision{}
}

// moreSpecific reports whether pattern a is more specific than b: an exact
// name beats a wildcard, and a longer wildcard base beats a shorter one.
func moreSpecific(a, b string) bool {
	aw, bw := strings.HasPrefix(a, "*."), strings.HasPrefix(b, "*.")
	if aw != bw {
		return !aw
	}
	return len(a) > len(b)
}

// HasNames reports whether the policy admits egress by host name.
func (p *DerivedNetworkPolicy) HasNames() bool { return p.SchemaID == PolicySchemaIDV2 }

// validateNames checks the v2 fields of p, or that a v1 policy has none.
func (p *DerivedNetworkPolicy) validateNames() error {
	if p.SchemaID == PolicySchemaID {
		if len(p.NameRules) > 0 || p.NameUpstream.IsValid() {
			return fieldErr("name_rules", nil, ErrNamesInV1)
		}
		return nil
	}
	allows := 0
	for i, r := range p.NameRules {
		if r.Action >= numActions {
			return fieldErr(at("name_rules", i), nil, ErrUnknownValue)
		}
		if err := CheckHostPattern(r.Pattern); err != nil {
			return fieldErr(at("name_rules", i), r.Pattern, err)
		}
		if i > 0 {
			prev := p.NameRules[i-1]
			switch c := strings.Compare(prev.Pattern, r.Pattern); {
			case c == 0 && prev.Action == r.Action:
				return fieldErr(at("name_rules", i), r, ErrDuplicate)
			case c == 0:
				return fieldErr(at("name_rules", i), r, ErrConflict)
			case c > 0:
				return fieldErr(at("name_rules", i), r, ErrUnsorted)
			}
		}
		if r.Action == Allow {
			allows++
		}
	}
	if allows == 0 {
		return fieldErr("name_rules", nil, ErrNoNameAllow)
	}
	u := p.NameUpstream
	if !u.Is4() {
		return fieldErr("name_upstream", u, ErrNameUpstream)
	}
	if s, ok := structuralPrefix(u); ok {
		return fieldErr("name_upstream", u, fmt.Errorf("%w (%v, %s)", ErrNameUpstream, s.Prefix, s.Name))
	}
	return nil
}

// DeriveV2 builds a policy that admits egress by host name: the v1 policy
// of allow, deny and resolvers (which may be empty here: the sandbox's DNS
// goes to the pinning resolver), plus one Allow rule per allowHosts pattern
// and one Deny rule per denyHosts pattern, and the upstream resolver.
// allowHosts must not be empty; the same pattern in both lists, or twice
// in one, is refused. The inputs may be in any order and are not modified.
func DeriveV2(allow, deny []netip.Prefix, resolvers []netip.Addr, allowHosts, denyHosts []string, upstream netip.Addr) (*DerivedNetworkPolicy, error) {
	p, err := derive(allow, deny, resolvers, true)
	if err != nil {
		return nil, err
	}
	type entry struct {
		rule  NameRule
		index int
	}
	var entries []entry
	for _, l := range []struct {
		name     string
		patterns []string
		action   PolicyAction
	}{{"allow_hosts", allowHosts, Allow}, {"deny_hosts", denyHosts, Deny}} {
		for i, pat := range l.patterns {
			if err := CheckHostPattern(pat); err != nil {
				return nil, fmt.Errorf("deriving network policy: %w", fieldErr(at(l.name, i), pat, err))
			}
			entries = append(entries, entry{NameRule{Pattern: pat, Action: l.action}, i})
		}
	}
	slices.SortFunc(entries, func(a, b entry) int {
		if c := strings.Compare(a.rule.Pattern, b.rule.Pattern); c != 0 {
			return c
		}
		if c := int(a.rule.Action) - int(b.rule.Action); c != 0 {
			return c
		}
		return a.index - b.index
	})
	name := func(e entry) string {
		if e.rule.Action == Allow {
			return at("allow_hosts", e.index)
		}
		return at("deny_hosts", e.index)
	}
	for i, e := range entries {
		if i > 0 && entries[i-1].rule.Pattern == e.rule.Pattern {
			err := ErrDuplicate
			if entries[i-1].rule.Action != e.rule.Action {
				err = ErrConflict
			}
			return nil, fmt.Errorf("deriving network policy: %w", fieldErr(name(entries[i-1])+" and "+name(e), e.rule.Pattern, err))
		}
		p.NameRules = append(p.NameRules, e.rule)
	}
	if upstream.IsValid() && !upstream.Is4() {
		return nil, fmt.Errorf("deriving network policy: %w", fieldErr("name_upstream", upstream, ErrNotIPv4))
	}
	p.SchemaID = PolicySchemaIDV2
	p.NameUpstream = upstream
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("deriving network policy: %w", err)
	}
	return p, nil
}

// AdmitLearned decides whether an address the pinning resolver learned
// from an allowed name may be pinned: it must be a valid IPv4 address
// outside the structural ranges and the host's addresses, and no deny
// prefix may be its longest match. An address no prefix matches is
// admitted (that is what pinning is for); so is one an allow prefix
// already admits. The decision returned explains a refusal.
func (d *Decider) AdmitLearned(addr netip.Addr) (Decision, bool) {
	dec := d.Decide(addr, 0, ProtocolTCP)
	switch dec.Reason {
	case ReasonDefaultAction:
		return dec, true
	case ReasonPrefixRule:
		return dec, dec.Allowed
	}
	return dec, false
}
