package handoff

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// FirstFD is the descriptor of a child's first inherited file: os/exec
// hands ExtraFiles[i] to the child as descriptor 3+i, after stdio.
const FirstFD = 3

// Errors of a hand-off.
var (
	// ErrArgs means a command line does not follow its Layout.
	ErrArgs = errors.New("command line does not match its hand-off")
	// ErrFiles means a descriptor of the Layout is missing: not given
	// by the parent, or not open in the child.
	ErrFiles = errors.New("hand-off descriptor missing")
)

// Flag is one flag of a child's command line.
type Flag struct {
	// Name is the flag without its leading "--".
	Name string
	// Switch makes the flag take no value: present or absent.
	Switch bool
	// Required makes Argv and Parse refuse a command line without it.
	Required bool
}

// Layout is the contract of one parent-to-child hand-off.
type Layout struct {
	// Child names the child in errors ("lazaret-coordinator serve").
	Child string
	// Command are the words before the flags (a subcommand), which
	// Argv writes and Parse does not see.
	Command []string
	// Flags are the flags the child accepts, in the order Argv writes
	// them.
	Flags []Flag
	// Files name the inherited descriptors: Files[i] is descriptor
	// FirstFD+i.
	Files []string
	// Trailing makes the command line end in "--" and free arguments
	// (the argv of a program the child runs).
	Trailing bool
}

// Values are a command line's flags by name. A value flag is rendered
// when present in the map, even empty; a switch is rendered when its value
// is "true" and Parse sets it so.
type Values map[string]string

// Argv is the child's command line after its executable: Command, each
// flag of v in Flags order as "--name value" ("--name" for a switch), then,
// when Trailing, "--" and trailing.
func (l *Layout) Argv(v Values, trailing []string) ([]string, error) {
	for name := range v {
		if l.flag(name) == nil {
			return nil, l.errorf(ErrArgs, "--%s is not a flag of this command", name)
		}
	}
	if len(trailing) > 0 && !l.Trailing {
		return nil, l.errorf(ErrArgs, "takes no arguments after its flags")
	}
	argv := append([]string{}, l.Command...)
	for _, f := range l.Flags {
		val, ok := v[f.Name]
		switch {
		case !ok && f.Required:
			return nil, l.errorf(ErrArgs, "--%s is missing", f.Name)
		case !ok:
		case f.Switch && val == "true":
			argv = append(argv, "--"+f.Name)
		case f.Switch:
			return nil, l.errorf(ErrArgs, "switch --%s has the value %q", f.Name, val)
		default:
			argv = append(argv, "--"+f.Name, val)
		}
	}
	if l.Trailing {
		argv = append(append(argv, "--"), trailing...)
	}
	return argv, nil
}

// Parse is the inverse of Argv for what follows Command: it returns the
// flags and, when Trailing, what follows "--". An unknown, repeated or
// valueless flag, a missing required one, or a stray argument is an
// ErrArgs naming it.
func (l *Layout) Parse(args []string) (Values, []string, error) {
	v := Values{}
	i := 0
	for ; i < len(args); i++ {
		a := args[i]
		if a == "--" && l.Trailing {
			i++
			break
		}
		name, ok := strings.CutPrefix(a, "--")
		f := l.flag(name)
		switch {
		case !ok || name == "":
			return nil, nil, l.errorf(ErrArgs, "unexpected argument %q", a)
		case f == nil:
			return nil, nil, l.errorf(ErrArgs, "unknown flag %q", a)
		}
		if _, dup := v[name]; dup {
			return nil, nil, l.errorf(ErrArgs, "--%s is given twice", name)
		}
		if f.Switch {
			v[name] = "true"
			continue
		}
		if i+1 >= len(args) {
			return nil, nil, l.errorf(ErrArgs, "--%s has no value", name)
		}
		i++
		v[name] = args[i]
	}
	for _, f := range l.Flags {
		if _, ok := v[f.Name]; f.Required && !ok {
			return nil, nil, l.errorf(ErrArgs, "--%s is missing", f.Name)
		}
	}
	var trailing []string
	if l.Trailing {
		trailing = append([]string{}, args[i:]...)
	}
	return v, trailing, nil
}

