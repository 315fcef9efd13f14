package session

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The start report is what a freshly spawned coordinator writes on fd 4:
// newline-terminated UTF-8 lines, `step <name>` for progress, `kept
// "<path>"` for each host path kept isolated only because an earlier
// generation isolated it (a Go string literal of ASCII, as
// strconv.QuoteToASCII writes it) and `kept-more <n>` for those it does
// not name, then exactly one of `ready` or `error <sentence>`, then end of
// file.

// MaxReportLine bounds one start report line; a longer line is a protocol
// error, not a reason to buffer without end.
const MaxReportLine = 4096

// Errors of the start report.
var (
	// ErrCoordinatorExited means the report ended before ready or error:
	// the coordinator died during start.
	ErrCoordinatorExited = errors.New("the coordinator exited during start")
	// ErrReport means a line of the report breaks the format.
	ErrReport = errors.New("malformed start report")
)

// StartError is the coordinator's own `error` line: why the start failed.
type StartError struct {
	Message string
}

func (e *StartError) Error() string {
	return "the coordinator could not start the Domain: " + e.Message
}

// ReadReport reads a start report from r, calling step for each progress
// line, until `ready` (nil), `error` (*StartError) or end of file before
// either (ErrCoordinatorExited). A malformed line wraps ErrReport. Nothing
// after the final line is read.
func ReadReport(r io.Reader, step func(name string)) error {
	return ReadReportWith(r, ReportHandlers{Step: step})
}

// ReportHandlers receive the lines of a start report before its outcome;
// a nil handler ignores its lines.
type ReportHandlers struct {
	Step func(name string)
	// Kept is a path kept isolated only because an earlier generation
	// isolated it (a directory ends in "/").
	Kept func(path string)
	// KeptMore counts such paths the report does not name.
	KeptMore func(n int)
}

// ReadReportWith is ReadReport with handlers for every kind of line.
func ReadReportWith(r io.Reader, h ReportHandlers) error {
	step := h.Step
	br := bufio.NewReaderSize(r, MaxReportLine+1)
	for n := 1; ; n++ {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			return fmt.Errorf("%w: line %d exceeds %d bytes", ErrReport, n, MaxReportLine)
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				if len(line) > 0 {
					return fmt.Errorf("%w: line %d ends without a newline", ErrReport, n)
				}
				return ErrCoordinatorExited
			}
			return fmt.Errorf("reading the start report: %w", err)
		}
		text := string(line[:len(line)-1])
		if !utf8.ValidString(text) {
			return fmt.Errorf("%w: line %d is not UTF-8", ErrReport, n)
		}
		for _, r := range text {
			if r < 0x20 || r == 0x7f {
				return fmt.Errorf("%w: line %d holds a control character", ErrReport, n)
			}
		}
		word, rest, _ := strings.Cut(text, " ")
		switch word {
		case "step":
			if rest == "" {
				return fmt.Errorf("%w: line %d: step without a name", ErrReport, n)
			}
			if step != nil {
				step(rest)
			}
		case "kept":
			p, err := strconv.Unquote(rest)
			if err != nil || strconv.QuoteToASCII(p) != rest || p == "" {
				return fmt.Errorf("%w: line %d: kept takes one quoted path", ErrReport, n)
			}
			if h.Kept != nil {
				h.Kept(p)
			}
		case "kept-more":
			m, err := strconv.Atoi(rest)
			if err != nil || m <= 0 || strconv.Itoa(m) != rest {
				return fmt.Errorf("%w: line %d: kept-more takes a positive count", ErrReport, n)
			}
			if h.KeptMore != nil {
				h.KeptMore(m)
			}
		case "ready":
			if text != "ready" {
				return fmt.Errorf("%w: line %d: ready takes no argument", ErrReport, n)
			}
			return nil
		case "error":
			if rest == "" {
				return fmt.Errorf("%w: line %d: error without a message", ErrReport, n)
			}
			return &StartError{Message: rest}
		default:
			return fmt.Errorf("%w: line %d: unknown keyword %q", ErrReport, n, word)
		}
	}
}
