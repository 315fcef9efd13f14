// Command lazaret-guest is the in-sandbox client of host escalation.
package main

import (
	"github.com/urfave/cli/v2"

	"lazaret.dev/pkg/cmdmain"
)

func main() {
	cmdmain.Run(&cli.App{
		Name:  "lazaret-guest",
		Usage: "ask the host to run an exact command (inside a Lazaret sandbox)",
		Action: func(c *cli.Context) error {
			return cli.ShowAppHelp(c)
		},
	})
}
