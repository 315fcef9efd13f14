// Command lazaret-netsidecar enforces a generation's derived network policy in its enforcement namespace.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"lazaret.dev/lazaret-netsidecar/internal/sidecar"
	"lazaret.dev/pkg/helpermain"
	"lazaret.dev/pkg/netsidecar"
)

func main() {
	helpermain.Main(helpermain.Helper{
		Name:  "lazaret-netsidecar",
		Usage: "network policy sidecar (started by lazaret-coordinator)",
		// Its probes wait on the network concurrently; two Ps are plenty.
		Runtime:   helpermain.Runtime{MaxProcs: 2},
		ArgsUsage: "(no arguments) " + descriptors,
		Run:       run,
	})
}

// descriptors lists the inherited descriptors, the sidecar's only inputs.
var descriptors = strings.TrimPrefix(netsidecar.Layout.Usage(), "; ")

// run takes no arguments: its inputs are the descriptors of
// netsidecar.Layout.
func run(ctx context.Context, args []string) error {
	if len(args) != 0 {
		return fmt.Errorf("unexpected arguments %q: lazaret-netsidecar takes none, only its descriptors (%s)", args, descriptors)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	var d netsidecar.Descriptors
	if err := d.Inherit(); err != nil {
		return err
	}
	channel, err := netsidecar.NewChannel(d.Channel)
	if err != nil {
		return err
	}
	return sidecar.Run(ctx, log, channel, d.Policy, d.Names, d.Broker, helpermain.Settle)
}
