package gitignore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"strings"
)

// Errors of the index reader; test with errors.Is.
var (
	// ErrIndexFormat means the index file is not one this reader accepts.
	ErrIndexFormat = errors.New("malformed git index")
	// ErrSplitIndex means the index is split (core.splitIndex), whose
	// entries live partly in a shared index; classification refuses it.
	ErrSplitIndex = errors.New("split git index is not supported (run: git update-index --no-split-index)")
)

// Index is the set of paths tracked in a git index, as of when it was read.
type Index struct {
	paths []string // sorted, unique
}

// HashSize is the object ID length of a repository's object format.
func HashSize(objectFormat string) (int, error) {
	switch strings.ToLower(objectFormat) {
	case "", "sha1":
		return 20, nil
	case "sha256":
		return 32, nil
	}
	return 0, fmt.Errorf("extensions.objectFormat %q: want sha1 or sha256", objectFormat)
}

// ParseIndex reads the path list of a git index file (versions 2, 3 and 4)
// whose object IDs are hashSize bytes long. Only the entries are read; the
// extensions after them are not interpreted, except that a split index is
// refused. An entry of a sparse index that names a directory (a path ending
// in "/") marks that directory as tracked.
func ParseIndex(data []byte, hashSize int) (*Index, error) {
	if len(data) < 12 || !bytes.Equal(data[:4], []byte("DIRC")) {
		return nil, fmt.Errorf("index header: %w", ErrIndexFormat)
	}
	version := binary.BigEndian.Uint32(data[4:8])
	if version < 2 || version > 4 {
		return nil, fmt.Errorf("index version %d: want 2, 3 or 4: %w", version, ErrIndexFormat)
	}
	count := binary.BigEndian.Uint32(data[8:12])
	if uint64(count) > uint64(len(data)) {
		return nil, fmt.Errorf("index claims %d entries in %d bytes: %w", count, len(data), ErrIndexFormat)
	}
	off := 12
	fixed := 40 + hashSize + 2 // stat data, object ID, flags
	paths := make([]string, 0, count)
	var prev []byte
	for n := uint32(0); n < count; n++ {
		start := off
		if off+fixed > len(data) {
			return nil, fmt.Errorf("index entry %d: truncated: %w", n, ErrIndexFormat)
		}
		flags := binary.BigEndian.Uint16(data[off+40+hashSize:])
		off += fixed
		if flags&0x4000 != 0 {
			if version < 3 {
				return nil, fmt.Errorf("index entry %d: extended flag in version 2: %w", n, ErrIndexFormat)
			}
			off += 2
		}
		var name []byte
		if version == 4 {
			strip, used := indexVarint(data[min(off, len(data)):])
			if used == 0 || strip > uint64(len(prev)) {
				return nil, fmt.Errorf("index entry %d: bad path compression: %w", n, ErrIndexFormat)
			}
			off += used
			end := bytes.IndexByte(data[min(off, len(data)):], 0)
			if end < 0 {
				return nil, fmt.Errorf("index entry %d: unterminated path: %w", n, ErrIndexFormat)
			}
			name = append(append([]byte(nil), prev[:uint64(len(prev))-strip]...), data[off:off+end]...)
			off += end + 1
		} else {
			end := bytes.IndexByte(data[min(off, len(data)):], 0)
			if end < 0 {
				return nil, fmt.Errorf("index entry %d: unterminated path: %w", n, ErrIndexFormat)
			}
			name = data[off : off+end]
			// Entries are padded with 1 to 8 NULs to a multiple of 8.
			off = start + (off-start+end+8)&^7
			if off > len(data) {
				return nil, fmt.Errorf("index entry %d: truncated padding: %w", n, ErrIndexFormat)
			}
		}
		if len(name) == 0 || name[0] == '/' {
			return nil, fmt.Errorf("index entry %d: path %q: %w", n, name, ErrIndexFormat)
		}
		paths = append(paths, string(name))
		prev = name
	}
	if hasExtension(data[off:], hashSize, "link") {
		return nil, ErrSplitIndex
	}
	sort.Strings(paths)
	uniq := paths[:0]
	for i, p := range paths {
		if i == 0 || p != paths[i-1] {
			uniq = append(uniq, p)
		}
	}
	return &Index{paths: uniq}, nil
}

// indexVarint decodes git's offset varint (each continuation adds one before
// shifting). It returns 0 bytes used on malformed input.
func indexVarint(b []byte) (uint64, int) {
	var v uint64
	for i, c := range b {
		if i >= 9 {
			return 0, 0
		}
		if i > 0 {
			v++
		}
		v = v<<7 | uint64(c&0x7f)
		if c&0x80 == 0 {
			return v, i + 1
		}
	}
	return 0, 0
}

// hasExtension walks the extension records after the entries and reports
// whether one has the given four-byte signature.
func hasExtension(b []byte, hashSize int, sig string) bool {
	for len(b) >= 8+hashSize {
		size := binary.BigEndian.Uint32(b[4:8])
		if string(b[:4]) == sig {
			return true
		}
		if uint64(size) > uint64(len(b)-8) {
			return false
		}
		b = b[8+size:]
	}
	return false
}

// Len is the number of tracked paths.
func (x *Index) Len() int {
	if x == nil {
		return 0
	}
	return len(x.paths)
}

// Tracked reports whether path is a tracked file, or a directory that holds
// a tracked path (or is itself a sparse-index directory entry).
func (x *Index) Tracked(path string, isDir bool) bool {
	if x == nil {
		return false
	}
	if !isDir {
		i := sort.SearchStrings(x.paths, path)
		return i < len(x.paths) && x.paths[i] == path
	}
	prefix := path + "/"
	i := sort.SearchStrings(x.paths, prefix)
	return i < len(x.paths) && strings.HasPrefix(x.paths[i], prefix)
}
