// Command lazaret-coordinator is the Host Coordinator: one process per live generation of a Domain, started detached by lazaret-cli.
package main

import (
	"context"
	"log/slog"
	"os"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"lazaret.dev/lazaret-coordinator/internal/coordinator"
	"lazaret.dev/pkg/cmdmain"
	"lazaret.dev/pkg/paths"
)

// Descriptors lazaret-cli passes to `serve`.
const (
	lockFD   = 3
	reportFD = 4
)

func main() {
	cmdmain.Run(&cli.App{
		Name:  "lazaret-coordinator",
		Usage: "Host Coordinator of one Lazaret generation (started by lazaret-cli)",
		Commands: []*cli.Command{{
			Name:  "serve",
			Usage: "start, serve and tear down one generation (fd 3: the Domain lock, fd 4: the start report)",
			Flags: []cli.Flag{
				&cli.StringFlag{Name: "config", Required: true, Usage: "trusted host configuration file"},
				&cli.StringFlag{Name: "profile", Required: true, Usage: "selected profile"},
				&cli.StringFlag{Name: "workspace", Required: true, Usage: "canonical git workspace"},
				&cli.StringFlag{Name: "fingerprint", Required: true, Usage: "configuration fingerprint the CLI resolved (64 hex digits)"},
				&cli.DurationFlag{Name: "linger", Value: 10 * time.Second, Usage: "how long to stay up with no session running (0: stop after the last)"},
				&cli.StringFlag{Name: "session", Usage: "the session of the CLI that starts this generation (32 hex digits)"},
				&cli.BoolFlag{Name: "recover-only", Usage: "recover what an earlier coordinator left, report ready and exit without starting a generation"},
			},
			Action: func(c *cli.Context) error {
				return run(c.Context, coordinator.Options{
					ConfigFile:  c.String("config"),
					Profile:     c.String("profile"),
					Workspace:   c.String("workspace"),
					Fingerprint: c.String("fingerprint"),
					Linger:      c.Duration("linger"),
					RecoverOnly: c.Bool("recover-only"),
					Session:     c.String("session"),
				})
			},
		}},
	})
}

// run wires the process's descriptors, environment and log into opts and
// serves one generation. The log is stderr, which lazaret-cli points at
// the Domain's coordinator.log.
func run(ctx context.Context, opts coordinator.Options) error {
	// Neither descriptor may reach the helpers: the lock must end with this
	// process.
	syscall.CloseOnExec(lockFD)
	syscall.CloseOnExec(reportFD)
	opts.Lock = os.NewFile(lockFD, "domain-lock")
	opts.Report = os.NewFile(reportFD, "start-report")
	opts.Environment = paths.FromProcess()
	opts.Log = os.Stderr
	opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})).With("component", "lazaret-coordinator")
	return coordinator.Serve(ctx, opts)
}
