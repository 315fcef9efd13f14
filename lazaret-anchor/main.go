// Command lazaret-anchor is the State Anchor: it holds a generation's user and mount namespaces and its overlay root filesystem.
package main

import (
	"log/slog"
	"os"

	"github.com/urfave/cli/v2"

	"lazaret.dev/lazaret-anchor/internal/daemon"
	"lazaret.dev/pkg/anchor"
	"lazaret.dev/pkg/cmdmain"
)

func main() {
	cmdmain.Run(&cli.App{
		Name:  "lazaret-anchor",
		Usage: "State Anchor of one generation (started by lazaret-coordinator)",
		Commands: []*cli.Command{{
			Name:  "serve",
			Usage: "hold the overlay described on the control socket (descriptor 3) until released",
			Flags: []cli.Flag{&cli.BoolFlag{
				Name:  "await-id-map",
				Usage: "wait until newuidmap/newgidmap have written the ID map, then re-execute",
			}},
			Action: func(c *cli.Context) error {
				return daemon.Run(c.Context, daemon.Options{
					ControlFD:  anchor.ControlFD,
					AwaitIDMap: c.Bool("await-id-map"),
					Reexec:     []string{os.Args[0], "serve"},
					Logger:     slog.New(slog.NewTextHandler(os.Stderr, nil)),
				})
			},
		}},
	})
}
