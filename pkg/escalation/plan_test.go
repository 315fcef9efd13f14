package escalation

import (
	"errors"
	"strings"
	"testing"

	"lazaret.dev/pkg/config"
)

func TestCommandRequiresShell(t *testing.T) {
	tests := []struct {
		name string
		argv []string
		want bool
	}{
		{"direct vector", []string{"/usr/bin/git", "push", "origin", "main"}, false},
		{"arguments with metacharacters stay data", []string{"/usr/bin/git", "commit", "-m", "a; rm -rf / && $(x) `y` | z > w"}, false},
		{"explicit sh -c vector is direct", []string{"/bin/sh", "-c", "echo hi"}, false},
		{"empty", nil, true},
		{"relative executable needs PATH", []string{"git", "push"}, true},
		{"dot relative", []string{"./git"}, true},
		{"root only", []string{"/"}, true},
		{"repeated slash", []string{"/usr//bin/git"}, true},
		{"dot component", []string{"/usr/./bin/git"}, true},
		{"dot-dot component", []string{"/usr/lib/../bin/git"}, true},
		{"trailing slash", []string{"/usr/bin/git/"}, true},
		{"command string in argv0", []string{"/usr/bin/git push"}, true},
		{"semicolon in argv0", []string{"/usr/bin/git;id"}, true},
		{"expansion in argv0", []string{"/usr/bin/$HOME"}, true},
		{"glob in argv0", []string{"/usr/bin/gi*"}, true},
		{"newline in argv0", []string{"/usr/bin/git\nid"}, true},
		{"NUL in argument", []string{"/usr/bin/git", "a\x00b"}, true},
		{"invalid UTF-8 in argument", []string{"/usr/bin/git", "\xff"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := CommandRequiresShell(tt.argv); got != tt.want {
				t.Errorf("CommandRequiresShell(%q) = %v, want %v", tt.argv, got, tt.want)
			}
		})
	}
}

