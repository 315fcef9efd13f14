package hosttools

import (
	"fmt"
	"io/fs"
	"sort"

	"lazaret.dev/pkg/ids"
)

// File is the state of one matching workspace file.
type File struct {
	Path string
	// Mode is the st_mode (file type and permission bits).
	Mode uint32
	// SHA256 is of the content, or of the target of a symbolic link.
	SHA256 ids.Digest
}

// Kind is what happened to a file since the baseline.
type Kind uint8

const (
	Added Kind = iota + 1
	Removed
	Modified
	ModeChanged
)

func (k Kind) String() string {
	switch k {
	case Added:
		return "added"
	case Removed:
		return "removed"
	case Modified:
		return "modified"
	case ModeChanged:
		return "mode changed"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Change is one difference between a baseline and the workspace now.
type Change struct {
	Path string
	Kind Kind
	// OldMode and NewMode are the modes before and after (0 where absent).
	OldMode, NewMode uint32
	Rule             Rule
}

// String is one line of the review.
func (c Change) String() string {
	s := fmt.Sprintf("%-12s %q (%s)", c.Kind, c.Path, c.Rule.Tool)
	if c.OldMode != 0 && c.NewMode != 0 && c.OldMode != c.NewMode {
		s += fmt.Sprintf(", mode %v -> %v", modeString(c.OldMode), modeString(c.NewMode))
	}
	return s
}

func modeString(m uint32) string {
	mode := fs.FileMode(m & 0o777)
	if m&0o170000 == 0o120000 {
		mode |= fs.ModeSymlink
	}
	if m&0o4000 != 0 {
		mode |= fs.ModeSetuid
	}
	if m&0o2000 != 0 {
		mode |= fs.ModeSetgid
	}
	return mode.String()
}

// Plan lists the changes from baseline to now, in path order: added,
// removed, modified (content, or file type, differs; a mode change is
// shown with it) and mode changed (same content, other mode). Files are
// keyed by path; neither list may name a path twice.
func Plan(baseline, now []File) ([]Change, error) {
	before, err := byPath(baseline, "baseline")
	if err != nil {
		return nil, err
	}
	after, err := byPath(now, "workspace")
	if err != nil {
		return nil, err
	}
	var out []Change
	for p, b := range before {
		rule, _ := Match(p)
		a, ok := after[p]
		switch {
		case !ok:
			out = append(out, Change{Path: p, Kind: Removed, OldMode: b.Mode, Rule: rule})
		case a.SHA256 != b.SHA256 || a.Mode&0o170000 != b.Mode&0o170000:
			out = append(out, Change{Path: p, Kind: Modified, OldMode: b.Mode, NewMode: a.Mode, Rule: rule})
		case a.Mode != b.Mode:
			out = append(out, Change{Path: p, Kind: ModeChanged, OldMode: b.Mode, NewMode: a.Mode, Rule: rule})
		}
	}
	for p, a := range after {
		if _, ok := before[p]; !ok {
			rule, _ := Match(p)
			out = append(out, Change{Path: p, Kind: Added, NewMode: a.Mode, Rule: rule})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

func byPath(files []File, what string) (map[string]File, error) {
	m := make(map[string]File, len(files))
	for _, f := range files {
		if _, dup := m[f.Path]; dup {
			return nil, fmt.Errorf("%s lists %q twice", what, f.Path)
		}
		m[f.Path] = f
	}
	return m, nil
}
