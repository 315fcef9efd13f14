// Command lazaret-supervisor is the Runtime Supervisor: it owns one attached child (runsc or the network helper) and the causal edge that kills the child when the supervisor dies.
package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"

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
				Usage:     "supervise one child over the generation channel on fd 3",
				ArgsUsage: "-- /absolute/program [args...]",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "slot", Required: true, Usage: "ownership slot of the child (HostProcessOwnershipSlot name)"},
					&cli.IntFlag{Name: "log-fd", Value: -1, Usage: "descriptor for the supervisor's log (default: warnings on stderr)"},
				},
				Action: runCommand,
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
	slot, err := supervisor.ParseSlot(c.String("slot"))
	if err != nil {
		return fmt.Errorf("--slot: %w", err)
	}
	logger, err := newLogger(c.Int("log-fd"))
	if err != nil {
		return err
	}
	return supervisor.Run(c.Context, supervisor.Config{
		Slot:   slot,
		Argv:   c.Args().Slice(),
		Logger: logger,
	})
}

func newLogger(fd int) (*slog.Logger, error) {
	var w io.Writer = os.Stderr
	level := slog.LevelWarn
	if fd >= 0 {
		if fd <= 3 {
			return nil, fmt.Errorf("--log-fd %d: descriptors 0-3 are stdio and the channel", fd)
		}
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil {
			return nil, fmt.Errorf("--log-fd %d: descriptor is not open", fd)
		}
		w = os.NewFile(uintptr(fd), "log")
		level = slog.LevelInfo
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level})).With("component", "lazaret-supervisor"), nil
}
