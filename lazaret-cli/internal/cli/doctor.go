package cli

import (
	"fmt"
	"os"

	"github.com/urfave/cli/v2"

	"lazaret.dev/lazaret-cli/internal/doctor"
	"lazaret.dev/pkg/cmdmain"
	"lazaret.dev/pkg/locate"
)

func doctorCommand() *cli.Command {
	return &cli.Command{
		Name:  "doctor",
		Usage: "check that this host can run Lazaret and list leftover state with the command that cleans each item",
		Description: "Each check prints ok, warn or fail with one sentence, and for a warning or failure what to do.\n" +
			"The exit status is 0 when nothing failed and 1 otherwise (docs/OPERATIONS.md).",
		Flags: []cli.Flag{
			configFileFlag(),
			storageRootFlag(),
			jsonFlag("one object"),
			&cli.BoolFlag{Name: "probe-runsc", Usage: "also start a throw-away sandbox with `runsc do /bin/true` on the chosen platform (about 0.3 s)"},
		},
		Action: runDoctor,
		Subcommands: []*cli.Command{{
			Name:      "probe",
			Usage:     "run one namespace probe in the current process (started by doctor in new namespaces)",
			ArgsUsage: "userns|overlay|nftables",
			Hidden:    true,
			Action:    runDoctorProbe,
		}},
	}
}

func runDoctor(c *cli.Context) error {
	r, err := resolveRoots(c, 1)
	if err != nil {
		return err
	}
	storage := r.StorageRoot
	finder, err := locate.New()
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("locating lazaret-cli for the namespace probes: %w", err)
	}
	opts := doctor.Options{
		RuntimeRoot: r.RuntimeRoot,
		StorageRoot: storage,
		UID:         os.Getuid(),
		GID:         os.Getgid(),
		LookupEnv:   os.LookupEnv,
		Finder:      finder,
		Probe:       doctor.ChildProber(self, []string{"doctor", "probe"}),
		ProbeRunsc:  c.Bool("probe-runsc"),
	}
	rep, err := doctor.Run(c.Context, opts)
	if err != nil {
		return err
	}
	if c.Bool("json") {
		err = writeJSON(c.App.Writer, rep)
	} else {
		err = rep.WriteText(c.App.Writer)
	}
	if err != nil {
		return err
	}
	if !rep.OK {
		return &cmdmain.ExitError{Code: 1}
	}
	return nil
}

func runDoctorProbe(c *cli.Context) error {
	if c.NArg() != 1 {
		return fmt.Errorf("doctor probe: want exactly one probe name, got %d arguments", c.NArg())
	}
	kind, err := doctor.ParseProbeKind(c.Args().First())
	if err != nil {
		return err
	}
	return doctor.RunProbe(kind)
}
