package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"lazaret.dev/lazaret-cli/internal/session"
	"lazaret.dev/pkg/cmdmain"
	"lazaret.dev/pkg/config"
	"lazaret.dev/pkg/control"
	"lazaret.dev/pkg/ids"
	"lazaret.dev/pkg/locate"
	"lazaret.dev/pkg/paths"
	"lazaret.dev/pkg/protocol"
)

// sessionFlags are the flags start and exec share.
func sessionFlags() []cli.Flag {
	return []cli.Flag{
		profileFlag(),
		workspaceFlag(),
		configFileFlag(),
		&cli.DurationFlag{Name: "linger", Value: session.DefaultLinger, Usage: "how long a Domain this command starts stays up with no session (`DURATION`, 0 = stop with the last session)"},
		&cli.BoolFlag{Name: "trace-start", Usage: "print on stderr when each part of the start or join happened, in ms since the command began"},
	}
}

// startTrace returns the --trace-start trace of c, nil when not asked
// for; its times count from began.
func startTrace(c *cli.Context, began time.Time) *session.StartTrace {
	if !c.Bool("trace-start") {
		return nil
	}
	return session.NewStartTrace(stderrOf(c), began)
}

func startCommand() *cli.Command {
	return &cli.Command{
		Name:      "start",
		Usage:     "open an interactive sandbox session in this terminal, starting or joining the Domain",
		ArgsUsage: "[-- ARGV...]",
		Flags:     append(sessionFlags(), publishFlags()...),
		Action:    runStart,
	}
}

// stderrOf is the command's error stream.
func stderrOf(c *cli.Context) io.Writer {
	if c.App.ErrWriter != nil {
		return c.App.ErrWriter
	}
	return os.Stderr
}

// fail prints one line and ends the command with the failure code.
func fail(c *cli.Context, format string, args ...any) error {
	return failCode(c, session.ExitFailure, format, args...)
}

// resolveTarget resolves the configuration of c's profile and workspace
// into the Domain to start or join. The caller closes the configuration.
func resolveTarget(c *cli.Context) (*session.Target, *config.ResolvedDomainConfiguration, error) {
	if c.Duration("linger") < 0 {
		return nil, nil, fail(c, "--linger %v: must not be negative", c.Duration("linger"))
	}
	cfg, file, err := resolveDomain(c, session.ExitFailure)
	if err != nil {
		return nil, nil, err
	}
	if err := paths.EnsureRuntimeRoot(cfg.RuntimeRoot(), os.Getuid()); err != nil {
		cfg.Close()
		return nil, nil, fail(c, "%v", err)
	}
	t := &session.Target{
		ConfigFile:  file,
		Profile:     cfg.Profile(),
		Workspace:   cfg.Workspace(),
		RuntimeRoot: cfg.RuntimeRoot(),
		StorageRoot: cfg.StorageRoot(),
		DomainID:    cfg.DomainID(),
		Fingerprint: cfg.Fingerprint(),
		Linger:      c.Duration("linger"),
	}
	return t, cfg, nil
}

// attach starts or joins t's Domain and registers a session on it.
// Progress goes to stderr when stderr is a terminal and the start takes
// longer than session.ProgressDelay.
func attach(ctx context.Context, c *cli.Context, t *session.Target, trace *session.StartTrace) (*session.Session, error) {
	return attachWith(ctx, c, t, trace, session.Register)
}

// attachWith is attach with the session's enrolment (and registration)
// done by join: session.Register, or session.Enroll for a command that
// registers its session together with its first request.
func attachWith(ctx context.Context, c *cli.Context, t *session.Target, trace *session.StartTrace, join func(context.Context, *control.Client, ids.SessionID) (*session.Session, error)) (*session.Session, error) {
	var progress session.Progress
	if session.IsTerminal(int(os.Stderr.Fd())) && stderrOf(c) == os.Stderr {
		progress = session.NewPrinter(os.Stderr, session.ProgressDelay)
	}
	a := session.NewAttacher(coordinatorBinary, progress)
	a.Kept = func(k session.KeptPaths) { printKept(stderrOf(c), t, k) }
	a.Trace = trace
	t.Session = ids.SessionID(ids.New())
	client, _, err := a.Attach(ctx, t)
	if err != nil {
		return nil, fail(c, "%v", err)
	}
	s, err := join(ctx, client, t.Session)
	if err != nil {
		client.Close()
		return nil, fail(c, "%v", err)
	}
	trace.Mark("enrolled")
	return s, nil
}