func TestDecide(t *testing.T) {
	exact := config.AutoApprovalRule{CanonicalExecutable: "/usr/bin/git", Args: []string{"status"}}
	prefix := config.AutoApprovalRule{CanonicalExecutable: "/usr/bin/git", Args: []string{"log"}, AllowExtraArgs: true}
	noArgs := config.AutoApprovalRule{CanonicalExecutable: "/usr/bin/true"}
	shExact := config.AutoApprovalRule{CanonicalExecutable: "/usr/bin/sh", Args: []string{"-c", "make test"}}
	shPrefix := config.AutoApprovalRule{CanonicalExecutable: "/usr/bin/sh", Args: []string{"-c"}, AllowExtraArgs: true}
	envPrefix := config.AutoApprovalRule{CanonicalExecutable: "/usr/bin/env", Args: []string{"FOO=1"}, AllowExtraArgs: true}
	weird := config.AutoApprovalRule{CanonicalExecutable: "/usr/lib/../bin/git", Args: []string{"status"}}
	fetch := config.AutoApprovalRule{CanonicalExecutable: "/usr/bin/git", Args: []string{"fetch", "origin"}, AllowExtraArgs: true}
	logOneline := config.AutoApprovalRule{CanonicalExecutable: "/usr/bin/git", Args: []string{"log", "--oneline"}, AllowExtraArgs: true}
	tarCreate := config.AutoApprovalRule{CanonicalExecutable: "/usr/bin/tar", Args: []string{"-czf"}, AllowExtraArgs: true}
	python := config.AutoApprovalRule{CanonicalExecutable: "/usr/bin/python3.11", Args: []string{"tool.py"}, AllowExtraArgs: true}
	echo := config.AutoApprovalRule{CanonicalExecutable: "/usr/bin/echo", Args: []string{"x"}, AllowExtraArgs: true}
	fetchAll := config.AutoApprovalRule{CanonicalExecutable: "/usr/bin/git", Args: []string{"fetch", "origin", "--prune"}}
	rules := []config.AutoApprovalRule{exact, prefix, noArgs, shExact, shPrefix, envPrefix, weird, fetch, logOneline, tarCreate, python, echo, fetchAll}
	tests := []struct {
		name string
		argv []string
		rule int
		why  error
	}{
		{"exact match", []string{"/usr/bin/git", "status"}, 0, nil},
		{"extra args refused by exact rule", []string{"/usr/bin/git", "status", "--porcelain"}, -1, ErrNoRule},
		{"prefix with an operand", []string{"/usr/bin/git", "log", "HEAD~3..HEAD"}, 1, nil},
		{"prefix with an option", []string{"/usr/bin/git", "log", "-1"}, -1, config.ErrExtraArgs},
		{"prefix with an option after an operand", []string{"/usr/bin/git", "log", "HEAD", "--output=/tmp/x"}, -1, config.ErrExtraArgs},
		{"prefix alone", []string{"/usr/bin/git", "log"}, 1, nil},
		{"prefix wrong order", []string{"/usr/bin/git", "-1", "log"}, -1, ErrNoRule},
		{"option before the subcommand", []string{"/usr/bin/git", "-c", "core.sshCommand=sh", "fetch", "origin"}, -1, ErrNoRule},
		{"rule without args matches argv0 alone", []string{"/usr/bin/true"}, 2, nil},
		{"rule without args refuses an argument", []string{"/usr/bin/true", "x"}, -1, ErrNoRule},
		{"argv0 must be byte-equal", []string{"/bin/git", "status"}, -1, ErrNoRule},
		{"relative argv0", []string{"git", "status"}, -1, ErrShellForm},
		{"non-canonical argv0 equal to a rule", []string{"/usr/lib/../bin/git", "status"}, -1, ErrShellForm},
		{"command string argv0", []string{"/usr/bin/git status"}, -1, ErrShellForm},
		{"exact shell vector admitted by exact rule", []string{"/usr/bin/sh", "-c", "make test"}, 3, nil},
		{"shell prefix never admits", []string{"/usr/bin/sh", "-c", "rm -rf ~"}, -1, ErrInterpreterPrefix},
		{"shell prefix alone is its exact vector", []string{"/usr/bin/sh", "-c"}, 4, nil},
		{"env prefix never admits", []string{"/usr/bin/env", "FOO=1", "/usr/bin/id"}, -1, ErrInterpreterPrefix},
		{"versioned interpreter never admits", []string{"/usr/bin/python3.11", "tool.py", "x"}, -1, ErrInterpreterPrefix},
		{"fetch a branch", []string{"/usr/bin/git", "fetch", "origin", "main"}, 7, nil},
		{"fetch --upload-pack", []string{"/usr/bin/git", "fetch", "origin", "--upload-pack=sh -c id"}, -1, config.ErrExtraArgs},
		{"fetch -u", []string{"/usr/bin/git", "fetch", "origin", "-u", "sh"}, -1, config.ErrExtraArgs},
		{"fetch --", []string{"/usr/bin/git", "fetch", "origin", "--", "main"}, -1, config.ErrExtraArgs},
		{"fetch --end-of-options", []string{"/usr/bin/git", "fetch", "origin", "--end-of-options", "main"}, -1, config.ErrExtraArgs},
		{"fetch forced refspec", []string{"/usr/bin/git", "fetch", "origin", "+main:main"}, -1, config.ErrExtraArgs},
		{"an exact rule admits an option a prefix rule refuses", []string{"/usr/bin/git", "fetch", "origin", "--prune"}, 12, nil},
		{"fixed args ending in a flag", []string{"/usr/bin/git", "log", "--oneline", "HEAD"}, -1, config.ErrExtraArgs},
		{"fixed args ending in an option awaiting a value", []string{"/usr/bin/tar", "-czf", "/home/u/.bashrc", "src"}, -1, config.ErrExtraArgs},
		{"an unlisted executable takes options", []string{"/usr/bin/echo", "x", "-n", "--", "+y"}, 11, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Decide(tt.argv, rules)
			if d.Auto != (tt.rule >= 0) || d.Rule != tt.rule || !errors.Is(d.Why, tt.why) || (tt.why == nil) != (d.Why == nil) {
				t.Errorf("Decide(%q) = %+v, want rule %d, why %v", tt.argv, d, tt.rule, tt.why)
			}
			if RuleAdmits(tt.argv, rules) != (tt.rule >= 0 || errors.Is(tt.why, ErrShellForm) && tt.argv[0] == weird.CanonicalExecutable) {
				t.Errorf("RuleAdmits(%q) disagrees with Decide's rule %d", tt.argv, tt.rule)
			}
		})
	}
}

