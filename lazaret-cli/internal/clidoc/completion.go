package clidoc

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/urfave/cli/v2"
)

// Shells are the shells Script writes for.
var Shells = []string{"bash", "zsh", "fish"}

// Script returns the completion script of app for shell, one of Shells.
func Script(app *cli.App, shell string) (string, error) {
	switch shell {
	case "bash":
		return Bash(app), nil
	case "zsh":
		return Zsh(app), nil
	case "fish":
		return Fish(app)
	}
	return "", fmt.Errorf("no completion for shell %q; choose one of %s", shell, strings.Join(Shells, ", "))
}

// word is what a generated script writes unquoted: command names, flag
// spellings and the program name. Anything else is left out.
var word = regexp.MustCompile(`^-{0,2}[A-Za-z0-9][A-Za-z0-9._-]*$`)

func safe(ws []string) []string {
	var out []string
	for _, w := range ws {
		if word.MatchString(w) {
			out = append(out, w)
		}
	}
	return out
}

// funcName is the shell function of app's completion.
func funcName(app *cli.App) string {
	return "_" + strings.NewReplacer("-", "_", ".", "_").Replace(app.Name)
}

// shellPath is a node's path as the scripts track it: "" for the program,
// "/image/ls" for `image ls`.
func shellPath(n node) string {
	if n.path == "" {
		return ""
	}
	return "/" + strings.ReplaceAll(n.path, " ", "/")
}

// flagSets returns the spellings of every flag of the tree that takes a
// value, those whose value is a path apart.
func flagSets(ns []node) (files, others []string) {
	seen := map[string]bool{}
	for _, n := range ns {
		for _, f := range n.flags {
			if !takesValue(f) {
				continue
			}
			for _, s := range safe(spellings(f)) {
				if seen[s] {
					continue
				}
				seen[s] = true
				if takesFile(f) {
					files = append(files, s)
				} else {
					others = append(others, s)
				}
			}
		}
	}
	return files, others
}

// pathArms writes one case arm per spelling of every command: the typed
// word after its parent's path selects it.
func pathArms(b *strings.Builder, ns []node, indent, open, close string) {
	for _, n := range ns {
		if n.cmd == nil {
			continue
		}
		parent := ""
		if i := strings.LastIndexByte(shellPath(n), '/'); i > 0 {
			parent = shellPath(n)[:i]
		}
		for _, w := range safe(words(n.cmd)) {
			fmt.Fprintf(b, "%s%s\"%s/%s\") cmdpath=\"%s\" ;;%s\n", indent, open, parent, w, shellPath(n), close)
		}
	}
}

func subNames(n node) []string {
	var out []string
	for _, c := range n.subs {
		out = append(out, safe(words(c))...)
	}
	return out
}

func flagNames(n node) []string {
	var out []string
	for _, f := range n.flags {
		out = append(out, safe(spellings(f))...)
	}
	return out
}

// Bash returns a bash completion script for app: subcommands, then the
// flags of the command typed so far, and file names for flags that take
// a path and for arguments.
func Bash(app *cli.App) string {
	ns := nodes(app)
	files, others := flagSets(ns)
	fn := funcName(app)
	var b strings.Builder
	fmt.Fprintf(&b, "# bash completion for %s, generated from its command tree.\n", app.Name)
	fmt.Fprintf(&b, "# Load it with: source <(%s completion bash)\n\n", app.Name)
	fmt.Fprintf(&b, "%s() {\n", fn)
	b.WriteString(`	local cur prev word cmdpath="" i
	cur="${COMP_WORDS[COMP_CWORD]}"
	prev="${COMP_WORDS[COMP_CWORD-1]}"
	COMPREPLY=()
	for (( i = 1; i < COMP_CWORD; i++ )); do
		word="${COMP_WORDS[i]}"
		case "$word" in
		--) return 0 ;;
`)
	if vals := append(append([]string{}, files...), others...); len(vals) > 0 {
		fmt.Fprintf(&b, "\t\t%s) (( i++ )); continue ;;\n", strings.Join(vals, "|"))
	}
	b.WriteString("\t\tesac\n\t\tcase \"$cmdpath/$word\" in\n")
	pathArms(&b, ns, "\t\t", "", "")
	b.WriteString("\t\tesac\n\tdone\n\tcase \"$prev\" in\n")
	if len(files) > 0 {
		fmt.Fprintf(&b, "\t%s) return 0 ;;\n", strings.Join(files, "|"))
	}
	if len(others) > 0 {
		fmt.Fprintf(&b, "\t%s) compopt +o default 2>/dev/null; return 0 ;;\n", strings.Join(others, "|"))
	}
	b.WriteString("\tesac\n\tlocal subcommands=\"\" flags=\"\"\n\tcase \"$cmdpath\" in\n")
	for _, n := range ns {
		fmt.Fprintf(&b, "\t\"%s\") subcommands=\"%s\"; flags=\"%s\" ;;\n", shellPath(n), strings.Join(subNames(n), " "), strings.Join(flagNames(n), " "))
	}
	b.WriteString(`	esac
	if [[ "$cur" == -* ]]; then
		COMPREPLY=($(compgen -W "$flags" -- "$cur"))
	elif [[ -n "$subcommands" ]]; then
		COMPREPLY=($(compgen -W "$subcommands" -- "$cur"))
	fi
	return 0
}
`)
	fmt.Fprintf(&b, "complete -o default -F %s %s\n", fn, app.Name)
	return b.String()
}

