package coordinator

import (
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"

	"lazaret.dev/pkg/domainstore"
	"lazaret.dev/pkg/isolation"
)

// Sticky isolation: before the daemon starts, the Domain Store's
// IsolatedPaths record is written to the generation's keep file; after
// its Ready, the daemon's report of the host entries that route to the
// isolated root is merged into that record, durably, before the sandbox
// starts. The entries isolated only because of the record are named in
// the start report.

// keepFile and isolationReport are the daemon's two files.
func (v *routeView) keepFile() string        { return v.s.path("isolation-keep") }
func (v *routeView) isolationReport() string { return v.s.path("isolation-report") }

// writeKeep writes the recorded set to the keep file and returns it.
func (v *routeView) writeKeep() (*isolation.Set, error) {
	s := v.s
	var keep *isolation.Set
	if err := s.store.View(func(tx *domainstore.Tx) error {
		var err error
		keep, err = tx.IsolatedPaths()
		return err
	}); err != nil {
		return nil, fmt.Errorf("reading the kept isolated paths: %w", err)
	}
	if err := writeNew(v.keepFile(), isolation.EncodeKeep(keep), 0o600); err != nil {
		return nil, err
	}
	return keep, nil
}

// mergeIsolationReport reads the daemon's report, checks it against the
// keep set it was given, records the union of both and returns the
// entries isolated only because of the keep set.
func (v *routeView) mergeIsolationReport(keep *isolation.Set) ([]isolation.Entry, error) {
	s := v.s
	path := v.isolationReport()
	data, err := readBounded(path, isolation.MaxFileSize)
	if err != nil {
		return nil, err
	}
	reported, err := isolation.ParseReport(data)
	if err != nil {
		return nil, fmt.Errorf("isolation report %q: %w", path, err)
	}
	var add, kept []isolation.Entry
	for _, r := range reported {
		if r.Reason == isolation.Kept {
			if !keep.Covers(r.Path) {
				return nil, fmt.Errorf("isolation report %q: %q is reported kept but is not in the keep file", path, r.Path)
			}
			kept = append(kept, r.Entry)
		}
		add = append(add, r.Entry)
	}
	merged, err := keep.Union(add)
	if err != nil {
		return nil, fmt.Errorf("merging the isolation report %q: %w", path, err)
	}
	if err := s.store.Update(func(tx *domainstore.Tx) error {
		// Re-read inside the transaction: nothing else writes the record
		// while this coordinator holds the store, but the union must be
		// with what is recorded, not with a copy.
		now, err := tx.IsolatedPaths()
		if err != nil {
			return err
		}
		all, err := now.Union(merged.Entries())
		if err != nil {
			return err
		}
		return tx.PutIsolatedPaths(all)
	}); err != nil {
		return nil, fmt.Errorf("recording the isolated paths: %w", err)
	}
	s.log.Info("isolated paths recorded", "reported", len(reported), "kept_only", len(kept), "recorded", merged.Len())
	return kept, nil
}

// readBounded reads the regular file path (not following a final link),
// refusing more than limit bytes.
func readBounded(path string, limit int64) ([]byte, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("reading %q: %w", path, err)
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%q is larger than %d bytes", path, limit)
	}
	return data, nil
}

// kept reports the paths isolated only because an earlier generation
// isolated them (startup.Writer.Kept bounds and counts them).
func (r *report) kept(entries []isolation.Entry) {
	paths := make([]string, len(entries))
	for i, e := range entries {
		paths[i] = e.String()
	}
	r.w.Kept(paths)
}
