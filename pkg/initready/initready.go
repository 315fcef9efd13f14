// Package initready is the sandbox's ready event: the one line that
// lazaret-guest init writes to its standard output once it runs as the
// container's init, and the reader with which the Host Coordinator waits
// for it on the pipe that carries the container's stdout and stderr.
//
// Why the line cannot be forged: when the coordinator starts the sandbox,
// the container's init is the first and only process in it, and the pipe
// is that init's standard output and error. Sessions are separate execs
// with their own stdio, admitted only after the sandbox is committed and
// published, that is after the line was seen; the coordinator waits for
// the line once and ignores every later copy. runsc and its gofer, which
// write to the same pipe, are trusted and never write the line.
//
// What belongs here: the line, Announce and Watch. What does not: what
// the coordinator does when the line never comes (the runsc child's exit,
// its context, a bound), which stays with the sandbox step.
package initready

import (
	"bufio"
	"errors"
	"io"
)

// Line is the exact line, without its newline, that announces that the
// container's init runs.
const Line = "lazaret-guest init: running"

// Announce writes Line and a newline to w in one write.
func Announce(w io.Writer) error {
	_, err := io.WriteString(w, Line+"\n")
	return err
}

// maxLine bounds a line passed to each: a longer line is passed in pieces
// of this length, so an endless line can neither stop the reading nor
// grow a buffer without bound.
const maxLine = 64 << 10

// Watch reads r to its end, passing every line to each (without its line
// end) and calling ready once, when a line equal to Line is first read.
// It keeps reading after that, so a writer is never blocked on a full
// pipe; it returns nil at EOF, else the read error. A line longer than
// 64 KiB is passed in pieces; such a piece is never the ready line.
func Watch(r io.Reader, each func(line string), ready func()) error {
	br := bufio.NewReaderSize(r, maxLine)
	seen := false
	whole := true // the next piece starts a line
	for {
		b, err := br.ReadSlice('\n')
		if len(b) > 0 {
			complete := b[len(b)-1] == '\n'
			line := string(trimEnd(b))
			if !seen && whole && complete && line == Line {
				seen = true
				ready()
			}
			each(line)
			whole = complete
		}
		switch {
		case err == nil, errors.Is(err, bufio.ErrBufferFull):
		case errors.Is(err, io.EOF):
			return nil
		default:
			return err
		}
	}
}

// trimEnd removes a trailing "\n" or "\r\n".
func trimEnd(b []byte) []byte {
	if n := len(b); n > 0 && b[n-1] == '\n' {
		b = b[:n-1]
		if n := len(b); n > 0 && b[n-1] == '\r' {
			b = b[:n-1]
		}
	}
	return b
}
