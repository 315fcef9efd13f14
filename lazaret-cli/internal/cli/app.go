// Package cli defines the lazaret-cli command tree. Each subcommand group
// lives in its own file; this file only assembles them.
package cli

import (
	"github.com/urfave/cli/v2"
)

// App returns the lazaret-cli application.
func App() *cli.App {
	return &cli.App{
		Name:                 "lazaret-cli",
		Usage:                "run AI coding agents in a gVisor sandbox bound to one git workspace",
		EnableBashCompletion: false,
		Commands: []*cli.Command{
			configCommand(),
			storeCommand(),
			imageCommand(),
			startCommand(), execCommand(), statusCommand(),
			stopCommand(),
			logCommand(),
			recoverCommand(),
			doctorCommand(), netCommand(),
			workspaceCommand(),
			kubeCommand(),
			completionCommand(),
		},
	}
}
