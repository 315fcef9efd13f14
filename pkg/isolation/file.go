package isolation

import (
	"bytes"
	"errors"
	"fmt"
)

// The two files share one layout: a header line naming the file and its
// version, then one record per entry, each terminated by NUL (paths may
// hold newlines, never NUL). A record is the path, with a trailing "/"
// for a directory; a report record starts with its Reason byte. Records
// are in strictly increasing byte order of their paths (without the
// trailing slash), so each path appears once. Nothing follows the last
// NUL.
//
//	keep file:   "lazaret-keep-isolated-v1\n" ( path ["/"] NUL )*
//	report file: "lazaret-isolation-report-v1\n" ( ("i" | "k") path ["/"] NUL )*
const (
	keepHeader   = "lazaret-keep-isolated-v1\n"
	reportHeader = "lazaret-isolation-report-v1\n"
)

// Bounds of one file and of a set.
const (
	MaxEntries  = 1 << 20
	MaxFileSize = 64 << 20
)

// Errors of the files and sets; test with errors.Is.
var (
	// ErrFormat means a keep file or report breaks the layout.
	ErrFormat = errors.New("malformed isolation file")
	// ErrTooMany means more than MaxEntries entries or MaxFileSize bytes.
	ErrTooMany = errors.New("more isolated paths than the limit (1048576 paths, 64 MiB)")
	// ErrNotKept means a path to release is not in the set.
	ErrNotKept = errors.New("not kept isolated")
)

// Reason says why a reported host entry routes to the isolated root.
type Reason byte

const (
	// Ignored means git ignores the entry now (it would be isolated
	// without the keep set).
	Ignored Reason = 'i'
	// Kept means only the keep set isolates it: an earlier generation did,
	// and the ignore files or the index have changed since.
	Kept Reason = 'k'
)

func (r Reason) String() string {
	switch r {
	case Ignored:
		return "ignored"
	case Kept:
		return "kept"
	}
	return fmt.Sprintf("Reason(%d)", byte(r))
}

// Reported is one report record.
type Reported struct {
	Entry
	Reason Reason
}

// EncodeKeep returns the keep file of s.
func EncodeKeep(s *Set) []byte {
	b := []byte(keepHeader)
	for _, e := range s.Entries() {
		b = append(b, e.String()...)
		b = append(b, 0)
	}
	return b
}

// ParseKeep decodes a keep file strictly.
func ParseKeep(data []byte) (*Set, error) {
	var entries []Entry
	err := parse(data, keepHeader, false, func(e Entry, _ Reason) { entries = append(entries, e) })
	if err != nil {
		return nil, err
	}
	return NewSet(entries)
}

// EncodeReport returns the report of rs, which must be valid entries in
// increasing path order with known reasons (what ParseReport accepts).
func EncodeReport(rs []Reported) ([]byte, error) {
	b := []byte(reportHeader)
	for i, r := range rs {
		if err := CheckPath(r.Path); err != nil {
			return nil, err
		}
		if r.Reason != Ignored && r.Reason != Kept {
			return nil, fmt.Errorf("%w: record %d: reason %v", ErrFormat, i, r.Reason)
		}
		if i > 0 && rs[i-1].Path >= r.Path {
			return nil, fmt.Errorf("%w: record %d (%q) out of order", ErrFormat, i, r.Path)
		}
		b = append(b, byte(r.Reason))
		b = append(b, r.String()...)
		b = append(b, 0)
	}
	if len(rs) > MaxEntries || len(b) > MaxFileSize {
		return nil, fmt.Errorf("%d paths in %d bytes: %w", len(rs), len(b), ErrTooMany)
	}
	return b, nil
}

// ParseReport decodes a report strictly.
func ParseReport(data []byte) ([]Reported, error) {
	var rs []Reported
	err := parse(data, reportHeader, true, func(e Entry, r Reason) { rs = append(rs, Reported{Entry: e, Reason: r}) })
	return rs, err
}

func parse(data []byte, header string, reasons bool, add func(Entry, Reason)) error {
	if len(data) > MaxFileSize {
		return fmt.Errorf("%d bytes: %w", len(data), ErrTooMany)
	}
	if !bytes.HasPrefix(data, []byte(header)) {
		return fmt.Errorf("%w: header is not %q", ErrFormat, header[:len(header)-1])
	}
	rest := data[len(header):]
	prev := ""
	for n := 0; len(rest) > 0; n++ {
		if n == MaxEntries {
			return fmt.Errorf("more than %d records: %w", MaxEntries, ErrTooMany)
		}
		end := bytes.IndexByte(rest, 0)
		if end < 0 {
			return fmt.Errorf("%w: record %d is not NUL-terminated", ErrFormat, n)
		}
		rec := string(rest[:end])
		rest = rest[end+1:]
		var reason Reason
		if reasons {
			if rec == "" {
				return fmt.Errorf("%w: record %d is empty", ErrFormat, n)
			}
			reason = Reason(rec[0])
			if reason != Ignored && reason != Kept {
				return fmt.Errorf("%w: record %d: unknown reason %q", ErrFormat, n, rec[0])
			}
			rec = rec[1:]
		}
		e := Entry{Path: rec}
		if len(rec) > 0 && rec[len(rec)-1] == '/' {
			e = Entry{Path: rec[:len(rec)-1], Dir: true}
		}
		if err := CheckPath(e.Path); err != nil {
			return fmt.Errorf("%w: record %d: %w", ErrFormat, n, err)
		}
		if n > 0 && e.Path <= prev {
			return fmt.Errorf("%w: record %d (%q) is not after %q", ErrFormat, n, e.Path, prev)
		}
		prev = e.Path
		add(e, reason)
	}
	return nil
}
