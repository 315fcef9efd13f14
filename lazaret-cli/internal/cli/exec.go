package cli

import (
	"errors"
	"os"
	"time"

	"github.com/urfave/cli/v2"

	"lazaret.dev/lazaret-cli/internal/session"
	"lazaret.dev/pkg/cmdmain"
)

func execCommand() *cli.Command {
	return &cli.Command{
		Name:      "exec",
		Usage:     "run a command in the sandbox without a terminal (stdout and stderr apart, its exit code), starting or joining the Domain",
		ArgsUsage: "-- ARGV...",
		Flags:     append(sessionFlags(), publishFlags()...),
		Action:    runExec,
	}
}

func runExec(c *cli.Context) error {
	argv := c.Args().Slice()
	if len(argv) == 0 {
		return fail(c, "exec needs the command to run: lazaret-cli exec [--profile NAME] -- ARGV...")
	}
	trace := startTrace(c, time.Now())
	ports, err := publishRequest(c)
	if err != nil {
		return err
	}
	t, cfg, err := resolveTarget(c)
	if err != nil {
		return err
	}
	cfg.Close()
	if err := checkBindable(ports, t.Paths().Dir); err != nil {
		return fail(c, "%v", err)
	}
	trace.Mark("configuration resolved")
	ctx := c.Context
	s, err := attachWith(ctx, c, t, trace, session.Enroll)
	if err != nil {
		return err
	}
	defer s.Client.Close()
	if err := publish(c, s.Client, ports, false); err != nil {
		return err
	}
	stdout := c.App.Writer
	if stdout == nil {
		stdout = os.Stdout
	}
	exit, err := s.RegisterExecute(ctx, argv, stdout, stderrOf(c))
	trace.Mark("command ended")
	if err != nil {
		if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			return &cmdmain.ExitError{Code: 128 + 15}
		}
		return fail(c, "%v", err)
	}
	if code := sessionExitCode(c, exit, t.LogPath()); code != 0 {
		return &cmdmain.ExitError{Code: code}
	}
	return nil
}
