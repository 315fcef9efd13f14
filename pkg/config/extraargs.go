package config

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// ExtraArgs says what a rule with allow_extra_args may append to its fixed
// arguments for one executable. It is a property of the executable's name,
// looked up in extraArgsTable by ExtraArgsOf, and it makes matching
// stricter without changing the v1 document or its digests.
type ExtraArgs uint8

const (
	// ExtraArgsAny: the executable is not known to run a command or write
	// a file because of its arguments; any extra arguments are admitted.
	ExtraArgsAny ExtraArgs = iota
	// ExtraArgsOperands: some of the executable's options run a command or
	// write a file (git --upload-pack, ssh -o ProxyCommand, tar
	// --to-command, find -exec). Extra arguments are admitted only as
	// operands: none may begin with "-" or "+", and the fixed arguments
	// must not end in an option that could take the first extra argument
	// as its value.
	ExtraArgsOperands
	// ExtraArgsNone: the executable's operands themselves are a program,
	// a script or files it writes (sh, env, python, awk, make, cp, tee).
	// A rule never admits extra arguments for it.
	ExtraArgsNone
)

func (x ExtraArgs) String() string {
	switch x {
	case ExtraArgsAny:
		return "any"
	case ExtraArgsOperands:
		return "operands"
	case ExtraArgsNone:
		return "none"
	}
	return "ExtraArgs(" + strconv.Itoa(int(x)) + ")"
}

