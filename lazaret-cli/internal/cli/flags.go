package cli

import (
	"github.com/urfave/cli/v2"
)

// The flags every command shares are defined here, once, so each means
// the same thing wherever it appears; TestFlagsAreUniform walks the
// command tree to keep it so.

// profileFlag is --profile: the profile whose Domain a command acts on.
func profileFlag() cli.Flag {
	return &cli.StringFlag{
		Name:  "profile",
		Usage: "profile `NAME` (exact, case-sensitive); a command acting on one Domain defaults to the configuration's only profile",
	}
}

// workspaceFlag is --workspace: the git workspace of the Domain.
func workspaceFlag() cli.Flag {
	return &cli.StringFlag{
		Name:      "workspace",
		TakesFile: true,
		Usage:     "git workspace `DIR` (default: the git top level of the current directory)",
	}
}

// configFileFlag is --config: the configuration file (paths.ConfigFile).
func configFileFlag() cli.Flag {
	return &cli.StringFlag{
		Name:      "config",
		TakesFile: true,
		Usage:     "configuration `FILE` (default: $LAZARET_CONFIG, else $XDG_CONFIG_HOME/lazaret/config.toml)",
	}
}

// storageRootFlag is --storage-root: an explicit storage root that
// overrides the configuration's.
func storageRootFlag() cli.Flag {
	return &cli.StringFlag{
		Name:      "storage-root",
		TakesFile: true,
		Usage:     "storage root `DIR` (default: the configuration's storage.data_root, else $XDG_DATA_HOME/lazaret, else ~/.local/share/lazaret)",
	}
}

// jsonUsage begins the usage of every --json flag.
const jsonUsage = "print JSON: "

// jsonFlag is --json; shape says what the command prints.
func jsonFlag(shape string) cli.Flag {
	return &cli.BoolFlag{Name: "json", Usage: jsonUsage + shape}
}
