package domainstore

import (
	"bytes"
	"fmt"
	"io/fs"
	"sort"

	"lazaret.dev/pkg/ids"
	"lazaret.dev/pkg/isolation"
	"lazaret.dev/pkg/store"
	"lazaret.dev/pkg/store/codec"
)

// The workspace records are the Domain's, not a generation's, and are
// not part of the schema's Domain Store: they live in a bucket of their
// own, made by the first write, so a store written before them reads as
// one without them (no kept paths, no review baseline) and its other
// records and their encodings are unchanged.
var (
	bucketWorkspace = []byte("workspace") // "isolated" -> IsolatedPaths, "review_baseline" -> ReviewBaseline
	keyIsolated     = []byte("isolated")
	keyReview       = []byte("review_baseline")
)

// IsolatedPaths is the sticky isolation set: every host path a generation
// of this Domain routed to the isolated root, kept isolated in later
// generations until the developer releases it. Paths are bytes, since a
// git path need not be UTF-8; they are valid isolation paths in strictly
// increasing order.
type IsolatedPaths struct {
	Paths []IsolatedPath `cbor:"paths"`
}

// IsolatedPath is one kept host path; Dir says it was a directory when
// last seen.
type IsolatedPath struct {
	Path []byte `cbor:"path"`
	Dir  bool   `cbor:"dir"`
}

// ReviewBaseline is the state, at the start of a generation, of the
// workspace files host tools execute (package hosttools): what
// `lazaret-cli workspace review` compares the workspace with. Files are in
// strictly increasing path order.
type ReviewBaseline struct {
	TakenAtUnix int64        `cbor:"taken_at_unix"`
	Files       []ReviewFile `cbor:"files"`
}

// ReviewFile is one file of a baseline: its st_mode (type and permission
// bits) and the SHA-256 of its content (of its target, for a symbolic
// link).
type ReviewFile struct {
	Path   []byte     `cbor:"path"`
	Mode   uint32     `cbor:"mode"`
	SHA256 ids.Digest `cbor:"sha256"`
}

func workspaceRecordError(what string, key []byte, err error) error {
	return &store.RecordError{Record: what, Key: "workspace " + string(key), Class: store.ErrInvalidRecord, Err: err}
}

// getWorkspace decodes the workspace row key into v; found is false when
// the bucket or the row is absent.
func (tx *Tx) getWorkspace(key []byte, what string, v any) (bool, error) {
	b := tx.tx.Bucket(bucketWorkspace)
	if b == nil {
		return false, nil
	}
	raw := b.Get(key)
	if raw == nil {
		return false, nil
	}
	if err := codec.Unmarshal(raw, v); err != nil {
		return true, workspaceRecordError(what, key, err)
	}
	return true, nil
}

func (tx *Tx) putWorkspace(key []byte, v any) error {
	b, err := tx.tx.CreateBucketIfNotExists(bucketWorkspace)
	if err != nil {
		return fmt.Errorf("creating the workspace bucket: %w", err)
	}
	if v == nil {
		return b.Delete(key)
	}
	raw, err := codec.Marshal(v)
	if err != nil {
		return err
	}
	return b.Put(key, raw)
}

// Set checks the record and returns its set.
func (r IsolatedPaths) Set() (*isolation.Set, error) {
	entries := make([]isolation.Entry, len(r.Paths))
	for i, p := range r.Paths {
		if i > 0 && bytes.Compare(r.Paths[i-1].Path, p.Path) >= 0 {
			return nil, fmt.Errorf("paths[%d] %q is not after %q", i, p.Path, r.Paths[i-1].Path)
		}
		entries[i] = isolation.Entry{Path: string(p.Path), Dir: p.Dir}
	}
	s, err := isolation.NewSet(entries)
	if err != nil {
		return nil, fmt.Errorf("paths: %w", err)
	}
	return s, nil
}

// NewIsolatedPaths is the record of s.
func NewIsolatedPaths(s *isolation.Set) IsolatedPaths {
	r := IsolatedPaths{Paths: []IsolatedPath{}}
	for _, e := range s.Entries() {
		r.Paths = append(r.Paths, IsolatedPath{Path: []byte(e.Path), Dir: e.Dir})
	}
	return r
}

