// Command lazaret-gitroute serves the /workspace view that routes git-ignored paths to a per-Domain isolated root.
package main

import (
	"github.com/urfave/cli/v2"

	"lazaret.dev/pkg/cmdmain"
)

func main() {
	cmdmain.Run(&cli.App{
		Name:  "lazaret-gitroute",
		Usage: "workspace view daemon (started by lazaret-coordinator)",
		Action: func(c *cli.Context) error {
			return cli.ShowAppHelp(c)
		},
	})
}
