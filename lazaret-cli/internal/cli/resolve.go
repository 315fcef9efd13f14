package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	"lazaret.dev/pkg/cmdmain"
	"lazaret.dev/pkg/config"
	"lazaret.dev/pkg/layout"
	"lazaret.dev/pkg/paths"
)

// This file is the one resolution of configuration, storage root and
// runtime root that every command shares:
//
//   - the configuration is --config, else $LAZARET_CONFIG, else
//     $XDG_CONFIG_HOME/lazaret/config.toml (paths.ConfigFile);
//   - the storage root is --storage-root where the command has it, else
//     the configuration's storage.data_root, else the default of package
//     paths; a command that needs only the storage root falls back to
//     that default, silently, when the configuration file does not exist
//     and --config did not name it;
//   - the runtime root is the one package paths computes;
//   - a command acting on one Domain takes --profile, else the
//     configuration's only profile.
//
// An invalid configuration is reported as pkg/config's problems, one per
// line, each naming file, line and field.

// flagValue returns the value of the named flag from the innermost command
// of c's lineage where it was given, so a flag shared by a command and its
// subcommands (image --storage-root ls, image ls --storage-root) works in
// either place.
func flagValue(c *cli.Context, name string) (string, bool) {
	for _, cc := range c.Lineage() {
		if cc.Command != nil && hasFlag(cc.Command.Flags, name) && cc.IsSet(name) {
			return cc.String(name), true
		}
		if cc.Command == nil && cc.App != nil && hasFlag(cc.App.Flags, name) && cc.IsSet(name) {
			return cc.String(name), true
		}
	}
	return "", false
}

func hasFlag(flags []cli.Flag, name string) bool {
	for _, f := range flags {
		for _, n := range f.Names() {
			if n == name {
				return true
			}
		}
	}
	return false
}

// failCode prints one line prefixed with the program name and ends the
// command with code.
func failCode(c *cli.Context, code int, format string, args ...any) error {
	fmt.Fprintf(stderrOf(c), "lazaret-cli: "+format+"\n", args...)
	return &cmdmain.ExitError{Code: code}
}

// reportInvalid prints every problem of an invalid configuration, one
// per line, and ends the command with code; when the file does not
// exist it also says how to create one.
func reportInvalid(c *cli.Context, code int, invalid *config.InvalidError, missing bool) error {
	for _, p := range invalid.Problems {
		fmt.Fprintln(stderrOf(c), p.String())
	}
	if missing {
		fmt.Fprintln(stderrOf(c), "lazaret-cli: create a configuration with `lazaret-cli config init`, or name one with --config FILE")
	}
	return &cmdmain.ExitError{Code: code}
}

// readProblem is the *InvalidError of a configuration file that cannot be
// read, as config.ResolveFile reports it.
func readProblem(file string, err error) *config.InvalidError {
	return &config.InvalidError{Problems: []config.Problem{{File: file, Rule: config.RuleRead, Message: err.Error()}}}
}

// roots is where a command that needs no profile keeps and finds things.
type roots struct {
	// ConfigFile is the configuration in use, whether or not it exists.
	ConfigFile string
	// Summary is the configuration's summary; nil when the file does not
	// exist or --storage-root made it unnecessary.
	Summary *config.Summary
	// StorageRoot and RuntimeRoot are canonical.
	StorageRoot string
	RuntimeRoot string
}

// resolveRoots resolves the storage and runtime roots of c. Failures are
// printed and end the command with code.
func resolveRoots(c *cli.Context, code int) (*roots, error) {
	env := paths.FromProcess()
	flag, _ := flagValue(c, "config")
	file, err := env.ConfigFile(flag)
	if err != nil {
		return nil, failCode(c, code, "%v", err)
	}
	r := &roots{ConfigFile: file}
	if r.RuntimeRoot, err = paths.Canonical(env.RuntimeRoot()); err != nil {
		return nil, failCode(c, code, "runtime root: %v", err)
	}
	if explicit, ok := flagValue(c, "storage-root"); ok {
		if explicit == "" {
			return nil, failCode(c, code, "--storage-root: give a directory")
		}
		abs, err := filepath.Abs(explicit)
		if err == nil {
			abs, err = paths.Canonical(abs)
		}
		if err != nil {
			return nil, failCode(c, code, "--storage-root %q: %v", explicit, err)
		}
		r.StorageRoot = abs
		return r, nil
	}
	data, err := config.ReadFile(file, env.UID)
	switch {
	case errors.Is(err, fs.ErrNotExist) && flag == "":
		def, err := env.DefaultStorageRoot()
		if err == nil {
			def, err = paths.Canonical(def)
		}
		if err != nil {
			return nil, failCode(c, code, "%v; set $XDG_DATA_HOME or give --storage-root", err)
		}
		r.StorageRoot = def
		return r, nil
	case err != nil:
		return nil, reportInvalid(c, code, readProblem(file, err), errors.Is(err, fs.ErrNotExist))
	}
	s, err := config.Summarize(data, file, env)
	var invalid *config.InvalidError
	if errors.As(err, &invalid) {
		return nil, reportInvalid(c, code, invalid, false)
	}
	if err != nil {
		return nil, failCode(c, code, "configuration %s: %v", file, err)
	}
	r.Summary, r.StorageRoot = s, s.StorageRoot
	return r, nil
}

// resolveDomain resolves the configuration of c's --config, --profile
// (else the configuration's only profile) and --workspace: the Domain a
// command acts on. It returns the configuration, which the caller
// closes, and its file. Failures are printed and end the command with
// code.
func resolveDomain(c *cli.Context, code int) (*config.ResolvedDomainConfiguration, string, error) {
	return resolveDomainIn(c, code, paths.FromProcess())
}

// resolveDomainIn is resolveDomain in the environment env, whose
// LookupEnv supplies the values behind env: references.
func resolveDomainIn(c *cli.Context, code int, env paths.Environment) (*config.ResolvedDomainConfiguration, string, error) {
	flag, _ := flagValue(c, "config")
	file, err := env.ConfigFile(flag)
	if err != nil {
		return nil, "", failCode(c, code, "%v", err)
	}
	wsFlag, _ := flagValue(c, "workspace")
	ws, err := paths.Workspace(wsFlag)
	if err != nil {
		return nil, "", failCode(c, code, "%v (use --workspace to name the git workspace)", err)
	}
	data, err := config.ReadFile(file, env.UID)
	if err != nil {
		return nil, "", reportInvalid(c, code, readProblem(file, err), errors.Is(err, fs.ErrNotExist))
	}
	profile, _ := flagValue(c, "profile")
	if profile == "" {
		s, err := config.Summarize(data, file, env)
		var invalid *config.InvalidError
		if errors.As(err, &invalid) {
			return nil, "", reportInvalid(c, code, invalid, false)
		}
		if err != nil {
			return nil, "", failCode(c, code, "configuration %s: %v", file, err)
		}
		if len(s.Profiles) != 1 {
			return nil, "", failCode(c, code, "--profile is required: the configuration %s defines %s", file, strings.Join(s.Profiles, ", "))
		}
		profile = s.Profiles[0]
	}
	cfg, err := config.Resolve(data, config.Options{
		Profile: profile, Workspace: ws, Layout: layout.Production(), Environment: env, File: file,
	})
	var invalid *config.InvalidError
	if errors.As(err, &invalid) {
		return nil, "", reportInvalid(c, code, invalid, false)
	}
	if err != nil {
		return nil, "", failCode(c, code, "resolving configuration %q: %v", file, err)
	}
	return cfg, file, nil
}
