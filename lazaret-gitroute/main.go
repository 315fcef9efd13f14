// Command lazaret-gitroute serves the /workspace view that routes git-ignored paths to a per-Domain isolated root.
package main

import (
	"context"
	"log/slog"
	"os"

	"lazaret.dev/lazaret-gitroute/internal/daemon"
	"lazaret.dev/pkg/gitroute"
	"lazaret.dev/pkg/helpermain"
)

func main() {
	helpermain.Main(helpermain.Helper{
		Name:  "lazaret-gitroute",
		Usage: "workspace view daemon (started by lazaret-coordinator)",
		// The command line and the control socket are the parent's
		// hand-off (gitroute.DaemonArgs), parsed by the one definition
		// both use.
		ArgsUsage: gitroute.DaemonLayout.Usage(),
		Run:       run,
	})
}

func run(ctx context.Context, args []string) error {
	hand, err := gitroute.ParseDaemonArgs(args)
	if err != nil {
		return err
	}
	method := daemon.MountAuto
	if hand.MountMethod != "" {
		if method, err = daemon.ParseMountMethod(hand.MountMethod); err != nil {
			return err
		}
	}
	if err := hand.Inherit(); err != nil {
		return err
	}
	return daemon.Run(ctx, daemon.Config{
		HostRoot:        hand.HostRoot,
		IsolatedRoot:    hand.IsolatedRoot,
		Mountpoint:      hand.Mountpoint,
		Method:          method,
		Control:         hand.Control,
		Log:             slog.New(slog.NewTextHandler(os.Stderr, nil)),
		Home:            os.Getenv("HOME"),
		XDGConfigHome:   os.Getenv("XDG_CONFIG_HOME"),
		KeepIsolated:    hand.KeepIsolated,
		IsolationReport: hand.IsolationReport,
		Settle:          helpermain.Settle,
	})
}
