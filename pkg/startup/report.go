package startup

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// MaxLine bounds one start report line, newline included: the reader
// refuses a longer one rather than buffer without end, and the writer
// writes none.
const MaxLine = 4096

// MaxKept bounds the kept paths a report names; the rest are counted.
const MaxKept = 32

// Errors of the start report.
var (
	// ErrExited means the report ended before ready or error: the
	// coordinator died during start.
	ErrExited = errors.New("the coordinator exited during start")
	// ErrMalformed means a line of the report breaks the format.
	ErrMalformed = errors.New("malformed start report")
)

// Error is the coordinator's own `error` line: why the start failed.
type Error struct {
	Message string
}

func (e *Error) Error() string {
	return "the coordinator could not start the Domain: " + e.Message
}

// Writer writes a start report. Its methods may be called from several
// goroutines; after the outcome (Ready or Fail) it writes nothing more.
// Write errors are ignored: a CLI that went away must not stop the
// coordinator, whose log has everything.
type Writer struct {
	mu       sync.Mutex
	w        io.WriteCloser
	finished bool
}

// NewWriter returns a Writer on w, which it closes after the outcome; a
// nil w writes nothing.
func NewWriter(w io.WriteCloser) *Writer { return &Writer{w: w} }

func (w *Writer) line(s string) {
	if w.w == nil {
		return
	}
	_, _ = io.WriteString(w.w, s+"\n")
}

// Step reports progress: a named step of the start.
func (w *Writer) Step(name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.finished {
		w.line("step " + name)
	}
}

// Kept reports the paths isolated only because an earlier generation
// isolated them (a directory ending in "/"): a `kept` line each, for at
// most MaxKept paths whose line fits in MaxLine, then `kept-more N` for
// the rest.
func (w *Writer) Kept(paths []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.finished {
		return
	}
	more, named := 0, 0
	for _, p := range paths {
		line := "kept " + strconv.QuoteToASCII(p)
		if named == MaxKept || len(line) >= MaxLine {
			more++
			continue
		}
		w.line(line)
		named++
	}
	if more > 0 {
		w.line("kept-more " + strconv.Itoa(more))
	}
}

// Done reports the end of a named step; steps may overlap, so a step's
// end need not come before the next step's start.
func (w *Writer) Done(name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.finished {
		w.line("done " + OneLine(name))
	}
}

// Ready reports success and closes the report.
func (w *Writer) Ready() { w.finish("ready") }

// Fail reports why the start failed, as one line of printable text, and
// closes the report.
func (w *Writer) Fail(sentence string) { w.finish("error " + OneLine(sentence)) }

func (w *Writer) finish(s string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.finished {
		return
	}
	w.finished = true
	w.line(s)
	if w.w != nil {
		w.w.Close()
		w.w = nil
	}
}

// OneLine makes s a single line of printable text: control characters
// become spaces, and the ends are trimmed.
func OneLine(s string) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
	return strings.TrimSpace(s)
}

// Handlers receive the lines of a start report before its outcome; a nil
// handler ignores its lines.
type Handlers struct {
	// Step is a progress line's step name: the step began.
	Step func(name string)
	// Done is the name of a step that ended.
	Done func(name string)
	// Kept is a path kept isolated only because an earlier generation
	// isolated it (a directory ends in "/").
	Kept func(path string)
	// KeptMore counts such paths the report does not name.
	KeptMore func(n int)
}

// Read reads a start report from r, passing each line before the outcome
// to h, until `ready` (nil), `error` (*Error) or end of file before
// either (ErrExited). A malformed line wraps ErrMalformed. Nothing after
// the outcome line is read.
func Read(r io.Reader, h Handlers) error {
	br := bufio.NewReaderSize(r, MaxLine+1)
	for n := 1; ; n++ {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			return fmt.Errorf("%w: line %d exceeds %d bytes", ErrMalformed, n, MaxLine)
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				if len(line) > 0 {
					return fmt.Errorf("%w: line %d ends without a newline", ErrMalformed, n)
				}
				return ErrExited
			}
			return fmt.Errorf("reading the start report: %w", err)
		}
		text := string(line[:len(line)-1])
		if !utf8.ValidString(text) {
			return fmt.Errorf("%w: line %d is not UTF-8", ErrMalformed, n)
		}
		for _, r := range text {
			if r < 0x20 || r == 0x7f {
				return fmt.Errorf("%w: line %d holds a control character", ErrMalformed, n)
			}
		}
		word, rest, _ := strings.Cut(text, " ")
		switch word {
		case "step":
			if rest == "" {
				return fmt.Errorf("%w: line %d: step without a name", ErrMalformed, n)
			}
			if h.Step != nil {
				h.Step(rest)
			}
		case "done":
			if rest == "" {
				return fmt.Errorf("%w: line %d: done without a name", ErrMalformed, n)
			}
			if h.Done != nil {
				h.Done(rest)
			}
		case "kept":
			p, err := strconv.Unquote(rest)
			if err != nil || strconv.QuoteToASCII(p) != rest || p == "" {
				return fmt.Errorf("%w: line %d: kept takes one quoted path", ErrMalformed, n)
			}
			if h.Kept != nil {
				h.Kept(p)
			}
		case "kept-more":
			m, err := strconv.Atoi(rest)
			if err != nil || m <= 0 || strconv.Itoa(m) != rest {
				return fmt.Errorf("%w: line %d: kept-more takes a positive count", ErrMalformed, n)
			}
			if h.KeptMore != nil {
				h.KeptMore(m)
			}
		case "ready":
			if text != "ready" {
				return fmt.Errorf("%w: line %d: ready takes no argument", ErrMalformed, n)
			}
			return nil
		case "error":
			if rest == "" {
				return fmt.Errorf("%w: line %d: error without a message", ErrMalformed, n)
			}
			return &Error{Message: rest}
		default:
			return fmt.Errorf("%w: line %d: unknown keyword %q", ErrMalformed, n, word)
		}
	}
}
