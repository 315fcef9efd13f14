package clidoc

import (
	"strings"

	"github.com/urfave/cli/v2"
)

// node is one visible command of the tree: the program itself at path
// "" and each command at the space-separated names leading to it.
type node struct {
	path  string
	cmd   *cli.Command // nil for the program
	subs  []*cli.Command
	flags []cli.Flag // visible flags, --help included
}

// words are the spellings that select the command: name and aliases.
func words(c *cli.Command) []string { return c.Names() }

// nodes returns every visible command of app, parents before children.
func nodes(app *cli.App) []node {
	root := node{subs: visibleCommands(app.Commands), flags: visibleFlags(app.Flags)}
	if !app.HideHelp {
		root.flags = append(root.flags, cli.HelpFlag)
	}
	if !app.HideVersion {
		root.flags = append(root.flags, cli.VersionFlag)
	}
	out := []node{root}
	var walk func(prefix string, cmds []*cli.Command)
	walk = func(prefix string, cmds []*cli.Command) {
		for _, c := range cmds {
			n := node{path: strings.TrimSpace(prefix + " " + c.Name), cmd: c, subs: visibleCommands(c.Subcommands), flags: visibleFlags(c.Flags)}
			if !c.HideHelp && !app.HideHelp {
				n.flags = append(n.flags, cli.HelpFlag)
			}
			out = append(out, n)
			walk(n.path, n.subs)
		}
	}
	walk("", root.subs)
	return out
}

// visibleCommands are the commands not hidden, and whose name a script
// can write unquoted (the others, with their subcommands, are left out).
func visibleCommands(cmds []*cli.Command) []*cli.Command {
	var out []*cli.Command
	for _, c := range cmds {
		if !c.Hidden && word.MatchString(c.Name) {
			out = append(out, c)
		}
	}
	return out
}

func visibleFlags(flags []cli.Flag) []cli.Flag {
	var out []cli.Flag
	for _, f := range flags {
		if v, ok := f.(cli.VisibleFlag); ok && !v.IsVisible() {
			continue
		}
		out = append(out, f)
	}
	return out
}

// spellings are a flag's command-line forms: --name, -n.
func spellings(f cli.Flag) []string {
	var out []string
	for _, n := range f.Names() {
		if len(n) == 1 {
			out = append(out, "-"+n)
		} else {
			out = append(out, "--"+n)
		}
	}
	return out
}

// takesValue reports whether a flag consumes the next word.
func takesValue(f cli.Flag) bool {
	d, ok := f.(cli.DocGenerationFlag)
	return ok && d.TakesValue()
}

// takesFile reports whether a flag's value is a path: it says so
// (TakesFile) or its usage names the value FILE or DIR.
func takesFile(f cli.Flag) bool {
	switch x := f.(type) {
	case *cli.StringFlag:
		if x.TakesFile {
			return true
		}
	case *cli.PathFlag:
		return true
	case *cli.GenericFlag:
		if x.TakesFile {
			return true
		}
	}
	name, _ := placeholder(f)
	return name == "FILE" || name == "DIR"
}

// placeholder returns the value name of a flag (the usage's `NAME`, else
// VALUE for a flag that takes one) and its usage without the back-quotes.
func placeholder(f cli.Flag) (string, string) {
	d, ok := f.(cli.DocGenerationFlag)
	if !ok {
		return "", ""
	}
	usage := d.GetUsage()
	if i := strings.IndexByte(usage, '`'); i >= 0 {
		if j := strings.IndexByte(usage[i+1:], '`'); j >= 0 {
			name := usage[i+1 : i+1+j]
			return name, usage[:i] + name + usage[i+1+j+1:]
		}
	}
	if d.TakesValue() {
		return "VALUE", usage
	}
	return "", usage
}