// extraArgsTable is the one list of executables whose arguments can run a
// command or write a file, by name. docs/CONFIGURATION.md ("Extra
// arguments") reproduces it; a test keeps the two equal. A name absent
// from the table is ExtraArgsAny. Names are looked up as ExtraArgsOf
// describes, so "python" covers python3 and python3.12, "vim" covers
// vim.basic, and "awk" does not cover mawk, which is listed itself.
var extraArgsTable = map[string]ExtraArgs{
	// Shells and interpreters: the arguments are a program or a script.
	"sh": ExtraArgsNone, "bash": ExtraArgsNone, "dash": ExtraArgsNone, "zsh": ExtraArgsNone,
	"ksh": ExtraArgsNone, "mksh": ExtraArgsNone, "fish": ExtraArgsNone, "csh": ExtraArgsNone,
	"tcsh": ExtraArgsNone, "ash": ExtraArgsNone, "busybox": ExtraArgsNone, "toybox": ExtraArgsNone,
	"python": ExtraArgsNone, "pypy": ExtraArgsNone, "perl": ExtraArgsNone, "ruby": ExtraArgsNone,
	"node": ExtraArgsNone, "nodejs": ExtraArgsNone, "deno": ExtraArgsNone, "bun": ExtraArgsNone,
	"php": ExtraArgsNone, "lua": ExtraArgsNone, "luajit": ExtraArgsNone, "tclsh": ExtraArgsNone,
	"wish": ExtraArgsNone, "Rscript": ExtraArgsNone, "java": ExtraArgsNone, "expect": ExtraArgsNone,
	"awk": ExtraArgsNone, "gawk": ExtraArgsNone, "mawk": ExtraArgsNone, "nawk": ExtraArgsNone,
	"sed": ExtraArgsNone, "m4": ExtraArgsNone, "sqlite": ExtraArgsNone, "gdb": ExtraArgsNone,
	// Editors and pagers: "+command" operands and shell escapes.
	"vi": ExtraArgsNone, "vim": ExtraArgsNone, "nvim": ExtraArgsNone, "view": ExtraArgsNone,
	"ex": ExtraArgsNone, "emacs": ExtraArgsNone, "less": ExtraArgsNone, "more": ExtraArgsNone,
	// Program runners: the arguments name the program to run.
	"env": ExtraArgsNone, "xargs": ExtraArgsNone, "nohup": ExtraArgsNone, "nice": ExtraArgsNone,
	"timeout": ExtraArgsNone, "setsid": ExtraArgsNone, "stdbuf": ExtraArgsNone, "sudo": ExtraArgsNone,
	"doas": ExtraArgsNone, "su": ExtraArgsNone, "runuser": ExtraArgsNone, "pkexec": ExtraArgsNone,
	"chroot": ExtraArgsNone, "unshare": ExtraArgsNone, "nsenter": ExtraArgsNone, "ionice": ExtraArgsNone,
	"taskset": ExtraArgsNone, "chrt": ExtraArgsNone, "flock": ExtraArgsNone, "time": ExtraArgsNone,
	"watch": ExtraArgsNone, "strace": ExtraArgsNone, "ltrace": ExtraArgsNone, "script": ExtraArgsNone,
	"parallel": ExtraArgsNone, "npx": ExtraArgsNone, "pnpx": ExtraArgsNone, "bunx": ExtraArgsNone,
	"uvx": ExtraArgsNone, "make": ExtraArgsNone, "gmake": ExtraArgsNone,
	// File writers: the operands are the files written or removed.
	"cp": ExtraArgsNone, "mv": ExtraArgsNone, "install": ExtraArgsNone, "ln": ExtraArgsNone,
	"tee": ExtraArgsNone, "dd": ExtraArgsNone, "rm": ExtraArgsNone, "shred": ExtraArgsNone,
	"truncate": ExtraArgsNone, "touch": ExtraArgsNone, "chmod": ExtraArgsNone, "chown": ExtraArgsNone,
	"chgrp": ExtraArgsNone, "rsync": ExtraArgsNone, "scp": ExtraArgsNone,

	// Tools with options that run a command or write a file.
	"git": ExtraArgsOperands, "ssh": ExtraArgsOperands, "sftp": ExtraArgsOperands,
	"find": ExtraArgsOperands, "tar": ExtraArgsOperands, "bsdtar": ExtraArgsOperands,
	"cpio": ExtraArgsOperands, "zip": ExtraArgsOperands, "unzip": ExtraArgsOperands,
	"npm": ExtraArgsOperands, "yarn": ExtraArgsOperands, "pnpm": ExtraArgsOperands,
	"cargo": ExtraArgsOperands, "rustup": ExtraArgsOperands, "go": ExtraArgsOperands,
	"pip": ExtraArgsOperands, "pipx": ExtraArgsOperands, "uv": ExtraArgsOperands,
	"gem": ExtraArgsOperands, "bundle": ExtraArgsOperands, "poetry": ExtraArgsOperands,
	"mvn": ExtraArgsOperands, "gradle": ExtraArgsOperands, "ninja": ExtraArgsOperands,
	"cmake": ExtraArgsOperands, "curl": ExtraArgsOperands, "wget": ExtraArgsOperands,
	"docker": ExtraArgsOperands, "podman": ExtraArgsOperands, "kubectl": ExtraArgsOperands,
	"helm": ExtraArgsOperands, "gh": ExtraArgsOperands, "glab": ExtraArgsOperands,
	"hg": ExtraArgsOperands, "svn": ExtraArgsOperands, "gpg": ExtraArgsOperands,
	"openssl": ExtraArgsOperands, "sort": ExtraArgsOperands, "man": ExtraArgsOperands,
	"terraform": ExtraArgsOperands, "systemctl": ExtraArgsOperands, "journalctl": ExtraArgsOperands,
}

