package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"lazaret.dev/lazaret-cli/internal/session"
	"lazaret.dev/pkg/cmdmain"
	"lazaret.dev/pkg/domainstore"
	"lazaret.dev/pkg/hosttools"
	"lazaret.dev/pkg/isolation"
	"lazaret.dev/pkg/store"
)

// The workspace commands act on the Domain Store of a stopped Domain: a
// running coordinator holds the store, and what they change (the kept
// isolated paths, the review baseline) is read at the next generation's
// start anyway.

func workspaceCommand() *cli.Command {
	flags := func() []cli.Flag {
		return []cli.Flag{
			profileFlag(),
			workspaceFlag(),
			configFileFlag(),
		}
	}
	return &cli.Command{
		Name:  "workspace",
		Usage: "the workspace view's kept isolated paths, and the review of files host tools run",
		Subcommands: []*cli.Command{
			{
				Name:   "isolated",
				Usage:  "list the host paths kept isolated from the sandbox until released",
				Flags:  flags(),
				Action: runWorkspaceIsolated,
			},
			{
				Name:      "release",
				Usage:     "let the next generation route PATHs by the host's ignore files and index again",
				ArgsUsage: "PATH...",
				Flags:     flags(),
				Action:    runWorkspaceRelease,
			},
			{
				Name:   "review",
				Usage:  "list what changed among the files host tools run since the review baseline",
				Flags:  append(flags(), &cli.BoolFlag{Name: "accept", Usage: "take a new baseline of the workspace as it is now"}),
				Action: runWorkspaceReview,
			},
		},
	}
}

// openStopped opens the Domain Store of t's Domain for a write, refusing
// while a coordinator holds it. missing reports that the Domain never
// started (no store).
func openStopped(c *cli.Context, t *session.Target) (st *domainstore.Store, missing bool, err error) {
	st, err = domainstore.Open(t.StorageRoot, t.DomainID, domainstore.Options{LockTimeout: time.Second})
	switch {
	case err == nil:
		return st, false, nil
	case errors.Is(err, store.ErrNotFound):
		return nil, true, nil
	case errors.Is(err, store.ErrLocked):
		return nil, false, fail(c, "the Domain of profile %q in %s is running (its coordinator holds %s); stop it first: lazaret-cli stop --profile %s",
			t.Profile, t.Workspace, domainstore.Path(t.StorageRoot, t.DomainID), t.Profile)
	}
	return nil, false, fail(c, "opening the Domain Store %s: %v", domainstore.Path(t.StorageRoot, t.DomainID), err)
}

func workspaceTarget(c *cli.Context) (*session.Target, error) {
	t, cfg, err := resolveTarget(c)
	if err != nil {
		return nil, err
	}
	cfg.Close()
	return t, nil
}

func stdoutOf(c *cli.Context) io.Writer {
	if c.App.Writer != nil {
		return c.App.Writer
	}
	return os.Stdout
}

// showPath prints a workspace path on one line, quoted only when it holds
// something a terminal would not show as itself.
func showPath(p string) string {
	q := strconv.QuoteToASCII(p)
	if q[1:len(q)-1] == p && !strings.ContainsAny(p, " ") {
		return p
	}
	return q
}

func runWorkspaceIsolated(c *cli.Context) error {
	if c.Args().Present() {
		return fail(c, "workspace isolated takes no arguments, got %q", c.Args().First())
	}
	t, err := workspaceTarget(c)
	if err != nil {
		return err
	}
	st, missing, err := openStopped(c, t)
	if err != nil {
		return err
	}
	set := &isolation.Set{}
	if !missing {
		defer st.Close()
		if err := st.View(func(tx *domainstore.Tx) error { var e error; set, e = tx.IsolatedPaths(); return e }); err != nil {
			return fail(c, "reading the kept isolated paths from %s: %v", st.Path(), err)
		}
	}
	w := stdoutOf(c)
	if set.Len() == 0 {
		fmt.Fprintf(w, "no host paths kept isolated for profile %q in %s\n", t.Profile, t.Workspace)
		return nil
	}
	fmt.Fprintf(w, "%d host path(s) kept isolated for profile %q in %s (release one with: lazaret-cli workspace release --profile %s PATH):\n",
		set.Len(), t.Profile, t.Workspace, t.Profile)
	for _, e := range set.Entries() {
		fmt.Fprintf(w, "  %s\n", showPath(e.String()))
	}
	return nil
}

// releasePath turns a command-line path into a workspace path: relative to
// the workspace root (an absolute path must lie inside it), a directory's
// trailing slash dropped.
func releasePath(workspace, arg string) (string, error) {
	p := arg
	if filepath.IsAbs(p) {
		rel, err := filepath.Rel(workspace, p)
		if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
			return "", fmt.Errorf("%q is not inside the workspace %s", arg, workspace)
		}
		p = rel
	}
	p = strings.TrimSuffix(p, "/")
	if err := isolation.CheckPath(p); err != nil {
		return "", fmt.Errorf("%q: %w", arg, err)
	}
	return p, nil
}

