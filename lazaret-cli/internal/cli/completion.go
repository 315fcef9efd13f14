package cli

import (
	"io"
	"strings"

	"github.com/urfave/cli/v2"

	"lazaret.dev/lazaret-cli/internal/clidoc"
)

// completionCommand is the hidden `completion SHELL`: it prints the
// shell's completion script, written from the command tree, so that
// `source <(lazaret-cli completion bash)` loads it.
func completionCommand() *cli.Command {
	return &cli.Command{
		Name:      "completion",
		Usage:     "print the completion script of a shell: " + strings.Join(clidoc.Shells, ", "),
		ArgsUsage: strings.Join(clidoc.Shells, "|"),
		Hidden:    true,
		Action:    runCompletion,
	}
}

func runCompletion(c *cli.Context) error {
	if c.NArg() != 1 {
		return failCode(c, 1, "completion: name one shell: %s", strings.Join(clidoc.Shells, ", "))
	}
	// The script describes the whole program, whichever context runs it.
	app := App()
	app.Name = c.App.Name
	s, err := clidoc.Script(app, c.Args().First())
	if err != nil {
		return failCode(c, 1, "completion: %v", err)
	}
	_, err = io.WriteString(stdoutOf(c), s)
	return err
}
