// Command lazaret-supervisor is the Runtime Supervisor: it owns one attached child (runsc or the network helper) and the causal edge that kills the child when the supervisor dies.
package main

import (
	"github.com/urfave/cli/v2"

	"lazaret.dev/pkg/cmdmain"
)

func main() {
	cmdmain.Run(&cli.App{
		Name:  "lazaret-supervisor",
		Usage: "Runtime Supervisor of one attached child (started by lazaret-coordinator)",
		Action: func(c *cli.Context) error {
			return cli.ShowAppHelp(c)
		},
	})
}
