package cli

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/urfave/cli/v2"

	"lazaret.dev/lazaret-cli/internal/session"
	"lazaret.dev/pkg/cmdmain"
)

// exitStopFailed is stop's exit code when the generation did not end
// cleanly within the timeout.
const exitStopFailed = 1

func stopCommand() *cli.Command {
	return &cli.Command{
		Name:  "stop",
		Usage: "end the Domain's running generation gracefully: its coordinator ends every session and tears the sandbox down",
		Flags: []cli.Flag{
			profileFlag(),
			workspaceFlag(),
			configFileFlag(),
			&cli.DurationFlag{Name: "timeout", Value: session.DefaultStopTimeout, Usage: "how long to wait for the teardown (`DURATION`)"},
		},
		Action: runStop,
	}
}

func runStop(c *cli.Context) error {
	if c.Args().Present() {
		return fail(c, "stop takes no arguments, got %q", c.Args().First())
	}
	timeout := c.Duration("timeout")
	if timeout <= 0 {
		return fail(c, "--timeout %v: must be positive", timeout)
	}
	t, cfg, err := resolveTarget(c)
	if err != nil {
		return err
	}
	cfg.Close()
	res, err := session.NewStopper().Stop(c.Context, t, timeout)
	if err != nil {
		fmt.Fprintf(stderrOf(c), "lazaret-cli: stopping the Domain of profile %q in %s: %v\n", t.Profile, t.Workspace, err)
		return &cmdmain.ExitError{Code: exitStopFailed}
	}
	w := c.App.Writer
	if w == nil {
		w = os.Stdout
	}
	if err := writeStopResult(w, t, res); err != nil {
		return err
	}
	if res.Leftover != "" {
		fmt.Fprintf(stderrOf(c), "lazaret-cli: the coordinator exited but the Domain Store still records %s; see %s and run `lazaret-cli recover`\n", res.Leftover, t.LogPath())
		return &cmdmain.ExitError{Code: exitStopFailed}
	}
	return nil
}

// writeStopResult prints what stop did, one line.
func writeStopResult(w io.Writer, t *session.Target, res session.StopResult) error {
	var err error
	switch {
	case !res.Running:
		_, err = fmt.Fprintf(w, "no running generation of profile %q in %s\n", t.Profile, t.Workspace)
	case res.Generation != "":
		_, err = fmt.Fprintf(w, "stopped generation %s of profile %q in %s (lazaret-coordinator pid %d, %v)\n",
			res.Generation, t.Profile, t.Workspace, res.PID, res.Took.Round(time.Millisecond))
	default:
		_, err = fmt.Fprintf(w, "stopped the unpublished generation of profile %q in %s (lazaret-coordinator pid %d, %v)\n",
			t.Profile, t.Workspace, res.PID, res.Took.Round(time.Millisecond))
	}
	return err
}
