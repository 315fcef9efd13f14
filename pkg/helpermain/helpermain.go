// Package helpermain is the main of a helper binary: the processes a
// Domain keeps running beside its sandbox (lazaret-coordinator,
// lazaret-anchor, lazaret-gitroute, lazaret-netsidecar,
// lazaret-supervisor). It does what package cmdmain does for the CLI
// (process hardening, the --version answer, a context that SIGTERM
// cancels, errors mapped to exit codes) without a flag parser: a helper's
// command lines are hand-offs its parent renders and package handoff
// parses, so all a helper needs here is to pick a subcommand. Not linking
// urfave/cli (and the template engine, markdown renderer and string
// metrics it brings) keeps about 2 MiB of text and data out of each
// helper's resident memory; docs/OPERATIONS.md ("Memory of a Domain's
// helpers") has the figures.
package helpermain

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"lazaret.dev/pkg/buildinfo"
)

// ExitError carries an exit code out of a command without printing anything
// more: the command has already told the user what went wrong.
type ExitError struct{ Code int }

func (e *ExitError) Error() string { return fmt.Sprintf("exit status %d", e.Code) }

// ExitUsage is the exit code of a command line the helper does not
// accept (an unknown subcommand, arguments to a helper that takes none).
const ExitUsage = 2

// Harden applies the per-process protections of every Lazaret host process.
// A same-user process must not read a Lazaret process's memory or
// environment (hosts may lack Yama), so the process is made non-dumpable.
func Harden() error {
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("setting PR_SET_DUMPABLE=0: %w", err)
	}
	return nil
}

// Command is one subcommand of a helper. Its arguments (everything after
// its name) reach Run unparsed, for the hand-off layout that defines them.
type Command struct {
	Name string
	// Usage is one line saying what the command does; ArgsUsage is its
	// layout's Usage.
	Usage, ArgsUsage string
	// Hidden leaves the command out of the helper's help.
	Hidden bool
	Run    func(ctx context.Context, args []string) error
}

// Helper is one helper binary: either Commands, or Run for a helper
// without subcommands (which then receives every argument).
type Helper struct {
	Name string
	// Usage is one line saying what the helper is; ArgsUsage is the
	// layout's Usage of a helper without subcommands.
	Usage, ArgsUsage string
	Commands         []Command
	Run              func(ctx context.Context, args []string) error
	// Runtime is applied before the command runs.
	Runtime Runtime
}

// Main runs h with the process arguments and exits with the code its
// error maps to.
func Main(h Helper) {
	os.Exit(h.main(os.Args[1:], os.Stdout, os.Stderr))
}

// errUsage is a command line the helper does not accept.
var errUsage = errors.New("usage")

// main answers --version and --help (as the only argument, to the helper
// or to one of its commands), else hardens the process, applies the
// runtime settings and runs the command under a context that SIGTERM
// cancels.
func (h Helper) main(args []string, stdout, stderr io.Writer) int {
	run, rest, help, err := h.pick(args)
	switch {
	case errors.Is(err, errUsage):
		fmt.Fprintf(stderr, "%s: %v (see %s --help)\n", h.Name, err, h.Name)
		return ExitUsage
	case err != nil:
		return Exit(h.Name, err, stderr)
	case help != "":
		fmt.Fprint(stdout, help)
		return 0
	}
	if err := Harden(); err != nil {
		return Exit(h.Name, err, stderr)
	}
	if err := h.Runtime.apply(os.LookupEnv); err != nil {
		return Exit(h.Name, err, stderr)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	return Exit(h.Name, run(ctx, rest), stderr)
}

// pick finds what args ask for: the text of --version or --help, or the
// function to run and its arguments.
func (h Helper) pick(args []string) (run func(context.Context, []string) error, rest []string, text string, err error) {
	if len(args) == 1 {
		switch args[0] {
		case "--version", "-v":
			return nil, nil, buildinfo.String(h.Name) + "\n", nil
		case "--help", "-h", "help":
			return nil, nil, h.help(), nil
		}
	}
	if h.Run != nil {
		return h.Run, args, "", nil
	}
	if len(args) == 0 {
		return nil, nil, "", fmt.Errorf("%w: a command is needed (%s)", errUsage, h.names())
	}
	for _, c := range h.Commands {
		if c.Name != args[0] {
			continue
		}
		if len(args) == 2 && (args[1] == "--help" || args[1] == "-h") {
			return nil, nil, c.help(h.Name), nil
		}
		return c.Run, args[1:], "", nil
	}
	return nil, nil, "", fmt.Errorf("%w: unknown command %q (%s)", errUsage, args[0], h.names())
}

// names lists the visible commands.
func (h Helper) names() string {
	var n []string
	for _, c := range h.Commands {
		if !c.Hidden {
			n = append(n, c.Name)
		}
	}
	return "commands: " + strings.Join(n, ", ")
}

func (h Helper) help() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s - %s\n\n", h.Name, h.Usage)
	if h.Run != nil {
		fmt.Fprintf(&b, "usage: %s %s\n", h.Name, h.ArgsUsage)
	} else {
		fmt.Fprintf(&b, "usage: %s COMMAND ARGS...\n\ncommands:\n", h.Name)
		for _, c := range h.Commands {
			if !c.Hidden {
				fmt.Fprintf(&b, "  %s  %s\n", c.Name, c.Usage)
			}
		}
	}
	fmt.Fprintf(&b, "\n%s --version prints the version; the command lines are hand-offs from the helper's parent.\n", h.Name)
	return b.String()
}

func (c Command) help(helper string) string {
	return fmt.Sprintf("%s %s - %s\n\nusage: %s %s %s\n", helper, c.Name, c.Usage, helper, c.Name, c.ArgsUsage)
}

// Exit maps the error a command returned to its exit code, printing it on
// stderr as one line prefixed with name unless it is an *ExitError.
func Exit(name string, err error, stderr io.Writer) int {
	if err == nil {
		return 0
	}
	var ee *ExitError
	if errors.As(err, &ee) {
		return ee.Code
	}
	fmt.Fprintf(stderr, "%s: %v\n", name, err)
	return 1
}
