// Command lazaret-gitroute serves the /workspace view that routes git-ignored paths to a per-Domain isolated root.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/urfave/cli/v2"

	"lazaret.dev/lazaret-gitroute/internal/daemon"
	"lazaret.dev/pkg/cmdmain"
)

func main() {
	cmdmain.Run(&cli.App{
		Name:            "lazaret-gitroute",
		Usage:           "workspace view daemon (started by lazaret-coordinator with its control socket as fd 3)",
		HideHelpCommand: true,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "host-root", Usage: "the workspace (git top level)", Required: true},
			&cli.StringFlag{Name: "isolated-root", Usage: "the Domain's isolated root for git-ignored paths", Required: true},
			&cli.StringFlag{Name: "mountpoint", Usage: "where to mount the view", Required: true},
			&cli.StringFlag{Name: "mount-method", Usage: "auto, fusermount or direct (root only)", Value: string(daemon.MountAuto)},
			&cli.StringFlag{Name: "keep-isolated", Usage: "keep `FILE`: paths routed to the isolated root whatever the classification says"},
			&cli.StringFlag{Name: "isolation-report", Usage: "create `FILE` listing the host entries that route to the isolated root, before Ready"},
		},
		Action: func(c *cli.Context) error {
			method, err := daemon.ParseMountMethod(c.String("mount-method"))
			if err != nil {
				return err
			}
			return run(c.Context, daemon.Config{
				HostRoot:        c.String("host-root"),
				IsolatedRoot:    c.String("isolated-root"),
				Mountpoint:      c.String("mountpoint"),
				Method:          method,
				Control:         os.NewFile(3, "control"),
				Log:             slog.New(slog.NewTextHandler(os.Stderr, nil)),
				Home:            os.Getenv("HOME"),
				XDGConfigHome:   os.Getenv("XDG_CONFIG_HOME"),
				KeepIsolated:    c.String("keep-isolated"),
				IsolationReport: c.String("isolation-report"),
			})
		},
	})
}

func run(ctx context.Context, cfg daemon.Config) error { return daemon.Run(ctx, cfg) }
