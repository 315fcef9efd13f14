package config

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Rule names the configuration rule a Problem breaks. Tests and callers
// compare Rules, never messages.
type Rule string

// The rules of the trusted host configuration v1 and v2;
// docs/CONFIGURATION.md describes each one.
const (
	RuleRead              Rule = "read"               // the file cannot be read or is not trusted
	RuleEncoding          Rule = "encoding"           // the document is not UTF-8
	RuleDecode            Rule = "decode"             // TOML syntax, duplicate key or table, wrong value type
	RuleUnknownField      Rule = "unknown-field"      // a key outside the closed schema
	RuleFieldAlias        Rule = "field-alias"        // a key matching a field only when case is ignored
	RuleRequired          Rule = "required"           // a required field is missing
	RuleSchema            Rule = "schema"             // schema is not a dispatch identifier
	RuleProfiles          Rule = "profiles"           // no profile is declared
	RuleProfileName       Rule = "profile-name"       // a profile name breaks the grammar
	RuleProfileSelection  Rule = "profile-selection"  // the selected profile is not declared or not a valid name
	RuleString            Rule = "string"             // a string is not UTF-8 or contains NUL
	RuleImage             Rule = "image"              // not an OCI image reference
	RuleHostPath          Rule = "host-path"          // host path grammar
	RuleSandboxPath       Rule = "sandbox-path"       // sandbox path grammar
	RulePersistentOverlap Rule = "persistent-overlap" // persistent dirs equal or nested
	RuleVolumeOverlap     Rule = "volume-overlap"     // volume container paths equal or nested
	RuleVolumeParent      Rule = "volume-parent"      // volume container not strictly beneath exactly one persistent dir
	RuleProtected         Rule = "protected"          // intersects a protected sandbox destination
	RuleEnum              Rule = "enum"               // unknown enumeration value
	RuleCreate            Rule = "create"             // create=true outside a {profile_dir} directory
	RuleSource            Rule = "source"             // a volume source cannot be resolved or has the wrong type
	RuleSourcePlacement   Rule = "source-placement"   // a volume source intersects the workspace or a Lazaret tree
	RuleEnvName           Rule = "env-name"           // environment name grammar or reserved prefix
	RuleEnvReference      Rule = "env-reference"      // not an env:NAME reference
	RuleEnvUnset          Rule = "env-unset"          // the referenced host variable is not set
	RulePrefix            Rule = "prefix"             // not an IPv4 prefix
	RulePrefixConflict    Rule = "prefix-conflict"    // the same prefix is allowed and denied
	RuleReadinessRequired Rule = "readiness-required" // the selected profile has no readiness table
	RuleReadinessCount    Rule = "readiness-count"    // not 1 to 32 targets (v2 hosts: 0 to 32, as allow_hosts requires)
	RuleReadinessUnique   Rule = "readiness-unique"   // a repeated target
	RuleAddress           Rule = "address"            // not an IPv4 address
	RulePort              Rule = "port"               // not 1 to 65535
	RuleDNSName           Rule = "dns-name"           // not a strict DNS name
	RuleReadinessPolicy   Rule = "readiness-policy"   // a target contradicts the effective policy
	RuleStructural        Rule = "structural"         // a target the enforcement path always drops
	RuleHostPattern       Rule = "host-pattern"       // v2: not a host pattern
	RuleHostConflict      Rule = "host-conflict"      // v2: the same host pattern is allowed and denied
	RuleResolver          Rule = "resolver"           // v2: resolver missing with allow_hosts, or set without
	RuleCredentialCount   Rule = "credential-count"   // v2: more than 8 credentials in a profile
	RuleCredentialEnv     Rule = "credential-env"     // v2: env names no key of the profile's env table, or one another credential names
	RuleCredentialHosts   Rule = "credential-hosts"   // v2: not 1 to 16 hosts, or a repeated host
	RuleCredentialPolicy  Rule = "credential-policy"  // v2: a credential host the effective host-name policy does not allow
	RuleCredentialClash   Rule = "credential-clash"   // v2: two credentials set the same header for the same host and port
	RuleCredentialHeader  Rule = "credential-header"  // v2: header missing, superfluous, not a lowercase token, or reserved
	RuleCredentialCA      Rule = "credential-ca"      // v2: upstream_ca not absolute, unreadable, untrusted, too large or without a certificate
	RuleCredentialValue   Rule = "credential-value"   // v2: the host value of a brokered variable is not 1 to 4096 printable bytes or too short for a placeholder
	RuleEscalation        Rule = "escalation"         // rules while escalation is disabled
	RuleExecutable        Rule = "executable"         // an auto-approval executable fails a check
	RuleArgs              Rule = "args"               // allow_extra_args without arguments
	RuleDuplicateRule     Rule = "duplicate-rule"     // two identical normalized rules
	RuleRoot              Rule = "root"               // storage or runtime root unusable
)

