// Command lazaret-coordinator is the Host Coordinator: one process per live generation of a Domain, started detached by lazaret-cli.
package main

import (
	"github.com/urfave/cli/v2"

	"lazaret.dev/pkg/cmdmain"
)

func main() {
	cmdmain.Run(&cli.App{
		Name:  "lazaret-coordinator",
		Usage: "Host Coordinator of one Lazaret generation (started by lazaret-cli)",
		Action: func(c *cli.Context) error {
			return cli.ShowAppHelp(c)
		},
	})
}
