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
		Usage: "network policy sidecar (started by lazaret-coordinator" + netsidecar.Layout.Usage() + ")",
		Action: func(c *cli.Context) error {
			log := slog.New(slog.NewTextHandler(os.Stderr, nil))
			var d netsidecar.Descriptors
			if err := d.Inherit(); err != nil {
				return err
			}
			channel, err := netsidecar.NewChannel(d.Channel)
			if err != nil {
				return err
			}
			return sidecar.Run(c.Context, log, channel, d.Policy)
		},
	})
}