func runWorkspaceRelease(c *cli.Context) error {
	if !c.Args().Present() {
		return fail(c, "workspace release needs the PATHs to release (see: lazaret-cli workspace isolated --profile %s)", c.String("profile"))
	}
	t, err := workspaceTarget(c)
	if err != nil {
		return err
	}
	var paths []string
	for _, a := range c.Args().Slice() {
		p, err := releasePath(t.Workspace, a)
		if err != nil {
			return fail(c, "%v", err)
		}
		paths = append(paths, p)
	}
	st, missing, err := openStopped(c, t)
	if err != nil {
		return err
	}
	if missing {
		return fail(c, "%s is not kept isolated: profile %q has no Domain Store in %s yet", showPath(paths[0]), t.Profile, t.Workspace)
	}
	defer st.Close()
	var removed []isolation.Entry
	err = st.Update(func(tx *domainstore.Tx) error { var e error; removed, e = tx.ReleaseIsolated(paths); return e })
	if errors.Is(err, isolation.ErrNotKept) {
		return fail(c, "%v for profile %q in %s; nothing was released (list the kept paths with: lazaret-cli workspace isolated --profile %s)",
			err, t.Profile, t.Workspace, t.Profile)
	}
	if err != nil {
		return fail(c, "releasing isolated paths in %s: %v", st.Path(), err)
	}
	w := stdoutOf(c)
	for _, e := range removed {
		fmt.Fprintf(w, "released %s: from the next generation of profile %q it routes by the host's ignore files and index (now: %s)\n",
			showPath(e.String()), t.Profile, routeNow(t.Workspace, e))
	}
	return nil
}

// routeNow says, as a hint, whether the host holds the released path.
func routeNow(workspace string, e isolation.Entry) string {
	if _, err := os.Lstat(filepath.Join(workspace, filepath.FromSlash(e.Path))); err != nil {
		return "absent on the host"
	}
	return "present on the host; check `git status --ignored` and `git ls-files -v` before starting"
}

func runWorkspaceReview(c *cli.Context) error {
	if c.Args().Present() {
		return fail(c, "workspace review takes no arguments, got %q", c.Args().First())
	}
	t, err := workspaceTarget(c)
	if err != nil {
		return err
	}
	st, missing, err := openStopped(c, t)
	if err != nil {
		return err
	}
	if missing {
		return fail(c, "profile %q has no Domain Store in %s yet: no generation ran, so there is nothing to review", t.Profile, t.Workspace)
	}
	defer st.Close()
	w := stdoutOf(c)
	if c.Bool("accept") {
		b, err := hosttools.TakeBaseline(t.Workspace, time.Now())
		if err != nil {
			return fail(c, "taking the review baseline: %v", err)
		}
		if err := st.Update(func(tx *domainstore.Tx) error { return tx.PutReviewBaseline(b) }); err != nil {
			return fail(c, "recording the review baseline in %s: %v", st.Path(), err)
		}
		fmt.Fprintf(w, "accepted the workspace as it is: new review baseline of %d files host tools run, for profile %q in %s\n", len(b.Files), t.Profile, t.Workspace)
		return nil
	}
	var base domainstore.ReviewBaseline
	var found bool
	if err := st.View(func(tx *domainstore.Tx) error { var e error; base, found, e = tx.ReviewBaseline(); return e }); err != nil {
		return fail(c, "reading the review baseline from %s: %v", st.Path(), err)
	}
	if !found {
		return fail(c, "profile %q in %s has no review baseline (taken when a generation starts); take one with: lazaret-cli workspace review --accept --profile %s", t.Profile, t.Workspace, t.Profile)
	}
	now, err := hosttools.Scan(t.Workspace)
	if err != nil {
		return fail(c, "scanning %s: %v", t.Workspace, err)
	}
	changes, err := hosttools.Plan(hosttools.BaselineFiles(base), now)
	if err != nil {
		return fail(c, "comparing with the review baseline: %v", err)
	}
	since := time.Unix(base.TakenAtUnix, 0).UTC().Format(time.RFC3339)
	if len(changes) == 0 {
		fmt.Fprintf(w, "no changes to files host tools run since %s (profile %q in %s)\n", since, t.Profile, t.Workspace)
		return nil
	}
	noun := "changes"
	if len(changes) == 1 {
		noun = "change"
	}
	fmt.Fprintf(w, "%d %s to files host tools run since %s (profile %q in %s); read them before running those tools, then: lazaret-cli workspace review --accept --profile %s\n",
		len(changes), noun, since, t.Profile, t.Workspace, t.Profile)
	for _, ch := range changes {
		fmt.Fprintf(w, "  %s\n", ch)
	}
	// Exit 1 when there is something to review, as diff does.
	return &cmdmain.ExitError{Code: 1}
}

// printKept tells the developer which host paths the new generation kept
// isolated only because an earlier one did.
func printKept(w io.Writer, t *session.Target, k session.KeptPaths) {
	fmt.Fprintf(w, "lazaret-cli: kept isolated from the sandbox, because an earlier generation isolated them and the ignore files or the index have changed since (a sandbox's `git add -f`, skip-worktree or assume-unchanged flag, or .gitignore edit would otherwise expose them):\n")
	for _, p := range k.Paths {
		fmt.Fprintf(w, "  %s\n", showPath(p))
	}
	if k.More > 0 {
		fmt.Fprintf(w, "  ... and %d more (lazaret-cli workspace isolated --profile %s)\n", k.More, t.Profile)
	}
	fmt.Fprintf(w, "lazaret-cli: check them on the host (git status --ignored, git ls-files -v, git log); to expose one to the next generation: lazaret-cli workspace release --profile %s PATH\n", t.Profile)
}
