// Package scan walks a directory tree and reads each regular text file as
// lines.
package scan

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Options controls which files Walk reads.
type Options struct {
	// MaxSize skips files larger than this many bytes; 0 means no limit.
	MaxSize int64
	// SkipHidden skips files and directories whose names begin with a dot.
	SkipHidden bool
}

// File is one text file that Walk read.
type File struct {
	Path  string
	Ext   string
	Lines []string
	Bytes int64
}

// ErrBinary marks a file that holds a NUL byte in its first block.
var ErrBinary = errors.New("binary file")

// Walk calls fn for every regular text file below root, in lexical order.
// Binary files, files over the size limit and (with SkipHidden) hidden
// entries are skipped; an error from fn ends the walk.
func Walk(root string, opt Options, fn func(File) error) error {
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if opt.SkipHidden && path != root && strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if opt.MaxSize > 0 && info.Size() > opt.MaxSize {
			return nil
		}
		f, err := Read(path)
		if errors.Is(err, ErrBinary) {
			return nil
		}
		if err != nil {
			return err
		}
		return fn(f)
	})
}

// Read reads one file as lines; it returns ErrBinary for a binary file.
func Read(path string) (File, error) {
	fd, err := os.Open(path)
	if err != nil {
		return File{}, err
	}
	defer fd.Close()
	r := bufio.NewReader(fd)
	head, err := r.Peek(512)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, bufio.ErrBufferFull) {
		return File{}, fmt.Errorf("reading %q: %w", path, err)
	}
	if bytes.IndexByte(head, 0) >= 0 {
		return File{}, fmt.Errorf("%q: %w", path, ErrBinary)
	}
	f := File{Path: path, Ext: Ext(path)}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		f.Lines = append(f.Lines, sc.Text())
		f.Bytes += int64(len(sc.Bytes())) + 1
	}
	if err := sc.Err(); err != nil {
		return File{}, fmt.Errorf("reading %q: %w", path, err)
	}
	return f, nil
}

// Ext is the lowercased extension of path without its dot, or "(none)".
func Ext(path string) string {
	e := strings.TrimPrefix(filepath.Ext(path), ".")
	if e == "" {
		return "(none)"
	}
	return strings.ToLower(e)
}
