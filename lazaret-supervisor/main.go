// Command lazaret-supervisor is the Runtime Supervisor: it owns one attached child (runsc or the network helper) and the causal edge that kills the child when the supervisor dies.
package main

import (
	"context"
	"io"
	"log/slog"
	"os"

	"lazaret.dev/lazaret-supervisor/internal/supervisor"
	"lazaret.dev/pkg/helpermain"
	"lazaret.dev/pkg/supervise"
)

func main() {
	helpermain.Main(helpermain.Helper{
		Name:  "lazaret-supervisor",
		Usage: "Runtime Supervisor of one attached child (started by lazaret-coordinator)",
		// It waits on its child and its channel; the child's stdio is its own.
		Runtime: helpermain.Runtime{MaxProcs: 1},
		// Each command line is a parent's hand-off (supervise.RunArgs from
		// Launch, supervise.Gate from the coordinator or run), parsed by
		// the one definition the parent renders it with.
		Commands: []helpermain.Command{
			{Name: "run", Usage: "supervise one child over the generation channel", ArgsUsage: supervise.RunLayout.Usage(), Run: runCommand},
			// The hidden gate a gated child is started behind.
			{Name: "gate", Usage: "hold until the gate opens, then execute the program", ArgsUsage: supervise.GateLayout.Usage(),
				Hidden: true, Run: supervisor.Gate},
		},
	})
}

func runCommand(ctx context.Context, args []string) error {
	hand, err := supervise.ParseRunArgs(args)
	if err != nil {
		return err
	}
	if err := hand.Inherit(); err != nil {
		return err
	}
	return supervisor.Run(ctx, supervisor.Config{
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
