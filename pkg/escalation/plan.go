package escalation

import (
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

// interpreters are program names that run a command string or an
// arbitrary program given as an argument. A prefix rule (allow_extra_args)
// never admits them: appended arguments would be a program, not data.
var interpreters = map[string]bool{
	"sh": true, "bash": true, "dash": true, "zsh": true, "ksh": true, "mksh": true,
	"fish": true, "csh": true, "tcsh": true, "ash": true, "busybox": true,
	"env": true, "xargs": true, "nohup": true, "setsid": true, "sudo": true, "doas": true,
	"python": true, "python3": true, "perl": true, "ruby": true, "node": true,
}

// Decision is the approval plan for one request.
type Decision struct {
	// Auto is true when a rule admits the command without a prompt.
	Auto bool
	// Rule is the index of the admitting rule in the configured order, or
	// -1.
	Rule int
	// Why says why the command needs a prompt (nil when Auto): it wraps
	// ErrShellForm, ErrInterpreterPrefix or ErrNoRule.
	Why error
}

// Decide plans the approval of argv under rules: auto-approval by the
// first rule that admits argv exactly (config.AutoApprovalRule.Matches:
// argv[0] byte-equal to the canonical executable, arguments equal to the
// rule's, or beginning with them when the rule allows extra arguments),
// and otherwise a prompt. A command for which CommandRequiresShell holds
// is never auto-approved, and a rule that allows extra arguments never
// admits a command interpreter (sh, env, python, ...).
func Decide(argv []string, rules []config.AutoApprovalRule) Decision {
	if CommandRequiresShell(argv) {
		return Decision{Rule: -1, Why: ErrShellForm}
	}
	if i, prefixInterpreter := ruleAdmitting(argv, rules); i >= 0 {
		return Decision{Auto: true, Rule: i}
	} else if prefixInterpreter {
		return Decision{Rule: -1, Why: ErrInterpreterPrefix}
	}
	return Decision{Rule: -1, Why: ErrNoRule}
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
// and whether a prefix rule matched an interpreter.
func ruleAdmitting(argv []string, rules []config.AutoApprovalRule) (int, bool) {
	interpreter := interpreters[path.Base(argv[0])]
	prefixInterpreter := false
	for i, r := range rules {
		if !r.Matches(argv) {
			continue
		}
		if r.AllowExtraArgs && interpreter {
			prefixInterpreter = true
			continue
		}
		return i, false
	}
	return -1, prefixInterpreter
}
