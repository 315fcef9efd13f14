package cli

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"lazaret.dev/lazaret-cli/internal/session"
	"lazaret.dev/pkg/audit"
	"lazaret.dev/pkg/cmdmain"
	"lazaret.dev/pkg/control"
	"lazaret.dev/pkg/escalation"
)

// exitLogBroken is log's exit code when the audit log cannot be read or
// fails verification.
const exitLogBroken = 1

func logCommand() *cli.Command {
	return &cli.Command{
		Name:  "log",
		Usage: "show the Domain's escalation audit log (every request, who or which rule decided, outcome, exit code) after verifying its hash chain",
		Flags: []cli.Flag{
			profileFlag(),
			workspaceFlag(),
			configFileFlag(),
			domainFlag("the Domain `ID` (64 hexadecimal digits) instead of --profile and --workspace, for a Domain whose profile no longer resolves"),
			storageRootFlag(),
			jsonFlag("the records as one array"),
		},
		Action: runLog,
	}
}

func runLog(c *cli.Context) error {
	if c.Args().Present() {
		return fail(c, "log takes no arguments, got %q", c.Args().First())
	}
	path, what, runDir, err := auditLogOf(c)
	if err != nil {
		return err
	}
	w := c.App.Writer
	if w == nil {
		w = os.Stdout
	}
	recs, err := audit.Read(path)
	if errors.Is(err, fs.ErrNotExist) {
		msg := fmt.Sprintf("no audit log for %s yet (%s)\n", what, path)
		if c.Bool("json") {
			if err := writeJSON(w, []audit.Record{}); err != nil {
				return err
			}
			_, err := io.WriteString(stderrOf(c), msg)
			return err
		}
		if _, err := io.WriteString(w, msg); err != nil {
			return err
		}
		return brokerRefusals(w, runDir)
	}
	var line *audit.LineError
	if err != nil && !errors.As(err, &line) {
		fmt.Fprintf(stderrOf(c), "lazaret-cli: reading the audit log of %s: %v\n", what, err)
		return &cmdmain.ExitError{Code: exitLogBroken}
	}
	// A broken file still shows the records before the bad line.
	var werr error
	switch {
	case c.Bool("json"):
		if recs == nil {
			recs = []audit.Record{}
		}
		werr = writeJSON(w, recs)
	case len(recs) == 0 && err == nil:
		_, werr = fmt.Fprintf(w, "no escalation requests recorded for %s yet (%s)\n", what, path)
	default:
		werr = writeLogText(w, recs)
	}
	if werr == nil && !c.Bool("json") {
		werr = brokerRefusals(w, runDir)
	}
	if werr != nil {
		return werr
	}
	if err != nil {
		fmt.Fprintf(stderrOf(c), "lazaret-cli: %v\n", err)
		return &cmdmain.ExitError{Code: exitLogBroken}
	}
	return nil
}

// auditLogOf finds the audit log file from --domain, or from the
// configuration of --profile (else its only profile) and --workspace, and
// describes its Domain; runDir is the Domain's runtime directory, where
// a running generation's name log is. The storage root is --storage-root
// when given, else the configuration's.
func auditLogOf(c *cli.Context) (path, what, runDir string, err error) {
	if dom := c.String("domain"); dom != "" {
		for _, f := range []string{"profile", "workspace"} {
			if c.IsSet(f) {
				return "", "", "", fail(c, "--domain names the Domain itself; give it without --%s", f)
			}
		}
		id, err := parseDomainID(dom)
		if err != nil {
			return "", "", "", fail(c, "%v", err)
		}
		r, err := resolveRoots(c, session.ExitFailure)
		if err != nil {
			return "", "", "", err
		}
		return audit.Path(r.StorageRoot, id), "Domain " + id.String(), control.DomainPaths(r.RuntimeRoot, id).Dir, nil
	}
	cfg, _, err := resolveDomain(c, session.ExitFailure)
	if err != nil {
		return "", "", "", err
	}
	defer cfg.Close()
	root := cfg.StorageRoot()
	if _, ok := flagValue(c, "storage-root"); ok {
		r, err := resolveRoots(c, session.ExitFailure)
		if err != nil {
			return "", "", "", err
		}
		root = r.StorageRoot
	}
	return audit.Path(root, cfg.DomainID()), fmt.Sprintf("the Domain of profile %q in %s", cfg.Profile(), cfg.Workspace()), control.DomainPaths(cfg.RuntimeRoot(), cfg.DomainID()).Dir, nil
}

// writeLogText prints one line per record: time (UTC, seconds), the
// request ID's first 8 hex digits, phase, approval source, exit code when
// there is one, the argv with each element quoted and control and escape
// characters made visible, and the reason, quoted the same way.
func writeLogText(w io.Writer, recs []audit.Record) error {
	var b strings.Builder
	for _, r := range recs {
		fmt.Fprintf(&b, "%s  request %s  %s", r.Time.UTC().Format(time.RFC3339), r.Request.String()[:8], r.Phase)
		switch r.Source {
		case escalation.SourceAutoRule:
			fmt.Fprintf(&b, "  AutoRule rule %d", r.Rule)
		case escalation.SourceDeveloper:
			b.WriteString("  Developer")
		}
		if r.ExitCode != nil {
			fmt.Fprintf(&b, "  exit %d", *r.ExitCode)
		}
		b.WriteString("  ")
		b.WriteString(visibleArgv(r.Argv))
		if r.Reason != "" {
			b.WriteString("  reason ")
			b.WriteString(strconv.QuoteToASCII(r.Reason))
		}
		b.WriteByte('\n')
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// visibleArgv quotes each element as a Go string of printable ASCII, as
// the escalation prompt shows it, so a recorded argv cannot draw on the
// terminal.
func visibleArgv(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = strconv.QuoteToASCII(a)
	}
	return strings.Join(q, " ")
}
