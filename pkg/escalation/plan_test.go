package escalation

import (
	"errors"
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
	rules := []config.AutoApprovalRule{exact, prefix, noArgs, shExact, shPrefix, envPrefix, weird}
	tests := []struct {
		name string
		argv []string
		rule int
		why  error
	}{
		{"exact match", []string{"/usr/bin/git", "status"}, 0, nil},
		{"extra args refused by exact rule", []string{"/usr/bin/git", "status", "--porcelain"}, -1, ErrNoRule},
		{"prefix with extra args", []string{"/usr/bin/git", "log", "-1"}, 1, nil},
		{"prefix alone", []string{"/usr/bin/git", "log"}, 1, nil},
		{"prefix wrong order", []string{"/usr/bin/git", "-1", "log"}, -1, ErrNoRule},
		{"rule without args matches argv0 alone", []string{"/usr/bin/true"}, 2, nil},
		{"rule without args refuses an argument", []string{"/usr/bin/true", "x"}, -1, ErrNoRule},
		{"argv0 must be byte-equal", []string{"/bin/git", "status"}, -1, ErrNoRule},
		{"relative argv0", []string{"git", "status"}, -1, ErrShellForm},
		{"non-canonical argv0 equal to a rule", []string{"/usr/lib/../bin/git", "status"}, -1, ErrShellForm},
		{"command string argv0", []string{"/usr/bin/git status"}, -1, ErrShellForm},
		{"exact shell vector admitted by exact rule", []string{"/usr/bin/sh", "-c", "make test"}, 3, nil},
		{"shell prefix never admits", []string{"/usr/bin/sh", "-c", "rm -rf ~"}, -1, ErrInterpreterPrefix},
		{"env prefix never admits", []string{"/usr/bin/env", "FOO=1", "/usr/bin/id"}, -1, ErrInterpreterPrefix},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Decide(tt.argv, rules)
			if d.Auto != (tt.rule >= 0) || d.Rule != tt.rule || !errors.Is(d.Why, tt.why) || (tt.why == nil) != (d.Why == nil) {
				t.Errorf("Decide(%q) = %+v, want rule %d, why %v", tt.argv, d, tt.rule, tt.why)
			}
		})
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