func runStart(c *cli.Context) error {
	in := os.Stdin
	if !session.IsTerminal(int(in.Fd())) {
		return fail(c, "start needs a terminal on standard input; for scripts use: lazaret-cli exec -- ARGV...")
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
	if err := checkBindable(ports, t.Paths().Dir); err != nil {
		cfg.Close()
		return fail(c, "%v", err)
	}
	image := cfg.Image()
	cfg.Close()
	trace.Mark("configuration resolved")
	argv := c.Args().Slice()
	if len(argv) == 0 {
		if argv, err = session.DefaultArgv(t.StorageRoot, image); err != nil {
			return fail(c, "%v", err)
		}
	}
	ctx := c.Context
	s, err := attach(ctx, c, t, trace)
	if err != nil {
		return err
	}
	defer s.Client.Close()
	if err := publish(c, s.Client, ports, true); err != nil {
		return err
	}
	code, err := interact(ctx, c, s, argv, t.LogPath())
	if err != nil {
		return err
	}
	if code != 0 {
		return &cmdmain.ExitError{Code: code}
	}
	return nil
}

// interact runs argv on a terminal session and returns the exit code. The
// developer's terminal is in raw mode only inside this function and is
// restored on every way out of it.
func interact(ctx context.Context, c *cli.Context, s *session.Session, argv []string, logPath string) (int, error) {
	fd := int(os.Stdin.Fd())
	// Stop signals are caught before the mode changes, so none can end the
	// process with the terminal left raw.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGWINCH, syscall.SIGHUP, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	rows, cols, xp, yp, err := session.Size(fd)
	if err != nil {
		rows, cols, xp, yp = 24, 80, 0, 0
	}
	ic, err := s.Client.Interactive(ctx, protocol.InteractiveSessionRequest{
		SessionID: s.ID(),
		Argv:      argv,
		InitialSize: protocol.TerminalResize{
			SessionID: s.ID(), Rows: rows, Columns: cols, PixelWidth: xp, PixelHeight: yp,
		},
	})
	if err != nil {
		return 0, fail(c, "%v", err)
	}
	defer ic.Close()
	term, err := session.MakeRaw(fd)
	if err != nil {
		return 0, fail(c, "%v", err)
	}
	restore := func() {
		if err := term.Restore(); err != nil {
			fmt.Fprintf(os.Stderr, "lazaret-cli: %v; run `stty sane` to repair the terminal\n", err)
		}
	}
	defer restore()
	p := &session.Pump{
		Channel:  ic,
		In:       os.Stdin,
		Out:      os.Stdout,
		SizeFd:   fd,
		Signals:  sigs,
		Prompter: session.TerminalPrompter{W: os.Stdout},
		Sign:     s.Sign,
		OnPanic:  restore,
	}
	// A resize between the request and raw mode is sent at once.
	if r2, c2, x2, y2, err := session.Size(fd); err == nil && (r2 != rows || c2 != cols) {
		_ = ic.Resize(r2, c2, x2, y2)
	}
	exit, err := p.Run(ctx)
	restore()
	var se *session.SignalError
	if errors.As(err, &se) {
		return session.ExitSignalBase + int(se.Signal), nil
	}
	if err != nil {
		return 0, fail(c, "%v", err)
	}
	return sessionExitCode(c, exit, logPath), nil
}

// sessionExitCode maps a session's end to the CLI's exit code, explaining on
// stderr an end that is not a plain exit.
func sessionExitCode(c *cli.Context, exit protocol.SessionExit, logPath string) int {
	code, msg := session.ExitCode(exit)
	if msg != "" {
		fmt.Fprintf(stderrOf(c), "%s; coordinator log: %s\n", msg, logPath)
	}
	return code
}

// coordinatorBinary locates lazaret-coordinator among the helpers.
func coordinatorBinary() (string, error) {
	f, err := locate.New()
	if err != nil {
		return "", err
	}
	return f.Find("lazaret-coordinator")
}
