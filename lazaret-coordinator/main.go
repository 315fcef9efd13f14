// Command lazaret-coordinator is the Host Coordinator: one process per live generation of a Domain, started detached by lazaret-cli.
package main

import (
	"context"
	"log/slog"
	"os"

	"lazaret.dev/lazaret-coordinator/internal/coordinator"
	"lazaret.dev/pkg/helpermain"
	"lazaret.dev/pkg/paths"
	"lazaret.dev/pkg/startup"
)

func main() {
	helpermain.Main(helpermain.Helper{
		Name:  "lazaret-coordinator",
		Usage: "Host Coordinator of one Lazaret generation (started by lazaret-cli)",
		// The flags and descriptors are lazaret-cli's hand-off
		// (startup.Serve), parsed by the one definition both use.
		Commands: []helpermain.Command{{
			Name: "serve", Usage: "start, serve and tear down one generation", ArgsUsage: startup.ServeLayout.Usage(),
			Run: func(ctx context.Context, args []string) error {
				s, err := startup.ParseServe(args)
				if err != nil {
					return err
				}
				return run(ctx, s)
			},
		}},
	})
}

// run wires the process's descriptors, environment and log into the
// coordinator's options and serves one generation. The log is stderr,
// which lazaret-cli points at the Domain's coordinator.log.
func run(ctx context.Context, s startup.Serve) error {
	// Neither descriptor reaches the helpers (Inherit makes them
	// close-on-exec): the lock must end with this process.
	if err := s.Inherit(); err != nil {
		return err
	}
	return coordinator.Serve(ctx, coordinator.Options{
		ConfigFile:  s.ConfigFile,
		Profile:     s.Profile,
		Workspace:   s.Workspace,
		Fingerprint: s.Fingerprint,
		Linger:      s.Linger,
		RecoverOnly: s.RecoverOnly,
		Session:     s.Session,
		Lock:        s.Lock,
		Report:      s.Report,
		Environment: paths.FromProcess(),
		Log:         os.Stderr,
		Logger:      slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})).With("component", "lazaret-coordinator"),
		Settle:      helpermain.Settle,
	})
}