// IsolatedPaths returns the sticky isolation set; a store without the
// record holds the empty set. A damaged record is an error, never an
// empty set.
func (tx *Tx) IsolatedPaths() (*isolation.Set, error) {
	var r IsolatedPaths
	found, err := tx.getWorkspace(keyIsolated, "isolated paths", &r)
	if err != nil || !found {
		return &isolation.Set{}, err
	}
	s, err := r.Set()
	if err != nil {
		return nil, workspaceRecordError("isolated paths", keyIsolated, err)
	}
	return s, nil
}

// PutIsolatedPaths records s as the sticky isolation set; the empty set
// removes the record.
func (tx *Tx) PutIsolatedPaths(s *isolation.Set) error {
	if s.Len() == 0 {
		if tx.tx.Bucket(bucketWorkspace) == nil {
			return nil
		}
		return tx.putWorkspace(keyIsolated, nil)
	}
	return tx.putWorkspace(keyIsolated, NewIsolatedPaths(s))
}

// Validate checks a baseline: valid paths in strictly increasing order,
// and modes of regular files or symbolic links.
func (b ReviewBaseline) Validate() error {
	if b.TakenAtUnix <= 0 {
		return fmt.Errorf("taken_at_unix %d: must be positive", b.TakenAtUnix)
	}
	if len(b.Files) > isolation.MaxEntries {
		return fmt.Errorf("files: %d entries, more than %d", len(b.Files), isolation.MaxEntries)
	}
	for i, f := range b.Files {
		if err := isolation.CheckPath(string(f.Path)); err != nil {
			return fmt.Errorf("files[%d].path: %w", i, err)
		}
		if i > 0 && bytes.Compare(b.Files[i-1].Path, f.Path) >= 0 {
			return fmt.Errorf("files[%d].path %q is not after %q", i, f.Path, b.Files[i-1].Path)
		}
		if t := fs.FileMode(f.Mode & 0o170000); t != 0o100000 && t != 0o120000 {
			return fmt.Errorf("files[%d].mode %#o: not a regular file or symbolic link", i, f.Mode)
		}
		if f.Mode&^0o177777 != 0 {
			return fmt.Errorf("files[%d].mode %#o: unknown bits", i, f.Mode)
		}
	}
	return nil
}

// SortReviewFiles puts files in the order a baseline requires.
func SortReviewFiles(files []ReviewFile) {
	sort.Slice(files, func(i, j int) bool { return bytes.Compare(files[i].Path, files[j].Path) < 0 })
}

// ReviewBaseline returns the pending review baseline; found is false when
// none was taken.
func (tx *Tx) ReviewBaseline() (ReviewBaseline, bool, error) {
	var b ReviewBaseline
	found, err := tx.getWorkspace(keyReview, "review baseline", &b)
	if err != nil || !found {
		return ReviewBaseline{}, false, err
	}
	if err := b.Validate(); err != nil {
		return ReviewBaseline{}, true, workspaceRecordError("review baseline", keyReview, err)
	}
	return b, true, nil
}

// PutReviewBaseline records b as the pending baseline, replacing any.
func (tx *Tx) PutReviewBaseline(b ReviewBaseline) error {
	if err := b.Validate(); err != nil {
		return &store.RecordError{Record: "review baseline", Key: "workspace " + string(keyReview), Class: store.ErrInvalidRecord, Err: err}
	}
	if b.Files == nil {
		b.Files = []ReviewFile{}
	}
	return tx.putWorkspace(keyReview, b)
}

// ReleaseIsolated removes paths from the sticky isolation set and returns
// the entries removed. A path not in the set is an error naming it
// (isolation.ErrNotKept), and nothing is removed.
func (tx *Tx) ReleaseIsolated(paths []string) ([]isolation.Entry, error) {
	s, err := tx.IsolatedPaths()
	if err != nil {
		return nil, err
	}
	rest, removed, err := s.Without(paths)
	if err != nil {
		return nil, err
	}
	if err := tx.PutIsolatedPaths(rest); err != nil {
		return nil, err
	}
	return removed, nil
}
