package config

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

func TestExtraArgsOf(t *testing.T) {
	tests := []struct {
		executable string
		want       ExtraArgs
	}{
		{"/usr/bin/git", ExtraArgsOperands},
		{"/usr/local/bin/git", ExtraArgsOperands},
		{"/usr/bin/ssh", ExtraArgsOperands},
		{"/usr/bin/tar", ExtraArgsOperands},
		{"/usr/bin/find", ExtraArgsOperands},
		{"/usr/local/go/bin/go", ExtraArgsOperands},
		{"/usr/local/bin/go1.22.3", ExtraArgsOperands},
		{"/usr/bin/pip3", ExtraArgsOperands},
		{"/usr/bin/gh", ExtraArgsOperands},
		{"/usr/bin/sh", ExtraArgsNone},
		{"/usr/bin/dash", ExtraArgsNone},
		{"/usr/bin/busybox", ExtraArgsNone},
		{"/usr/bin/python3", ExtraArgsNone},
		{"/usr/bin/python3.11", ExtraArgsNone},
		{"/usr/bin/python3.12-dbg", ExtraArgsNone},
		{"/usr/bin/perl5.36.0", ExtraArgsNone},
		{"/usr/bin/ruby3.1", ExtraArgsNone},
		{"/usr/bin/nodejs", ExtraArgsNone},
		{"/usr/bin/node18", ExtraArgsNone},
		{"/usr/bin/gawk-5.1.0", ExtraArgsNone},
		{"/usr/bin/mawk", ExtraArgsNone},
		{"/usr/bin/vim.basic", ExtraArgsNone},
		{"/usr/bin/vim.tiny", ExtraArgsNone},
		{"/usr/bin/sqlite3", ExtraArgsNone},
		{"/usr/bin/env", ExtraArgsNone},
		{"/usr/bin/timeout", ExtraArgsNone},
		{"/usr/bin/make", ExtraArgsNone},
		{"/usr/bin/rsync", ExtraArgsNone},
		{"/usr/bin/cp", ExtraArgsNone},
		{"/usr/bin/echo", ExtraArgsAny},
		{"/usr/bin/true", ExtraArgsAny},
		{"/usr/bin/ls", ExtraArgsAny},
		{"/usr/bin/gitk", ExtraArgsAny},
		{"/usr/bin/digest", ExtraArgsAny},
		{"/usr/bin/Git", ExtraArgsAny},
		{"/usr/bin/.git", ExtraArgsAny},
		{"/usr/bin/7z", ExtraArgsAny},
		{"/opt/tools/git/bin/lint", ExtraArgsAny},
	}
	for _, tt := range tests {
		t.Run(tt.executable, func(t *testing.T) {
			if got := ExtraArgsOf(tt.executable); got != tt.want {
				t.Errorf("ExtraArgsOf(%q) = %v, want %v", tt.executable, got, tt.want)
			}
		})
	}
}

