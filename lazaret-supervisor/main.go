// Command lazaret-supervisor is the Runtime Supervisor: it owns one attached child (runsc or the network helper) and the causal edge that kills the child when the supervisor dies.
package main

import (
	"io"
	"log/slog"
	"os"

	"github.com/urfave/cli/v2"

	"lazaret.dev/lazaret-supervisor/internal/supervisor"
	"lazaret.dev/pkg/cmdmain"
	"lazaret.dev/pkg/supervise"
)

func main() {
	cmdmain.Run(&cli.App{
		Name:  "lazaret-supervisor",
		Usage: "Runtime Supervisor of one attached child (started by lazaret-coordinator)",
		Commands: []*cli.Command{
			{
				Name:      "run",
				Usage:     "supervise one child over the generation channel",
				ArgsUsage: supervise.RunLayout.Usage(),
				// The command line is Launch's hand-off (supervise.RunArgs),
				// parsed by the one definition Launch renders it with.
				SkipFlagParsing: true,
				Action:          runCommand,
			},
			{
				Name:      "gate",
				Hidden:    true,
				Usage:     "hold until the gate opens, then execute the program",
				ArgsUsage: supervise.GateLayout.Usage(),
				// The command line is the coordinator's or run's hand-off
				// (supervise.Gate), parsed by the one definition they use.
				SkipFlagParsing: true,
				Action: func(c *cli.Context) error {
					return supervisor.Gate(c.Context, c.Args().Slice())
				},
			},
		},
	})
}

func runCommand(c *cli.Context) error {
	hand, err := supervise.ParseRunArgs(c.Args().Slice())
	if err != nil {
		return err
	}
	if err := hand.Inherit(); err != nil {
		return err
	}
	return supervisor.Run(c.Context, supervisor.Config{
		Slot:    hand.Slot,
		Argv:    hand.Program,
		Channel: hand.Channel,
		Logger:  newLogger(hand.Log),
	})
}

// newLogger logs to the descriptor --log-fd named at info level, else
// warnings and errors to stderr.
func newLogger(log *os.File) *slog.Logger {
	var w io.Writer = os.Stderr
	level := slog.LevelWarn
	if log != nil {
		w, level = log, slog.LevelInfo
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level})).With("component", "lazaret-supervisor")
}
