package escalation

import (
	"errors"
	"fmt"
	"path"
	"strings"
	"unicode/utf8"

	"lazaret.dev/pkg/config"
)

// shellMetacharacters are the bytes that give a command string meaning to a
// POSIX shell: separators, pipes, redirections, expansions, quoting,
// grouping, globbing, comments, and whitespace that would split words.
const shellMetacharacters = " \t\n\r\v\f;&|<>()$`\\\"'*?[]{}~#!="

// CommandRequiresShell reports whether argv is not a direct vector of the
// structured v1 request language, so that running it as meant would need a
// shell (or a PATH lookup, which is a shell's job too). Such a command is
// never auto-approved. It is true exactly when:
//
//  1. argv is empty; or
//  2. an element is not valid UTF-8 or contains NUL; or
//  3. argv[0] is not an absolute path (it would need a PATH lookup); or
//  4. argv[0] is not in canonical lexical form: path.Clean changes it
//     (repeated or trailing slashes, "." or ".." components); or
//  5. argv[0] contains a shell metacharacter or whitespace, that is, it
//     reads as a command string ("/usr/bin/git push") rather than a path.
//
// Arguments after argv[0] may contain any characters: they are passed to
// the program as they are, and no shell ever sees them. A vector such as
// /bin/sh, -c, "cmd" is a direct vector by this definition; whether it is
// admitted is the rules' business (see Decide).
func CommandRequiresShell(argv []string) bool {
	if len(argv) == 0 {
		return true
	}
	for _, a := range argv {
		if !utf8.ValidString(a) || strings.IndexByte(a, 0) >= 0 {
			return true
		}
	}
	exe := argv[0]
	if !strings.HasPrefix(exe, "/") || path.Clean(exe) != exe || exe == "/" {
		return true
	}
	return strings.ContainsAny(exe, shellMetacharacters)
}

// Decision is the approval plan for one request.
type Decision struct {
	// Auto is true when a rule admits the command without a prompt.
	Auto bool
	// Rule is the index of the admitting rule in the configured order, or
	// -1.
	Rule int
	// Why says why the command needs a prompt (nil when Auto): it is or
	// wraps ErrShellForm or ErrNoRule, or it is a *RuleRefusalError.
	Why error
}

// Decide plans the approval of argv under rules: auto-approval by the
// first rule that admits argv (config.AutoApprovalRule.Matches: argv[0]
// byte-equal to the canonical executable, arguments equal to the rule's,
// or beginning with them when the rule allows extra arguments; and
// config.AutoApprovalRule.CheckExtraArgs: no extra argument the
// executable could turn into a command or a file write), and otherwise a
// prompt. A command for which CommandRequiresShell holds is never
// auto-approved. When the only matching rules refuse the extra
// arguments, Why is the first refusal, a *RuleRefusalError.
func Decide(argv []string, rules []config.AutoApprovalRule) Decision {
	if CommandRequiresShell(argv) {
		return Decision{Rule: -1, Why: ErrShellForm}
	}
	if i, refusal := ruleAdmitting(argv, rules); i >= 0 {
		return Decision{Auto: true, Rule: i}
	} else if refusal != nil {
		return Decision{Rule: -1, Why: refusal}
	}
	return Decision{Rule: -1, Why: ErrNoRule}
}

// RuleRefusalError: rule Rule matches a command's prefix but does not
// auto-approve its extra arguments. Its text names the rule, as in
// `rule 1 (/usr/bin/git fetch) does not auto-approve option
// "--upload-pack=..."`; rules count from 0, as auto_approve[i] and
// Decision.Rule do. It wraps the *config.ExtraArgsError (and so
// config.ErrExtraArgs), and also ErrInterpreterPrefix when the executable
// takes no extra arguments at all (config.ExtraArgsNone).
type RuleRefusalError struct {
	Rule int
	Err  *config.ExtraArgsError
}

func (e *RuleRefusalError) Error() string {
	return fmt.Sprintf("rule %d (%s) %s", e.Rule, e.Err.RuleString(), e.Err.Refusal())
}

func (e *RuleRefusalError) Unwrap() []error {
	if e.Err.Class == config.ExtraArgsNone {
		return []error{e.Err, ErrInterpreterPrefix}
	}
	return []error{e.Err}
}

// RuleAdmits reports whether a rule admits argv, the shell-form test
// aside: the model's AutoRuleMatches, which Decide combines with
// CommandRequiresShell. Traces record the two apart so that the checker,
// not Decide, combines them.
func RuleAdmits(argv []string, rules []config.AutoApprovalRule) bool {
	if len(argv) == 0 {
		return false
	}
	i, _ := ruleAdmitting(argv, rules)
	return i >= 0
}

// ruleAdmitting returns the index of the first rule admitting argv, or -1
// and the first refusal of a rule that matched argv's prefix (nil when
// none did).
func ruleAdmitting(argv []string, rules []config.AutoApprovalRule) (int, *RuleRefusalError) {
	var first *RuleRefusalError
	for i, r := range rules {
		if !r.Matches(argv) {
			continue
		}
		if err := r.CheckExtraArgs(argv); err != nil {
			var refused *config.ExtraArgsError
			if first == nil && errors.As(err, &refused) {
				first = &RuleRefusalError{Rule: i, Err: refused}
			}
			continue
		}
		return i, nil
	}
	return -1, first
}