func TestCheckExtraArgs(t *testing.T) {
	git := func(extra bool, args ...string) AutoApprovalRule {
		return AutoApprovalRule{CanonicalExecutable: "/usr/bin/git", Args: args, AllowExtraArgs: extra}
	}
	tests := []struct {
		name  string
		rule  AutoApprovalRule
		argv  []string
		ok    bool
		arg   string
		after bool
	}{
		{"operand", git(true, "fetch", "origin"), []string{"/usr/bin/git", "fetch", "origin", "main"}, true, "", false},
		{"operands with = and :", git(true, "push", "origin"), []string{"/usr/bin/git", "push", "origin", "HEAD:refs/heads/x", "a=b"}, true, "", false},
		{"no extra arguments", git(true, "fetch"), []string{"/usr/bin/git", "fetch"}, true, "", false},
		{"exact rule", git(false, "fetch"), []string{"/usr/bin/git", "fetch"}, true, "", false},
		{"long option", git(true, "fetch"), []string{"/usr/bin/git", "fetch", "--upload-pack=x", "."}, false, "--upload-pack=x", false},
		{"short option", git(true, "fetch"), []string{"/usr/bin/git", "fetch", "origin", "-u"}, false, "-u", false},
		{"option after operands", git(true, "log"), []string{"/usr/bin/git", "log", "a", "b", "--output=f"}, false, "--output=f", false},
		{"end of options", git(true, "log"), []string{"/usr/bin/git", "log", "--", "x"}, false, "--", false},
		{"standard input", git(true, "log"), []string{"/usr/bin/git", "log", "-"}, false, "-", false},
		{"plus", git(true, "push", "origin"), []string{"/usr/bin/git", "push", "origin", "+main"}, false, "+main", false},
		{"empty extra argument", git(true, "log"), []string{"/usr/bin/git", "log", ""}, true, "", false},
		{"fixed flag before extras", git(true, "log", "--oneline"), []string{"/usr/bin/git", "log", "--oneline", "HEAD"}, false, "--oneline", true},
		{"fixed --name=value before extras", git(true, "log", "--format=%H"), []string{"/usr/bin/git", "log", "--format=%H", "HEAD"}, true, "", false},
		{"fixed -- before extras", git(true, "log", "--"), []string{"/usr/bin/git", "log", "--", "README"}, true, "", false},
		{"fixed -- before an option-like path", git(true, "log", "--"), []string{"/usr/bin/git", "log", "--", "-x"}, false, "-x", false},
		{"fixed - before extras", AutoApprovalRule{"/usr/bin/tar", []string{"-cf", "-"}, true}, []string{"/usr/bin/tar", "-cf", "-", "src"}, true, "", false},
		{"fixed option awaiting a value", AutoApprovalRule{"/usr/bin/ssh", []string{"-o"}, true}, []string{"/usr/bin/ssh", "-o", "ProxyCommand=sh"}, false, "-o", true},
		{"interpreter with extras", AutoApprovalRule{"/usr/bin/python3.11", []string{"x.py"}, true}, []string{"/usr/bin/python3.11", "x.py", "data"}, false, "", false},
		{"interpreter without extras", AutoApprovalRule{"/usr/bin/python3.11", []string{"x.py"}, true}, []string{"/usr/bin/python3.11", "x.py"}, true, "", false},
		{"unlisted executable", AutoApprovalRule{"/usr/bin/echo", []string{"x"}, true}, []string{"/usr/bin/echo", "x", "-e", "+"}, true, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !tt.rule.Matches(tt.argv) {
				t.Fatalf("the case's rule does not match %q", tt.argv)
			}
			err := tt.rule.CheckExtraArgs(tt.argv)
			if tt.ok {
				if err != nil {
					t.Fatalf("CheckExtraArgs(%q) = %v, want nil", tt.argv, err)
				}
				return
			}
			var e *ExtraArgsError
			if !errors.As(err, &e) || !errors.Is(err, ErrExtraArgs) {
				t.Fatalf("CheckExtraArgs(%q) = %v, want an *ExtraArgsError", tt.argv, err)
			}
			if e.Arg != tt.arg || e.AfterOption != tt.after || e.Class != ExtraArgsOf(tt.rule.CanonicalExecutable) || e.Executable != tt.rule.CanonicalExecutable || !slices.Equal(e.Args, tt.rule.Args) {
				t.Errorf("CheckExtraArgs(%q) = %+v, want arg %q, after option %v", tt.argv, e, tt.arg, tt.after)
			}
		})
	}
}