// Problem is one broken rule, located as precisely as the document allows.
type Problem struct {
	File   string // configuration file path; empty for an in-memory document
	Line   int    // 1-based; 0 when unknown
	Column int    // 1-based byte column; 0 when unknown
	Field  string // field path such as profiles.dev.volumes[1].host; empty for the document
	Rule   Rule
	// Message says what is wrong and what is expected. It never contains a
	// resolved environment value.
	Message string
}

// String renders file:line:col: field: message, leaving out unknown parts.
func (p Problem) String() string {
	var b strings.Builder
	if p.File != "" {
		b.WriteString(p.File)
		if p.Line > 0 {
			fmt.Fprintf(&b, ":%d:%d", p.Line, p.Column)
		}
		b.WriteString(": ")
	} else if p.Line > 0 {
		fmt.Fprintf(&b, "%d:%d: ", p.Line, p.Column)
	}
	if p.Field != "" {
		b.WriteString(p.Field)
		b.WriteString(": ")
	}
	b.WriteString(p.Message)
	return b.String()
}

// ErrInvalid is matched by every *InvalidError.
var ErrInvalid = errors.New("invalid trusted host configuration")

// InvalidError carries every problem found in one configuration.
type InvalidError struct {
	Problems []Problem
}

func (e *InvalidError) Error() string {
	if len(e.Problems) == 1 {
		return e.Problems[0].String()
	}
	return fmt.Sprintf("%s (and %d more problems)", e.Problems[0].String(), len(e.Problems)-1)
}

// Is makes errors.Is(err, ErrInvalid) true.
func (e *InvalidError) Is(target error) bool { return target == ErrInvalid }

// problems collects Problems with their positions.
type problems struct {
	file  string
	index *positionIndex
	list  []Problem
}

func (ps *problems) add(field fieldPath, rule Rule, format string, args ...any) {
	p := Problem{File: ps.file, Field: field.String(), Rule: rule, Message: fmt.Sprintf(format, args...)}
	if ps.index != nil {
		p.Line, p.Column = ps.index.locate(field)
	}
	ps.list = append(ps.list, p)
}

func (ps *problems) addAt(line, col int, field string, rule Rule, msg string) {
	ps.list = append(ps.list, Problem{File: ps.file, Line: line, Column: col, Field: field, Rule: rule, Message: msg})
}

func (ps *problems) empty() bool { return len(ps.list) == 0 }

// result sorts located problems by position, keeps unlocated ones in the
// order found after them, and drops exact repeats.
func (ps *problems) result() []Problem {
	out := make([]Problem, 0, len(ps.list))
	seen := make(map[Problem]bool, len(ps.list))
	for _, p := range ps.list {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if (a.Line == 0) != (b.Line == 0) {
			return a.Line != 0
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Column < b.Column
	})
	return out
}

func (ps *problems) err() error {
	if ps.empty() {
		return nil
	}
	return &InvalidError{Problems: ps.result()}
}

// fieldPath is a TOML key path with array indices, such as
// profiles.dev.volumes[1].host.
type fieldPath struct{ s string }

func root() fieldPath { return fieldPath{} }

func (f fieldPath) key(k string) fieldPath {
	q := quoteKey(k)
	if f.s == "" {
		return fieldPath{q}
	}
	return fieldPath{f.s + "." + q}
}

func (f fieldPath) index(i int) fieldPath {
	return fieldPath{f.s + "[" + strconv.Itoa(i) + "]"}
}

func (f fieldPath) String() string { return f.s }

// parent drops the last key or index.
func (f fieldPath) parent() (fieldPath, bool) {
	if f.s == "" {
		return f, false
	}
	s := f.s
	if strings.HasSuffix(s, "]") {
		return fieldPath{s[:strings.LastIndexByte(s, '[')]}, true
	}
	// Walk back over one key, honouring quotes.
	if strings.HasSuffix(s, `"`) {
		for i := len(s) - 2; i >= 0; i-- {
			if s[i] == '"' && (i == 0 || s[i-1] != '\\') {
				return fieldPath{strings.TrimSuffix(s[:i], ".")}, true
			}
		}
		return fieldPath{}, true
	}
	i := strings.LastIndexByte(s, '.')
	if i < 0 {
		return fieldPath{}, true
	}
	return fieldPath{s[:i]}, true
}

func quoteKey(k string) string {
	if k == "" {
		return `""`
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return strconv.Quote(k)
		}
	}
	return k
}
