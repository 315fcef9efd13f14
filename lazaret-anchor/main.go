// Command lazaret-anchor is the State Anchor: it holds a generation's user and mount namespaces and its overlay root filesystem.
package main

import (
	"github.com/urfave/cli/v2"

	"lazaret.dev/pkg/cmdmain"
)

func main() {
	cmdmain.Run(&cli.App{
		Name:  "lazaret-anchor",
		Usage: "State Anchor of one generation (started by lazaret-coordinator)",
		Action: func(c *cli.Context) error {
			return cli.ShowAppHelp(c)
		},
	})
}
