package cli

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"lazaret.dev/lazaret-cli/internal/session"
	"lazaret.dev/pkg/cmdmain"
)

// exitRecoverFailed is recover's exit code when recovery did not finish.
const exitRecoverFailed = 1

func recoverCommand() *cli.Command {
	return &cli.Command{
		Name: "recover",
		Usage: "release what a crashed coordinator of the Domain left (processes, publication, leases), " +
			"using only the Domain Store's records; the next start also does this by itself",
		Flags: []cli.Flag{
			profileFlag(),
			workspaceFlag(),
			configFileFlag(),
		},
		Action: runRecover,
	}
}

func runRecover(c *cli.Context) error {
	if c.Args().Present() {
		return fail(c, "recover takes no arguments, got %q", c.Args().First())
	}
	t, cfg, err := resolveTarget(c)
	if err != nil {
		return err
	}
	cfg.Close()
	a := session.NewAttacher(coordinatorBinary, nil)
	if err := a.Recover(c.Context, t); err != nil {
		fmt.Fprintf(stderrOf(c), "lazaret-cli: recovering the Domain of profile %q in %s: %v\n", t.Profile, t.Workspace, err)
		return &cmdmain.ExitError{Code: exitRecoverFailed}
	}
	fmt.Fprintf(c.App.Writer, "the Domain of profile %q in %s holds no unfinished generation; the coordinator log %s says what was released\n",
		t.Profile, t.Workspace, t.LogPath())
	return nil
}
