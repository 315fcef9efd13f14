// Command lazaret-cli is the developer's entry point to Lazaret: it resolves
// the trusted host configuration, starts or joins a Domain's sandbox, and
// manages images and stored state.
package main

import (
	"lazaret.dev/lazaret-cli/internal/cli"
	"lazaret.dev/pkg/cmdmain"
)

func main() {
	cmdmain.Run(cli.App())
}