// FD is the descriptor the child inherits name as. It panics for a name
// outside Files: that is a mistake in the program, not in its input.
func (l *Layout) FD(name string) int {
	for i, n := range l.Files {
		if n == name {
			return FirstFD + i
		}
	}
	panic(fmt.Sprintf("handoff: %s has no descriptor %q", l.Child, name))
}

// NextFD is the first descriptor after Files: where files appended to
// ExtraFiles beyond the Layout's own start.
func (l *Layout) NextFD() int { return FirstFD + len(l.Files) }

// ExtraFiles is exec.Cmd.ExtraFiles for the child: the files by name in
// Files order, then extra, which the child gets from NextFD on. A name of
// Files without a file, or a file under a name outside Files, is an error
// naming it.
func (l *Layout) ExtraFiles(files map[string]*os.File, extra ...*os.File) ([]*os.File, error) {
	for name := range files {
		if !l.hasFile(name) {
			return nil, l.errorf(ErrFiles, "%q is not a descriptor of this command", name)
		}
	}
	out := make([]*os.File, 0, len(l.Files)+len(extra))
	for i, name := range l.Files {
		f := files[name]
		if f == nil {
			return nil, l.errorf(ErrFiles, "descriptor %d (%s) is not given", FirstFD+i, name)
		}
		out = append(out, f)
	}
	return append(out, extra...), nil
}

// Parent is the typed form of a hand-off on the parent's side
// (gitroute.DaemonArgs, supervise.Gate, ...).
type Parent interface {
	// Argv is the child's command line after its executable.
	Argv() ([]string, error)
	// ExtraFiles is exec.Cmd.ExtraFiles for the child.
	ExtraFiles() ([]*os.File, error)
}

// Render is what a parent starts the child with: p's Argv and
// ExtraFiles, or the first error of the two.
func Render(p Parent) ([]string, []*os.File, error) {
	argv, err := p.Argv()
	if err != nil {
		return nil, nil, err
	}
	files, err := p.ExtraFiles()
	if err != nil {
		return nil, nil, err
	}
	return argv, files, nil
}

// Inherit takes the descriptors of Files in the child: it checks each is
// open, marks it close-on-exec (a descriptor handed to this process is not
// handed on by accident) and returns it by name, named as in Files. A
// descriptor that is not open is an ErrFiles naming it; then no file is
// returned.
func (l *Layout) Inherit() (map[string]*os.File, error) {
	for i, name := range l.Files {
		if _, err := unix.FcntlInt(uintptr(FirstFD+i), unix.F_GETFD, 0); err != nil {
			return nil, l.errorf(ErrFiles, "descriptor %d (%s) is not open", FirstFD+i, name)
		}
	}
	files := make(map[string]*os.File, len(l.Files))
	for i, name := range l.Files {
		fd := FirstFD + i
		unix.CloseOnExec(fd)
		files[name] = os.NewFile(uintptr(fd), name)
	}
	return files, nil
}

// Usage lists the flags for a command's help text.
func (l *Layout) Usage() string {
	var b strings.Builder
	for i, f := range l.Flags {
		if i > 0 {
			b.WriteByte(' ')
		}
		s := "--" + f.Name
		if !f.Switch {
			s += " " + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		}
		if !f.Required {
			s = "[" + s + "]"
		}
		b.WriteString(s)
	}
	if l.Trailing {
		b.WriteString(" -- PROGRAM [ARGS...]")
	}
	for i, name := range l.Files {
		fmt.Fprintf(&b, "; fd %d: %s", FirstFD+i, name)
	}
	return b.String()
}

func (l *Layout) flag(name string) *Flag {
	for i := range l.Flags {
		if l.Flags[i].Name == name {
			return &l.Flags[i]
		}
	}
	return nil
}

func (l *Layout) hasFile(name string) bool {
	for _, n := range l.Files {
		if n == name {
			return true
		}
	}
	return false
}

func (l *Layout) errorf(class error, format string, args ...any) error {
	return fmt.Errorf("%s: %s: %w", l.Child, fmt.Sprintf(format, args...), class)
}
