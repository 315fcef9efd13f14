// Package table writes rows of values as an aligned text table, numbers to
// the right and text to the left.
package table

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Table is a header and rows of cells, each kept as text with its alignment.
type Table struct {
	header []string
	rows   [][]cell
}

type cell struct {
	text  string
	right bool
}

// New returns a table with the given column names.
func New(columns ...string) *Table {
	return &Table{header: columns}
}

// Row appends one row; integers are right-aligned, anything else is
// formatted with %v and left-aligned. Missing cells are left empty.
func (t *Table) Row(values ...any) {
	r := make([]cell, len(t.header))
	for i, v := range values {
		if i >= len(r) {
			break
		}
		switch v := v.(type) {
		case int:
			r[i] = cell{strconv.Itoa(v), true}
		case int64:
			r[i] = cell{strconv.FormatInt(v, 10), true}
		default:
			r[i] = cell{fmt.Sprint(v), false}
		}
	}
	t.rows = append(t.rows, r)
}

// Write writes the header, a rule and the rows to w.
func (t *Table) Write(w io.Writer) error {
	width := make([]int, len(t.header))
	for i, h := range t.header {
		width[i] = utf8.RuneCountInString(h)
	}
	for _, r := range t.rows {
		for i, c := range r {
			width[i] = max(width[i], utf8.RuneCountInString(c.text))
		}
	}
	var b strings.Builder
	head := make([]cell, len(t.header))
	for i, h := range t.header {
		head[i] = cell{h, false}
	}
	line(&b, head, width)
	rule := make([]cell, len(t.header))
	for i := range rule {
		rule[i] = cell{strings.Repeat("-", width[i]), false}
	}
	line(&b, rule, width)
	for _, r := range t.rows {
		line(&b, r, width)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func line(b *strings.Builder, cells []cell, width []int) {
	for i, c := range cells {
		if i > 0 {
			b.WriteString("  ")
		}
		pad := strings.Repeat(" ", width[i]-utf8.RuneCountInString(c.text))
		if c.right {
			b.WriteString(pad + c.text)
		} else if i < len(cells)-1 {
			b.WriteString(c.text + pad)
		} else {
			b.WriteString(c.text)
		}
	}
	b.WriteString("\n")
}
