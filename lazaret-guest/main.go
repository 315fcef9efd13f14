// Command lazaret-guest is the in-sandbox client of host escalation: it asks
// the host to run an exact command, installs wrappers that do so for a
// command name, and serves as the sandbox container's init process.
//
// It parses its command line with the standard flag package rather than
// the command-line framework of the host binaries (pkg/cmdmain): it starts
// once per escalation request inside gVisor, where every package's
// initialisation costs start-up time, and that framework's initialisation
// (templates, a Markdown renderer, regular expressions) was the larger
// part of the guest's own.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"

	"lazaret.dev/lazaret-guest/internal/guest"
	"lazaret.dev/pkg/buildinfo"
	"lazaret.dev/pkg/mailbox"
	"lazaret.dev/pkg/readyprobe"
)

const name = "lazaret-guest"

const usage = `usage:
  lazaret-guest run [--justification TEXT] -- /abs/path [ARGS...]
      ask the host to run /abs/path with ARGS and print its output
  lazaret-guest shim install [--dir DIR] [--host-dir DIR] [--guest PATH] NAME[=/abs/host/path]...
      write wrappers that route NAME to the host (to --host-dir/NAME, or the path given)
  lazaret-guest init
      run as the sandbox container's init: announce it on stdout, reap children until SIGTERM
  lazaret-guest readiness [--denied IP:PORT]... [--permitted IP:PORT]... [--dns RESOLVER=NAME]... [--timeout D]
      prove a Kubernetes pod's network policy before its agent starts (lazaret-cli kube render)
  lazaret-guest --version
`

// exitUsage is the status of a command line that names no known command
// or breaks a command's flags (other than run's, which exits
// guest.ExitGuestError like every guest-side error of a request).
const exitUsage = 2

func main() {
	// As every Lazaret process (cmdmain.Harden): no other process of the
	// same user reads this one's memory or environment.
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		fmt.Fprintf(os.Stderr, "%s: setting PR_SET_DUMPABLE=0: %v\n", name, err)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run dispatches the command line and returns the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	switch args[0] {
	case "--version", "-version", "-v":
		fmt.Fprintln(stdout, buildinfo.String(name))
		return 0
	case "--help", "-help", "-h", "help":
		fmt.Fprint(stdout, usage)
		return 0
	case "run":
		return runRequest(ctx, args[1:], stdout, stderr)
	case "shim":
		if len(args) < 2 || args[1] != "install" {
			fmt.Fprintf(stderr, "%s: shim needs the subcommand install\n%s", name, usage)
			return exitUsage
		}
		return shimInstall(args[2:], stdout, stderr)
	case "init":
		if len(args) > 1 {
			fmt.Fprintf(stderr, "%s: init takes no arguments, got %q\n", name, args[1:])
			return exitUsage
		}
		// The guest announces on stdout that it runs (pkg/initready).
		if err := guest.Init(ctx, os.Stdout); err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", name, err)
			return 1
		}
		return 0
	case "readiness":
		return readiness(ctx, args[1:], stdout, stderr)
	}
	fmt.Fprintf(stderr, "%s: unknown command %q\n%s", name, args[0], usage)
	return exitUsage
}

// readiness runs the in-pod readiness proof of a rendered Kubernetes
// Sandbox: every target at once, each result on stdout, every failing
// target named on stderr (the init container's termination message) and
// exit status 1, so the pod does not start its agent.
func readiness(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	t, timeout, err := readyprobe.ParseArgs(args)
	if err != nil {
		fmt.Fprintf(stderr, "%s: readiness: %v\n%s", name, err, usage)
		return exitUsage
	}
	rep, err := readyprobe.Check(ctx, t, timeout)
	if rep != nil {
		for _, l := range rep.Lines {
			fmt.Fprintln(stdout, l)
		}
	}
	if err != nil {
		var nr *readyprobe.NotReadyError
		if errors.As(err, &nr) {
			for _, f := range nr.Failures {
				fmt.Fprintf(stderr, "%s: readiness: %v\n", name, f)
			}
			return 1
		}
		fmt.Fprintf(stderr, "%s: readiness: %v\n", name, err)
		return 1
	}
	fmt.Fprintln(stdout, "ready")
	return 0
}

// flags is a flag set that prints nothing itself: its caller reports a
// parse error, or the usage for -h, once.
func flags(cmd string) *flag.FlagSet {
	fs := flag.NewFlagSet(name+" "+cmd, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// parse parses args into fs. It returns done when the caller should
// return code at once: after -h (the usage on stdout, 0) or a parse error
// (the error and the usage on stderr, failure).
func parse(fs *flag.FlagSet, args []string, stdout, stderr io.Writer, failure int) (code int, done bool) {
	err := fs.Parse(args)
	switch {
	case err == nil:
		return 0, false
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprint(stdout, usage)
		return 0, true
	}
	fmt.Fprintf(stderr, "%s: %s: %v\n%s", name, fs.Name()[len(name)+1:], err, usage)
	return failure, true
}

func runRequest(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flags("run")
	justification := fs.String("justification", "", "why the command is needed (shown to the developer)")
	if code, done := parse(fs, args, stdout, stderr, guest.ExitGuestError); done {
		return code
	}
	argv := fs.Args()
	if len(argv) == 0 {
		fmt.Fprintf(stderr, "%s: run needs the host command: lazaret-guest run -- /abs/path [ARGS...]\n", name)
		return guest.ExitGuestError
	}
	interrupt := make(chan os.Signal, 2)
	signal.Notify(interrupt, syscall.SIGINT)
	defer signal.Stop(interrupt)
	code, err := guest.Run(ctx, guest.RunOptions{
		Argv:          argv,
		Justification: *justification,
		BundlePath:    envOr(mailbox.EnvCredentialBundle, mailbox.DefaultCredentialBundle),
		Capability:    os.Getenv(mailbox.EnvCapability),
		Mailbox:       envOr(mailbox.EnvMailbox, mailbox.SandboxPath),
		Stdout:        stdout,
		Stderr:        stderr,
		Interrupt:     interrupt,
	})
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
	}
	return code
}

func shimInstall(args []string, stdout, stderr io.Writer) int {
	fs := flags("shim install")
	dir := fs.String("dir", guest.DefaultShimDir, "directory to write the wrappers to")
	hostDir := fs.String("host-dir", guest.DefaultHostDir, "host directory of a bare NAME")
	guestPath := fs.String("guest", guest.DefaultGuestPath, "path of lazaret-guest inside the sandbox")
	if code, done := parse(fs, args, stdout, stderr, exitUsage); done {
		return code
	}
	if fs.NArg() == 0 {
		fmt.Fprintf(stderr, "%s: shim install needs at least one NAME\n", name)
		return exitUsage
	}
	var shims []guest.Shim
	for _, spec := range fs.Args() {
		s, err := guest.ParseShim(spec, *hostDir)
		if err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", name, err)
			return 1
		}
		shims = append(shims, s)
	}
	if err := guest.InstallShims(*dir, *guestPath, shims); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 1
	}
	return 0
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