// ExtraArgsNames returns the table's names of class x, sorted.
func ExtraArgsNames(x ExtraArgs) []string {
	var out []string
	for name, c := range extraArgsTable {
		if c == x {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// ExtraArgsOf is the class of an executable: the strictest table entry
// among the names of path.Base(executable), which are
//
//  1. the base name itself ("python3.12");
//  2. the part before its first "." ("python3"; "vim" for vim.basic);
//  3. that part without trailing ASCII digits and then without one
//     trailing "-" or "_" ("python"; "gawk" for gawk-5.1).
//
// The names are case-sensitive. A version suffix never hides a listed
// tool, and stripping can only find more entries, so a false match makes
// matching stricter, never looser.
func ExtraArgsOf(executable string) ExtraArgs {
	class := ExtraArgsAny
	for _, n := range executableNames(path.Base(executable)) {
		if c := extraArgsTable[n]; c > class {
			class = c
		}
	}
	return class
}

func executableNames(base string) []string {
	names := []string{base}
	stem := base
	if i := strings.IndexByte(stem, '.'); i > 0 {
		stem = stem[:i]
		names = append(names, stem)
	}
	bare := strings.TrimRight(stem, "0123456789")
	if strings.HasSuffix(bare, "-") || strings.HasSuffix(bare, "_") {
		bare = bare[:len(bare)-1]
	}
	if bare != "" && bare != stem {
		names = append(names, bare)
	}
	return names
}

// ErrExtraArgs: a rule with allow_extra_args matches argv's prefix but
// does not auto-approve its extra arguments. Errors of type
// *ExtraArgsError wrap it.
var ErrExtraArgs = errors.New("extra arguments not auto-approved")

// ExtraArgsError says why a rule does not auto-approve a request's extra
// arguments.
type ExtraArgsError struct {
	Executable string    // the rule's canonical executable
	Args       []string  // the rule's fixed arguments
	Class      ExtraArgs // ExtraArgsOf(Executable): ExtraArgsOperands or ExtraArgsNone
	// Arg is the refused extra argument (an option), or, when
	// AfterOption, the rule's last fixed argument; empty for
	// ExtraArgsNone.
	Arg string
	// AfterOption: the fixed arguments end in an option that may take
	// the first extra argument as its value.
	AfterOption bool
}

// Refusal is the predicate of the error's sentence, without the rule:
// `does not auto-approve option "--upload-pack=x"`.
func (e *ExtraArgsError) Refusal() string {
	name := path.Base(e.Executable)
	switch {
	case e.Class == ExtraArgsNone:
		return fmt.Sprintf("does not auto-approve extra arguments: the arguments of %s are a program, a script or files it writes", name)
	case e.AfterOption:
		return fmt.Sprintf("does not auto-approve extra arguments after option %s, which may take the first of them as its value", quoteShown(e.Arg))
	}
	if strings.HasPrefix(e.Arg, "+") {
		return fmt.Sprintf("does not auto-approve argument %s: an extra argument of %s beginning with \"+\" forces or runs something", quoteShown(e.Arg), name)
	}
	return fmt.Sprintf("does not auto-approve option %s: options of %s can run commands or write files", quoteShown(e.Arg), name)
}

// RuleString renders the rule's executable and fixed arguments, quoting
// an argument only when it is empty or has spaces, quotes or characters
// that are not printable.
func (e *ExtraArgsError) RuleString() string {
	parts := []string{quoteIfNeeded(e.Executable)}
	for _, a := range e.Args {
		parts = append(parts, quoteIfNeeded(a))
	}
	return strings.Join(parts, " ")
}

func (e *ExtraArgsError) Error() string {
	return "rule (" + e.RuleString() + ") " + e.Refusal()
}

func (e *ExtraArgsError) Unwrap() error { return ErrExtraArgs }

// maxShownArg bounds how much of a refused argument an error repeats; the
// argument comes from the sandbox and the error reaches the audit log.
const maxShownArg = 256

func quoteShown(s string) string {
	if len(s) > maxShownArg {
		cut := maxShownArg
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		return strconv.Quote(s[:cut]) + "..."
	}
	return strconv.Quote(s)
}

func quoteIfNeeded(s string) string {
	if s == "" {
		return `""`
	}
	for _, r := range s {
		if r == '"' || r == '\'' || r == '\\' || unicode.IsSpace(r) || !unicode.IsPrint(r) {
			return quoteShown(s)
		}
	}
	if len(s) > maxShownArg {
		return quoteShown(s)
	}
	return s
}

// CheckExtraArgs applies the executable's ExtraArgs class to argv, which
// the rule Matches: nil when the rule auto-approves it, else an
// *ExtraArgsError. An argv equal to the fixed arguments has no extra
// arguments and is admitted, as an exact rule would admit it. Otherwise,
// for a rule with AllowExtraArgs:
//
//   - ExtraArgsNone refuses every extra argument;
//   - ExtraArgsOperands refuses extra arguments when the last fixed
//     argument begins with "-" and is not "-", "--" or a "--name=value"
//     option (it may be an option waiting for a value, such as tar -czf
//     or ssh -o), and refuses the first extra argument that begins with
//     "-" (options; "--" and "--end-of-options" too) or "+" (a forced git
//     refspec, a "+command" operand);
//   - ExtraArgsAny admits them.
func (r AutoApprovalRule) CheckExtraArgs(argv []string) error {
	if !r.AllowExtraArgs || len(argv) <= 1+len(r.Args) {
		return nil
	}
	class := ExtraArgsOf(r.CanonicalExecutable)
	refuse := func(arg string, after bool) error {
		return &ExtraArgsError{Executable: r.CanonicalExecutable, Args: append([]string(nil), r.Args...), Class: class, Arg: arg, AfterOption: after}
	}
	switch class {
	case ExtraArgsNone:
		return refuse("", false)
	case ExtraArgsOperands:
		if last := r.Args[len(r.Args)-1]; awaitsValue(last) {
			return refuse(last, true)
		}
		for _, a := range argv[1+len(r.Args):] {
			if strings.HasPrefix(a, "-") || strings.HasPrefix(a, "+") {
				return refuse(a, false)
			}
		}
	}
	return nil
}

// awaitsValue reports whether a fixed argument may be an option whose
// value is the next argument: it begins with "-", and is neither "-"
// (standard input), "--" (end of options) nor "--name=value".
func awaitsValue(a string) bool {
	if !strings.HasPrefix(a, "-") || a == "-" || a == "--" {
		return false
	}
	return !(strings.HasPrefix(a, "--") && strings.Contains(a, "="))
}

// WarnExtraArgs names the warning about allow_extra_args for an executable
// whose class is not ExtraArgsAny. It is a warning, not a broken rule: the
// document stays valid and its digests do not change.
const WarnExtraArgs Rule = "extra-args"

// extraArgsWarnings warns about every rule of every profile that sets
// allow_extra_args for a listed executable, in profile-name order. The
// class is the stricter of the written path's and, for the selected
// profile, the canonical executable's (resolved[i] belongs to the
// selected profile's rule i); matching follows the canonical one.
func extraArgsWarnings(w *problems, profiles map[string]*staticProfile, selected string, resolved []AutoApprovalRule) {
	names := make([]string, 0, len(profiles))
	for n := range profiles {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		for i, sr := range profiles[n].rules {
			if !sr.extra || len(sr.args) == 0 {
				continue
			}
			exe := sr.form.String() + sr.suffix
			class := ExtraArgsOf(exe)
			if n == selected && i < len(resolved) {
				exe = resolved[i].CanonicalExecutable
				class = max(class, ExtraArgsOf(exe))
			}
			name := path.Base(exe)
			switch class {
			case ExtraArgsNone:
				w.add(sr.at.key("allow_extra_args"), WarnExtraArgs,
					"allow_extra_args with %s: the arguments of %s are a program, a script or files it writes, so no extra argument is auto-approved; write exact rules instead", exe, name)
			case ExtraArgsOperands:
				if last := sr.args[len(sr.args)-1]; awaitsValue(last) {
					w.add(sr.at.key("allow_extra_args"), WarnExtraArgs,
						"allow_extra_args with %s: options of %s can run commands or write files, and the arguments end in option %s, which may take the next one as its value, so no extra argument is auto-approved; end args with an operand or \"--\"", exe, name, quoteShown(last))
					continue
				}
				w.add(sr.at.key("allow_extra_args"), WarnExtraArgs,
					"allow_extra_args with %s: options of %s can run commands or write files, so extra arguments beginning with \"-\" or \"+\" go to the prompt; operands are still auto-approved and name what %s acts on", exe, name, name)
			}
		}
	}
}
