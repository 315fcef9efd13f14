// Command lazaret-guest is the in-sandbox client of host escalation: it asks
// the host to run an exact command, installs wrappers that do so for a
// command name, and serves as the sandbox container's init process.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/urfave/cli/v2"

	"lazaret.dev/lazaret-guest/internal/guest"
	"lazaret.dev/pkg/cmdmain"
	"lazaret.dev/pkg/mailbox"
)

func main() {
	cmdmain.Run(&cli.App{
		Name:     "lazaret-guest",
		Usage:    "ask the host to run an exact command (inside a Lazaret sandbox)",
		Commands: []*cli.Command{runCommand, shimCommand, initCommand},
	})
}

var runCommand = &cli.Command{
	Name:      "run",
	Usage:     "ask the host to run /abs/path with ARGS and print its output",
	ArgsUsage: "-- /abs/path [ARGS...]",
	Flags: []cli.Flag{
		&cli.StringFlag{Name: "justification", Usage: "why the command is needed (shown to the developer)"},
	},
	Action: run,
}

var shimCommand = &cli.Command{
	Name:  "shim",
	Usage: "manage wrappers that route a command name to the host",
	Subcommands: []*cli.Command{{
		Name:      "install",
		Usage:     "write wrappers NAME (to --host-dir/NAME) or NAME=/abs/host/path",
		ArgsUsage: "NAME[=/abs/host/path]...",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "dir", Value: guest.DefaultShimDir, Usage: "directory to write the wrappers to"},
			&cli.StringFlag{Name: "host-dir", Value: guest.DefaultHostDir, Usage: "host directory of a bare NAME"},
			&cli.StringFlag{Name: "guest", Value: guest.DefaultGuestPath, Usage: "path of lazaret-guest inside the sandbox"},
		},
		Action: shimInstall,
	}},
}

var initCommand = &cli.Command{
	Name:   "init",
	Usage:  "run as the sandbox container's init: announce it on stdout, reap children until SIGTERM",
	Action: func(c *cli.Context) error { return guest.Init(c.Context, os.Stdout) },
}

func run(c *cli.Context) error {
	argv := c.Args().Slice()
	if len(argv) == 0 {
		return cli.Exit("lazaret-guest: run needs the host command: lazaret-guest run -- /abs/path [ARGS...]", guest.ExitGuestError)
	}
	interrupt := make(chan os.Signal, 2)
	signal.Notify(interrupt, syscall.SIGINT)
	defer signal.Stop(interrupt)
	code, err := guest.Run(c.Context, guest.RunOptions{
		Argv:          argv,
		Justification: c.String("justification"),
		BundlePath:    envOr(mailbox.EnvCredentialBundle, mailbox.DefaultCredentialBundle),
		Capability:    os.Getenv(mailbox.EnvCapability),
		Mailbox:       envOr(mailbox.EnvMailbox, mailbox.SandboxPath),
		Stdout:        os.Stdout,
		Stderr:        os.Stderr,
		Interrupt:     interrupt,
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "lazaret-guest: %v\n", err)
	}
	if code != 0 {
		return &cmdmain.ExitError{Code: code}
	}
	return nil
}

func shimInstall(c *cli.Context) error {
	if c.NArg() == 0 {
		return fmt.Errorf("shim install needs at least one NAME")
	}
	var shims []guest.Shim
	for _, spec := range c.Args().Slice() {
		s, err := guest.ParseShim(spec, c.String("host-dir"))
		if err != nil {
			return err
		}
		shims = append(shims, s)
	}
	return guest.InstallShims(c.String("dir"), c.String("guest"), shims)
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