// zshQuote quotes s as one single-quoted zsh word.
func zshQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// describe is one _describe entry, NAME:DESCRIPTION, its first line only.
func describe(name, usage string) string {
	usage, _, _ = strings.Cut(usage, "\n")
	return zshQuote(strings.ReplaceAll(name, ":", `\:`) + ":" + usage)
}

// Zsh returns a zsh completion script for app, both an autoloaded
// function file (_NAME in $fpath, found through its #compdef line) and a
// script to source after compinit.
func Zsh(app *cli.App) string {
	ns := nodes(app)
	files, others := flagSets(ns)
	fn := funcName(app)
	var b strings.Builder
	fmt.Fprintf(&b, "#compdef %s\n", app.Name)
	fmt.Fprintf(&b, "# zsh completion for %s, generated from its command tree.\n", app.Name)
	fmt.Fprintf(&b, "# Install it as _%s in a directory of $fpath, or load it after compinit with:\n#   source <(%s completion zsh)\n\n", app.Name, app.Name)
	fmt.Fprintf(&b, "%s() {\n", fn)
	b.WriteString(`	local cmdpath="" word i
	local -a subcommands flags
	for (( i = 2; i < CURRENT; i++ )); do
		word=${words[i]}
		case $word in
		(--) _files; return ;;
`)
	if vals := append(append([]string{}, files...), others...); len(vals) > 0 {
		fmt.Fprintf(&b, "\t\t(%s) (( i++ )); continue ;;\n", strings.Join(vals, "|"))
	}
	b.WriteString("\t\tesac\n\t\tcase \"$cmdpath/$word\" in\n")
	pathArms(&b, ns, "\t\t", "(", "")
	b.WriteString("\t\tesac\n\tdone\n\tcase ${words[CURRENT-1]} in\n")
	if len(files) > 0 {
		fmt.Fprintf(&b, "\t(%s) _files; return ;;\n", strings.Join(files, "|"))
	}
	if len(others) > 0 {
		fmt.Fprintf(&b, "\t(%s) return 1 ;;\n", strings.Join(others, "|"))
	}
	b.WriteString("\tesac\n\tcase $cmdpath in\n")
	for _, n := range ns {
		var subs, flags []string
		for _, c := range n.subs {
			for _, w := range safe(words(c)) {
				subs = append(subs, describe(w, c.Usage))
			}
		}
		for _, f := range n.flags {
			_, usage := placeholder(f)
			for _, s := range safe(spellings(f)) {
				flags = append(flags, describe(s, usage))
			}
		}
		fmt.Fprintf(&b, "\t(\"%s\")\n\t\tsubcommands=(%s)\n\t\tflags=(%s) ;;\n", shellPath(n), strings.Join(subs, " "), strings.Join(flags, " "))
	}
	b.WriteString(`	esac
	if [[ ${words[CURRENT]} == -* ]]; then
		_describe -t options option flags
	elif (( ${#subcommands} )); then
		_describe -t commands command subcommands
	else
		_files
	fi
}

`)
	fmt.Fprintf(&b, "if [[ ${funcstack[1]} == _%s ]]; then\n\t%s \"$@\"\nelse\n\tcompdef %s %s\nfi\n", app.Name, fn, fn, app.Name)
	return b.String()
}

// Fish returns urfave/cli's fish completion of app, written from the same
// tree.
func Fish(app *cli.App) (string, error) {
	s, err := app.ToFishCompletion()
	if err != nil {
		return "", fmt.Errorf("writing the fish completion: %w", err)
	}
	return s, nil
}
