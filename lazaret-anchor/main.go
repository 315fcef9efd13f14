// Command lazaret-anchor is the State Anchor: it holds a generation's user and mount namespaces and its overlay root filesystem.
package main

import (
	"context"
	"log/slog"
	"os"

	"lazaret.dev/lazaret-anchor/internal/daemon"
	"lazaret.dev/pkg/anchor"
	"lazaret.dev/pkg/helpermain"
)

func main() {
	helpermain.Main(helpermain.Helper{
		Name:  "lazaret-anchor",
		Usage: "State Anchor of one generation (started by lazaret-coordinator)",
		// It serves one control channel, one message at a time.
		Runtime: helpermain.Runtime{MaxProcs: 1},
		// The command line is Start's hand-off (anchor.Serve), parsed by
		// the one definition Start renders it with.
		Commands: []helpermain.Command{{
			Name:      "serve",
			Usage:     "hold the overlay described on the control socket until released (--await-id-map: wait until newuidmap/newgidmap have written the ID map, then re-execute)",
			ArgsUsage: anchor.ServeLayout.Usage(),
			Run: func(ctx context.Context, args []string) error {
				s, err := anchor.ParseServe(args)
				if err != nil {
					return err
				}
				return serve(ctx, s)
			},
		}},
	})
}

func serve(ctx context.Context, s anchor.Serve) error {
	if err := s.Inherit(); err != nil {
		return err
	}
	again, err := (&anchor.Serve{}).Argv()
	if err != nil {
		return err
	}
	return daemon.Run(ctx, daemon.Options{
		Control:    s.Control,
		AwaitIDMap: s.AwaitIDMap,
		Reexec:     append([]string{os.Args[0]}, again...),
		Logger:     slog.New(slog.NewTextHandler(os.Stderr, nil)),
	})
}
