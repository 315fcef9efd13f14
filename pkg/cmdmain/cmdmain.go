// Package cmdmain holds what a Lazaret binary with a command-line interface
// (lazaret-cli, lazaret-guest) does before and after its own work: process
// hardening, the --version answer, signal-aware contexts and the mapping of
// errors to exit codes, around a urfave/cli application. It keeps each
// main.go to flag parsing and dependency wiring. The helper binaries, whose
// command lines are hand-offs, use package helpermain instead, which does
// the same without linking urfave/cli.
package cmdmain

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/urfave/cli/v2"

	"lazaret.dev/pkg/buildinfo"
	"lazaret.dev/pkg/helpermain"
)

// ExitError carries an exit code out of a command without printing anything
// more: the command has already told the user what went wrong. It is the
// helpers' type (package helpermain), so that code shared by the CLI and a
// helper exits the same way under both.
type ExitError = helpermain.ExitError

// Harden applies the per-process protections of every Lazaret host process
// (helpermain.Harden).
func Harden() error { return helpermain.Harden() }

// Run executes app with the process arguments and exits. Errors are printed
// as one line on stderr prefixed with the binary name; an *ExitError exits
// silently with its code.
func Run(app *cli.App) {
	os.Exit(run(app, os.Args, os.Stderr))
}

// Main runs a small tool that has neither flags nor subcommands, and exits
// with what its error maps to, as Run does: an error is printed as one
// line on stderr prefixed with name, and an *ExitError exits silently with
// its code.
func Main(name string, run func() error) {
	if code := exitCode(name, run(), os.Stderr); code != 0 {
		os.Exit(code)
	}
}

func run(app *cli.App, args []string, stderr io.Writer) int {
	name := app.Name
	app.Version = buildinfo.Version()
	app.HideVersion = false
	cli.VersionPrinter = func(c *cli.Context) {
		fmt.Fprintln(c.App.Writer, buildinfo.String(c.App.Name))
	}
	app.ExitErrHandler = func(*cli.Context, error) {}
	if err := Harden(); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	return exitCode(name, app.RunContext(ctx, args), stderr)
}

// exitCode maps the error a command returned to its exit code as
// helpermain.Exit does, and also honours urfave/cli's exit codes.
func exitCode(name string, err error, stderr io.Writer) int {
	code := helpermain.Exit(name, err, stderr)
	var ee *ExitError
	var ce cli.ExitCoder
	if code == 1 && !errors.As(err, &ee) && errors.As(err, &ce) && ce.ExitCode() != 0 {
		return ce.ExitCode()
	}
	return code
}

// Handoff is a subcommand whose command line is a parent's hand-off
// (package handoff): urfave/cli leaves it unparsed, and run receives the
// arguments after the subcommand's name, to parse with the one layout
// the parent renders them with. argsUsage is that layout's Usage.
func Handoff(name, usage, argsUsage string, run func(ctx context.Context, args []string) error) *cli.Command {
	return &cli.Command{
		Name: name, Usage: usage, ArgsUsage: argsUsage,
		SkipFlagParsing: true,
		Action:          func(c *cli.Context) error { return run(c.Context, c.Args().Slice()) },
	}
}
