// Package tally counts lines, words and bytes per file extension, and how
// often each word occurs.
package tally

import (
	"fmt"
	"sort"
	"strings"
	"unicode"
)

// Stats are the sums for one extension.
type Stats struct {
	Files, Lines, Words int
	Bytes               int64
}

// Tally accumulates Stats per extension and word counts over all files.
type Tally struct {
	byExt map[string]*Stats
	words map[string]int
}

// New returns an empty Tally.
func New() *Tally {
	return &Tally{byExt: map[string]*Stats{}, words: map[string]int{}}
}

// Add counts one file of extension ext.
func (t *Tally) Add(ext string, lines []string, size int64) error {
	if ext == "" {
		return fmt.Errorf("adding a file: empty extension")
	}
	s := t.byExt[ext]
	if s == nil {
		s = &Stats{}
		t.byExt[ext] = s
	}
	s.Files++
	s.Lines += len(lines)
	s.Bytes += size
	for _, l := range lines {
		for _, w := range Words(l) {
			s.Words++
			t.words[w]++
		}
	}
	return nil
}

// Extensions lists the extensions seen, in lexical order.
func (t *Tally) Extensions() []string {
	out := make([]string, 0, len(t.byExt))
	for e := range t.byExt {
		out = append(out, e)
	}
	sort.Strings(out)
	return out
}

// Stats returns the sums for ext (zero if it was never seen).
func (t *Tally) Stats(ext string) Stats {
	if s := t.byExt[ext]; s != nil {
		return *s
	}
	return Stats{}
}

// Words splits a line into lowercased words of letters and digits.
func Words(line string) []string {
	fields := strings.FieldsFunc(line, func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
	for i, f := range fields {
		fields[i] = strings.ToLower(f)
	}
	return fields
}
