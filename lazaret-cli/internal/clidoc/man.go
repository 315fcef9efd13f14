package clidoc

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"
)

// Page is one man page of section 1.
type Page struct {
	// Name is the file name, such as lazaret-cli-image.1.
	Name string
	// Text is the roff source.
	Text string
}

// Pages returns the man pages of app: NAME.1 for the program, listing
// every command, and NAME-COMMAND.1 for each visible top-level command
// with its subcommands and every flag. Pages carry no date or version,
// so the same tree always gives the same bytes.
func Pages(app *cli.App) []Page {
	ns := nodes(app)
	root := ns[0]
	pages := []Page{{Name: app.Name + ".1", Text: programPage(app, ns)}}
	for _, c := range root.subs {
		pages = append(pages, Page{Name: app.Name + "-" + c.Name + ".1", Text: commandPage(app, ns, c)})
	}
	return pages
}

// escape makes text safe in roff: backslashes are printed, minus signs
// stay minus signs (so a copied flag works), and no line begins with a
// control character.
func escape(s string) string {
	s = strings.ReplaceAll(s, `\`, `\e`)
	s = strings.ReplaceAll(s, "-", `\-`)
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, ".") || strings.HasPrefix(l, "'") {
			lines[i] = `\&` + l
		}
	}
	return strings.Join(lines, "\n")
}

// paragraphs writes text as roff paragraphs, a blank line starting a new
// one.
func paragraphs(b *strings.Builder, text string) {
	for i, p := range strings.Split(strings.TrimSpace(text), "\n\n") {
		if i > 0 {
			b.WriteString(".PP\n")
		}
		b.WriteString(escape(strings.TrimSpace(p)) + "\n")
	}
}

func header(b *strings.Builder, app *cli.App, name, usage string) {
	fmt.Fprintf(b, ".TH \"%s\" \"1\" \"\" \"%s\" \"User Commands\"\n", strings.ToUpper(escape(name)), escape(app.Name))
	fmt.Fprintf(b, ".SH NAME\n%s \\- %s\n", escape(name), escape(firstLine(usage)))
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

func programPage(app *cli.App, ns []node) string {
	var b strings.Builder
	header(&b, app, app.Name, app.Usage)
	fmt.Fprintf(&b, ".SH SYNOPSIS\n.B %s\n\\fICOMMAND\\fR [\\fIOPTIONS\\fR] [\\fIARGUMENTS\\fR]\n", escape(app.Name))
	b.WriteString(".SH DESCRIPTION\n")
	desc := app.Description
	if desc == "" {
		desc = sentence(app.Usage)
	}
	paragraphs(&b, desc)
	b.WriteString(".PP\nEach command's options are in its own page, named in SEE ALSO.\n")
	b.WriteString(".SH COMMANDS\n")
	for _, n := range ns[1:] {
		fmt.Fprintf(&b, ".TP\n\\fB%s %s\\fR", escape(app.Name), escape(n.path))
		if n.cmd.ArgsUsage != "" {
			fmt.Fprintf(&b, " %s", escape(n.cmd.ArgsUsage))
		}
		fmt.Fprintf(&b, "\n%s\n", escape(firstLine(n.cmd.Usage)))
	}
	options(&b, ".SH OPTIONS\n", ns[0].flags)
	b.WriteString(".SH SEE ALSO\n")
	var refs []string
	for _, c := range ns[0].subs {
		refs = append(refs, fmt.Sprintf(".BR %s (1)", escape(app.Name+"-"+c.Name)))
	}
	b.WriteString(strings.Join(refs, ",\n") + "\n")
	return b.String()
}

func commandPage(app *cli.App, ns []node, top *cli.Command) string {
	var b strings.Builder
	header(&b, app, app.Name+"-"+top.Name, top.Usage)
	b.WriteString(".SH SYNOPSIS\n")
	for _, n := range ns[1:] {
		if n.path != top.Name && !strings.HasPrefix(n.path, top.Name+" ") {
			continue
		}
		if len(n.subs) > 0 && n.cmd.Action == nil {
			continue
		}
		fmt.Fprintf(&b, ".B %s %s\n[\\fIOPTIONS\\fR]", escape(app.Name), escape(n.path))
		if n.cmd.ArgsUsage != "" {
			fmt.Fprintf(&b, " %s", escape(n.cmd.ArgsUsage))
		}
		b.WriteString("\n.br\n")
	}
	for _, n := range ns[1:] {
		switch {
		case n.path == top.Name:
			b.WriteString(".SH DESCRIPTION\n")
			paragraphs(&b, sentence(top.Usage))
			if top.Description != "" {
				b.WriteString(".PP\n")
				paragraphs(&b, top.Description)
			}
			if len(n.subs) > 0 {
				var names []string
				for _, c := range n.subs {
					names = append(names, c.Name)
				}
				fmt.Fprintf(&b, ".PP\nCommands: %s.\n", escape(strings.Join(names, ", ")))
			}
			options(&b, ".SH OPTIONS\n", n.flags)
		case strings.HasPrefix(n.path, top.Name+" "):
			if n.path == top.Name+" "+n.cmd.Name && !strings.Contains(b.String(), ".SH COMMANDS\n") {
				b.WriteString(".SH COMMANDS\n")
			}
			fmt.Fprintf(&b, ".SS \"%s %s", escape(app.Name), escape(n.path))
			if n.cmd.ArgsUsage != "" {
				fmt.Fprintf(&b, " %s", strings.ReplaceAll(escape(n.cmd.ArgsUsage), `"`, `\(dq`))
			}
			b.WriteString("\"\n")
			paragraphs(&b, sentence(n.cmd.Usage))
			if len(n.cmd.Aliases) > 0 {
				fmt.Fprintf(&b, ".PP\nAlso spelled: %s.\n", escape(strings.Join(n.cmd.Aliases, ", ")))
			}
			if n.cmd.Description != "" {
				b.WriteString(".PP\n")
				paragraphs(&b, n.cmd.Description)
			}
			options(&b, ".PP\nOptions:\n", n.flags)
		}
	}
	fmt.Fprintf(&b, ".SH SEE ALSO\n.BR %s (1)\n", escape(app.Name))
	return b.String()
}

// options writes one tagged paragraph per flag after heading.
func options(b *strings.Builder, heading string, flags []cli.Flag) {
	if len(flags) == 0 {
		return
	}
	b.WriteString(heading)
	for _, f := range flags {
		name, usage := placeholder(f)
		var spelled []string
		for _, s := range spellings(f) {
			spelled = append(spelled, `\fB`+escape(s)+`\fR`)
		}
		fmt.Fprintf(b, ".TP\n%s", strings.Join(spelled, ", "))
		if name != "" {
			fmt.Fprintf(b, " \\fI%s\\fR", escape(name))
		}
		b.WriteString("\n")
		if d, ok := f.(cli.DocGenerationFlag); ok && d.TakesValue() {
			if v := d.GetDefaultText(); v != "" {
				usage += " (default: " + v + ")"
			} else if v := d.GetValue(); v != "" && v != `""` {
				usage += " (default: " + v + ")"
			}
		}
		if r, ok := f.(cli.RequiredFlag); ok && r.IsRequired() {
			usage += " (required)"
		}
		b.WriteString(escape(usage) + "\n")
	}
}

// sentence makes a usage line a sentence: capital first letter, final
// full stop.
func sentence(s string) string {
	if s == "" {
		return s
	}
	if c := s[0]; 'a' <= c && c <= 'z' {
		s = string(c-'a'+'A') + s[1:]
	}
	if !strings.HasSuffix(s, ".") {
		s += "."
	}
	return s
}
