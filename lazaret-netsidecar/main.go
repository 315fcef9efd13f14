// Command lazaret-netsidecar enforces a generation's derived network policy in its enforcement namespace.
package main

import (
	"github.com/urfave/cli/v2"

	"lazaret.dev/pkg/cmdmain"
)

func main() {
	cmdmain.Run(&cli.App{
		Name:  "lazaret-netsidecar",
		Usage: "network policy sidecar (started by lazaret-coordinator)",
		Action: func(c *cli.Context) error {
			return cli.ShowAppHelp(c)
		},
	})
}
