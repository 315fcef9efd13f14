// Command lazaret-gitroute serves the /workspace view that routes git-ignored paths to a per-Domain isolated root.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/urfave/cli/v2"

	"lazaret.dev/lazaret-gitroute/internal/daemon"
	"lazaret.dev/pkg/cmdmain"
	"lazaret.dev/pkg/gitroute"
)

func main() {
	cmdmain.Run(&cli.App{
		Name:            "lazaret-gitroute",
		Usage:           "workspace view daemon (started by lazaret-coordinator)",
		UsageText:       "lazaret-gitroute " + gitroute.DaemonLayout.Usage(),
		HideHelpCommand: true,
		// The command line and the control socket are the parent's
		// hand-off (gitroute.DaemonArgs), parsed by the one definition
		// both use; only --version and --help are this command's own.
		SkipFlagParsing: true,
		Action: func(c *cli.Context) error {
			args := c.Args().Slice()
			if len(args) == 1 {
				switch args[0] {
				case "--version", "-v":
					cli.ShowVersion(c)
					return nil
				case "--help", "-h":
					return cli.ShowAppHelp(c)
				}
			}
			hand, err := gitroute.ParseDaemonArgs(args)
			if err != nil {
				return err
			}
			method := daemon.MountAuto
			if hand.MountMethod != "" {
				if method, err = daemon.ParseMountMethod(hand.MountMethod); err != nil {
					return err
				}
			}
			if err := hand.Inherit(); err != nil {
				return err
			}
			return run(c.Context, daemon.Config{
				HostRoot:        hand.HostRoot,
				IsolatedRoot:    hand.IsolatedRoot,
				Mountpoint:      hand.Mountpoint,
				Method:          method,
				Control:         hand.Control,
				Log:             slog.New(slog.NewTextHandler(os.Stderr, nil)),
				Home:            os.Getenv("HOME"),
				XDGConfigHome:   os.Getenv("XDG_CONFIG_HOME"),
				KeepIsolated:    hand.KeepIsolated,
				IsolationReport: hand.IsolationReport,
			})
		},
	})
}

func run(ctx context.Context, cfg daemon.Config) error { return daemon.Run(ctx, cfg) }
