package kube

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"strings"
)

// JSON writes the objects as one Kubernetes List, indented, which kubectl
// applies like a stream of documents.
func JSON(w io.Writer, objs []Object) error {
	list := struct {
		APIVersion string   `json:"apiVersion"`
		Kind       string   `json:"kind"`
		Items      []Object `json:"items"`
	}{"v1", "List", objs}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(list); err != nil {
		return fmt.Errorf("encoding objects: %w", err)
	}
	_, err := w.Write(buf.Bytes())
	return err
}

// YAML writes the objects as a YAML stream, one document each, preceded
// by header, whose lines are written as comments. The fields keep the
// order of the JSON encoding; a string is written plain only where no
// YAML reading could take it for anything but that string.
func YAML(w io.Writer, header []string, objs []Object) error {
	var buf bytes.Buffer
	for _, h := range header {
		// A header line is a comment: no character of it may end the
		// line or reach the terminal as a control sequence.
		h = strings.Map(func(r rune) rune {
			if r < ' ' || r == 0x7f || (r >= 0x80 && r < 0xa0) || r == 0x2028 || r == 0x2029 || r == 0x85 {
				return '?'
			}
			return r
		}, h)
		buf.WriteString(strings.TrimRight("# "+h, " ") + "\n")
	}
	for _, o := range objs {
		b, err := json.Marshal(o)
		if err != nil {
			return fmt.Errorf("encoding %s %s: %w", o.GetKind(), o.GetName(), err)
		}
		n, err := parseNode(json.NewDecoder(bytes.NewReader(b)))
		if err != nil {
			return fmt.Errorf("encoding %s %s: %w", o.GetKind(), o.GetName(), err)
		}
		buf.WriteString("---\n")
		writeNode(&buf, n, 0)
	}
	_, err := w.Write(buf.Bytes())
	return err
}

// node is a decoded JSON value with its object keys in document order.
type node struct {
	kind   byte // '{', '[', or 's' (string), 'l' (literal: number, bool, null)
	keys   []string
	values []*node
	text   string
}

func parseNode(d *json.Decoder) (*node, error) {
	d.UseNumber()
	tok, err := d.Token()
	if err != nil {
		return nil, err
	}
	return parseFrom(d, tok)
}

func parseFrom(d *json.Decoder, tok json.Token) (*node, error) {
	switch v := tok.(type) {
	case json.Delim:
		n := &node{kind: byte(v)}
		for d.More() {
			if v == '{' {
				k, err := d.Token()
				if err != nil {
					return nil, err
				}
				n.keys = append(n.keys, k.(string))
			}
			t, err := d.Token()
			if err != nil {
				return nil, err
			}
			c, err := parseFrom(d, t)
			if err != nil {
				return nil, err
			}
			n.values = append(n.values, c)
		}
		if _, err := d.Token(); err != nil { // the closing delimiter
			return nil, err
		}
		return n, nil
	case string:
		return &node{kind: 's', text: v}, nil
	case json.Number:
		return &node{kind: 'l', text: v.String()}, nil
	case bool:
		if v {
			return &node{kind: 'l', text: "true"}, nil
		}
		return &node{kind: 'l', text: "false"}, nil
	case nil:
		return &node{kind: 'l', text: "null"}, nil
	}
	return nil, fmt.Errorf("unexpected JSON token %v", tok)
}

func (n *node) empty() bool { return (n.kind == '{' || n.kind == '[') && len(n.values) == 0 }

func (n *node) collection() bool { return (n.kind == '{' || n.kind == '[') && len(n.values) > 0 }

// writeNode writes a non-empty collection in block style at indent; a
// scalar or empty collection is written by inline.
func writeNode(buf *bytes.Buffer, n *node, indent int) {
	pad := strings.Repeat("  ", indent)
	switch n.kind {
	case '{':
		for i, k := range n.keys {
			v := n.values[i]
			buf.WriteString(pad + scalar(k) + ":")
			writeValue(buf, v, indent+1)
		}
	case '[':
		for _, v := range n.values {
			buf.WriteString(pad + "-")
			if v.kind == '{' && len(v.values) > 0 {
				// The first key shares the dash's line.
				var inner bytes.Buffer
				writeNode(&inner, v, indent+1)
				buf.WriteString(" " + strings.TrimPrefix(inner.String(), pad+"  "))
				continue
			}
			writeValue(buf, v, indent+1)
		}
	}
}

// writeValue writes what follows "key:" or "-".
func writeValue(buf *bytes.Buffer, v *node, indent int) {
	switch {
	case v.collection():
		buf.WriteString("\n")
		writeNode(buf, v, indent)
	case v.kind == '{':
		buf.WriteString(" {}\n")
	case v.kind == '[':
		buf.WriteString(" []\n")
	case v.kind == 's' && literalBlock(v.text):
		pad := strings.Repeat("  ", indent)
		chomp := "-"
		if strings.HasSuffix(v.text, "\n") {
			chomp = ""
		}
		buf.WriteString(" |" + chomp + "\n")
		for _, line := range strings.Split(strings.TrimSuffix(v.text, "\n"), "\n") {
			buf.WriteString(pad + line + "\n")
		}
	case v.kind == 's':
		buf.WriteString(" " + scalar(v.text) + "\n")
	default:
		buf.WriteString(" " + v.text + "\n")
	}
}

// literalBlock reports whether a string can be written as a literal block
// and read back byte for byte: several lines, printable, no tabs, a first
// line that does not begin with a space (the block's indentation is taken
// from it), no empty line, at most one final newline, no trailing spaces.
func literalBlock(s string) bool {
	if !strings.Contains(strings.TrimSuffix(s, "\n"), "\n") || strings.HasSuffix(s, "\n\n") {
		return false
	}
	for i, line := range strings.Split(strings.TrimSuffix(s, "\n"), "\n") {
		if (i == 0 && strings.HasPrefix(line, " ")) || line == "" || strings.HasSuffix(line, " ") {
			return false
		}
		for _, r := range line {
			if r < ' ' || r == 0x7f || r == 0xfeff {
				return false
			}
		}
	}
	return true
}

var plainSafe = regexp.MustCompile(`^[A-Za-z_/][A-Za-z0-9_./@+-]*$`)

// yamlWords are the plain scalars some YAML reading (1.1 or 1.2) takes for
// a boolean or null.
var yamlWords = map[string]bool{
	"y": true, "n": true, "yes": true, "no": true, "on": true, "off": true,
	"true": true, "false": true, "null": true,
}

// scalar writes a string plain when that is unambiguous, else as a JSON
// string, which is a valid YAML double-quoted scalar.
func scalar(s string) string {
	if plainSafe.MatchString(s) && !yamlWords[strings.ToLower(s)] {
		return s
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(s)
	return strings.TrimSuffix(b.String(), "\n")
}
