// Command lazaret-netsidecar enforces a generation's derived network policy in its enforcement namespace.
package main

import (
	"log/slog"
	"os"

	"github.com/urfave/cli/v2"

	"lazaret.dev/lazaret-netsidecar/internal/sidecar"
	"lazaret.dev/pkg/cmdmain"
	"lazaret.dev/pkg/netsidecar"
)

func main() {
	cmdmain.Run(&cli.App{
		Name:  "lazaret-netsidecar",
		Usage: "network policy sidecar (started by lazaret-coordinator with its control channel on fd 3 and the sealed policy on fd 4)",
		Action: func(c *cli.Context) error {
			log := slog.New(slog.NewTextHandler(os.Stderr, nil))
			channel, err := netsidecar.NewChannel(os.NewFile(netsidecar.ChannelFD, "control"))
			if err != nil {
				return err
			}
			policy := os.NewFile(netsidecar.PolicyFD, "policy")
			return sidecar.Run(c.Context, log, channel, policy)
		},
	})
}