// TestDecideReason is the text of the planner's reasons, which the audit
// log and the coordinator's log show.
func TestDecideReason(t *testing.T) {
	rules := []config.AutoApprovalRule{
		{CanonicalExecutable: "/usr/bin/git", Args: []string{"status"}},
		{CanonicalExecutable: "/usr/bin/git", Args: []string{"fetch"}, AllowExtraArgs: true},
		{CanonicalExecutable: "/usr/bin/git", Args: []string{"fetch", "origin"}, AllowExtraArgs: true},
		{CanonicalExecutable: "/usr/bin/tar", Args: []string{"-c", "-f"}, AllowExtraArgs: true},
		{CanonicalExecutable: "/usr/bin/dash", Args: []string{"-c"}, AllowExtraArgs: true},
		{CanonicalExecutable: "/usr/bin/find", Args: []string{"my dir"}, AllowExtraArgs: true},
		{CanonicalExecutable: "/usr/bin/ssh", Args: []string{"build-host"}, AllowExtraArgs: true},
	}
	long := strings.Repeat("é", 200)
	tests := []struct {
		argv []string
		want string
	}{
		{[]string{"/usr/bin/git", "fetch", "--upload-pack=sh -c id", "."},
			`rule 1 (/usr/bin/git fetch) does not auto-approve option "--upload-pack=sh -c id": options of git can run commands or write files`},
		{[]string{"/usr/bin/git", "fetch", "origin", "main", "-u", "x"},
			`rule 1 (/usr/bin/git fetch) does not auto-approve option "-u": options of git can run commands or write files`},
		{[]string{"/usr/bin/tar", "-c", "-f", "/home/u/.profile", "src"},
			`rule 3 (/usr/bin/tar -c -f) does not auto-approve extra arguments after option "-f", which may take the first of them as its value`},
		{[]string{"/usr/bin/dash", "-c", "id"},
			`rule 4 (/usr/bin/dash -c) does not auto-approve extra arguments: the arguments of dash are a program, a script or files it writes`},
		{[]string{"/usr/bin/find", "my dir", "-exec", "sh", ";"},
			`rule 5 (/usr/bin/find "my dir") does not auto-approve option "-exec": options of find can run commands or write files`},
		{[]string{"/usr/bin/find", "my dir", "-\x1b[2J" + long},
			`rule 5 (/usr/bin/find "my dir") does not auto-approve option "-\x1b[2J` + strings.Repeat("é", 125) + `"...: options of find can run commands or write files`},
		{[]string{"/usr/bin/git", "fetch", "origin", "+main:main"},
			`rule 1 (/usr/bin/git fetch) does not auto-approve argument "+main:main": an extra argument of git beginning with "+" forces or runs something`},
		{[]string{"/usr/bin/ssh", "build-host", "-oProxyCommand=sh -c id"},
			`rule 6 (/usr/bin/ssh build-host) does not auto-approve option "-oProxyCommand=sh -c id": options of ssh can run commands or write files`},
		{[]string{"/usr/bin/tar", "-c", "-f", "out.tar", "--to-command=sh"},
			`rule 3 (/usr/bin/tar -c -f) does not auto-approve extra arguments after option "-f", which may take the first of them as its value`},
		{[]string{"/usr/bin/git", "push"}, ErrNoRule.Error()},
	}
	for _, tt := range tests {
		d := Decide(tt.argv, rules)
		if d.Auto || d.Why == nil || d.Why.Error() != tt.want {
			t.Errorf("Decide(%q).Why =\n  %v\nwant\n  %s", tt.argv, d.Why, tt.want)
		}
	}
}

func TestScrubbedEnv(t *testing.T) {
	lookup := func(name string) (string, bool) {
		m := map[string]string{"SSH_AUTH_SOCK": "/run/user/1000/agent", "AWS_SECRET_ACCESS_KEY": "secret", "LD_PRELOAD": "/x.so"}
		v, ok := m[name]
		return v, ok
	}
	got := ScrubbedEnv("/home/dev", "dev", lookup)
	want := []string{
		"PATH=/usr/bin:/bin", "HOME=/home/dev", "USER=dev", "LOGNAME=dev", "LANG=C.UTF-8",
		"GIT_TERMINAL_PROMPT=0", "GIT_CONFIG_COUNT=3",
		"GIT_CONFIG_KEY_0=core.hooksPath", "GIT_CONFIG_VALUE_0=/dev/null",
		"GIT_CONFIG_KEY_1=core.fsmonitor", "GIT_CONFIG_VALUE_1=false",
		"GIT_CONFIG_KEY_2=protocol.ext.allow", "GIT_CONFIG_VALUE_2=never",
		"SSH_AUTH_SOCK=/run/user/1000/agent",
	}
	if len(got) != len(want) {
		t.Fatalf("ScrubbedEnv = %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("ScrubbedEnv[%d] = %q, want %q", i, got[i], want[i])
		}
	}
}