// TestExtraArgsWarnings resolves a document with prefix rules for listed
// and unlisted executables in the selected and another profile and checks
// the warnings, which leave the document valid.
func TestExtraArgsWarnings(t *testing.T) {
	f := newFixture(t)
	for _, name := range []string{"git", "python3.11", "tar"} {
		if err := os.WriteFile(filepath.Join(f.dir, "bin", name), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("python3.11", filepath.Join(f.dir, "bin", "python3")); err != nil {
		t.Fatal(err)
	}
	doc := testDoc("", escal(true,
		`executable = "@DIR@/bin/git"
args = ["fetch"]
allow_extra_args = true`,
		`executable = "@DIR@/bin/python3"
args = ["x.py"]
allow_extra_args = true`,
		`executable = "@DIR@/bin/tar"
args = ["-czf"]
allow_extra_args = true`,
		`executable = "@DIR@/bin/tool"
args = ["status"]
allow_extra_args = true`,
		`executable = "@DIR@/bin/git"
args = ["status"]`)+`
[profiles.other]
image = "docker.io/library/debian:bookworm"
[profiles.other.escalation]
enabled = true
auto_approve = [{ executable = "/usr/bin/ssh", args = ["build-host"], allow_extra_args = true }]
`)
	cfg, err := f.resolve(t, doc)
	if err != nil {
		t.Fatalf("resolve: %v%s", err, dumpProblems(problemsOf(t, err)))
	}
	type want struct{ field, message string }
	wants := []want{
		{"profiles.dev.escalation.auto_approve[0].allow_extra_args", "allow_extra_args with " + f.dir + "/bin/git: options of git can run commands or write files, so extra arguments beginning with \"-\" or \"+\" go to the prompt"},
		{"profiles.dev.escalation.auto_approve[1].allow_extra_args", "allow_extra_args with " + f.dir + "/bin/python3.11: the arguments of python3.11 are a program, a script or files it writes, so no extra argument is auto-approved"},
		{"profiles.dev.escalation.auto_approve[2].allow_extra_args", "the arguments end in option \"-czf\", which may take the next one as its value, so no extra argument is auto-approved"},
		{"profiles.other.escalation.auto_approve[0].allow_extra_args", "allow_extra_args with /usr/bin/ssh: options of ssh can run commands or write files"},
	}
	got := cfg.Warnings()
	if len(got) != len(wants) {
		t.Fatalf("warnings:%s\nwant %d", dumpProblems(got), len(wants))
	}
	for i, w := range wants {
		if got[i].Rule != WarnExtraArgs || got[i].Field != w.field || !strings.Contains(got[i].Message, w.message) || got[i].Line == 0 || got[i].File != "config.toml" {
			t.Errorf("warning %d = %s [%s], want %s containing %q", i, got[i].String(), got[i].Rule, w.field, w.message)
		}
	}
}

// TestExtraArgsTableDocumented keeps the lists in docs/CONFIGURATION.md
// ("Extra arguments") equal to extraArgsTable.
func TestExtraArgsTableDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/CONFIGURATION.md")
	if err != nil {
		t.Fatal(err)
	}
	for label, class := range map[string]ExtraArgs{
		"**No extra arguments:**": ExtraArgsNone,
		"**Operands only:**":      ExtraArgsOperands,
	} {
		i := strings.Index(string(doc), label)
		if i < 0 {
			t.Fatalf("docs/CONFIGURATION.md has no %s list", label)
		}
		para := string(doc[i+len(label):])
		if j := strings.Index(para, "\n\n"); j >= 0 {
			para = para[:j]
		}
		var names []string
		for _, m := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(para, -1) {
			names = append(names, m[1])
		}
		slices.Sort(names)
		if want := ExtraArgsNames(class); !slices.Equal(names, want) {
			t.Errorf("docs/CONFIGURATION.md %s lists\n  %q\nthe table has\n  %q", label, names, want)
		}
	}
}

var versionSuffix = regexp.MustCompile(`^([.-][0-9.]*|[0-9][0-9.]*)?$`)

// FuzzCheckExtraArgs checks the matching rule's invariants: what an
// ExtraArgsOperands rule admits has no extra argument beginning with "-"
// or "+", an ExtraArgsNone rule admits no extra argument, and a version
// suffix never makes a listed name less strict.
func FuzzCheckExtraArgs(f *testing.F) {
	f.Add("/usr/bin/git", "fetch", "origin", "--upload-pack=x", ".3")
	f.Add("/usr/bin/python3.11", "x.py", "", "data", "")
	f.Add("/usr/bin/tar", "-czf", "out", "src", "-1")
	f.Add("/usr/bin/echo", "x", "-n", "+", "")
	f.Fuzz(func(t *testing.T, exe, fixed, a, b, suffix string) {
		rule := AutoApprovalRule{CanonicalExecutable: exe, Args: []string{fixed}, AllowExtraArgs: true}
		argv := []string{exe, fixed, a, b}
		err := rule.CheckExtraArgs(argv)
		class := ExtraArgsOf(exe)
		if err != nil {
			var e *ExtraArgsError
			if !errors.As(err, &e) || class == ExtraArgsAny || e.Error() == "" {
				t.Fatalf("CheckExtraArgs(%q) = %v for class %v", argv, err, class)
			}
			return
		}
		switch class {
		case ExtraArgsNone:
			t.Fatalf("an ExtraArgsNone rule admitted %q", argv)
		case ExtraArgsOperands:
			for _, x := range argv[2:] {
				if strings.HasPrefix(x, "-") || strings.HasPrefix(x, "+") {
					t.Fatalf("an ExtraArgsOperands rule admitted %q", argv)
				}
			}
			if awaitsValue(fixed) {
				t.Fatalf("an ExtraArgsOperands rule admitted extras after %q", fixed)
			}
		}
		for _, name := range ExtraArgsNames(ExtraArgsNone) {
			if !versionSuffix.MatchString(suffix) || strings.ContainsAny(name[len(name)-1:], "0123456789") && strings.ContainsAny(suffix[:min(1, len(suffix))], "0123456789") {
				continue
			}
			if ExtraArgsOf("/usr/bin/"+name+suffix) != ExtraArgsNone {
				t.Fatalf("ExtraArgsOf(%q) is not ExtraArgsNone", name+suffix)
			}
		}
	})
}
