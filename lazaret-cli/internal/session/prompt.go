package session

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"lazaret.dev/pkg/protocol"
)

// Prompter decides the host escalation prompts that arrive on a session's
// terminal. It runs on the pump's receiving goroutine, so no sandbox output
// is written while it decides: the session's output waits in the channel
// and is written after the decision. keys delivers what the developer
// types while the prompt is shown (none of it reaches the sandbox); it is
// closed when the terminal's input ends. The pump signs what Decide
// returns with the session anchor key and sends it.
type Prompter interface {
	Decide(p protocol.TerminalPrompt, keys <-chan []byte) (protocol.DeveloperDecision, error)
}

// ErrTerminalClosed means the terminal's input ended while a prompt was
// shown.
var ErrTerminalClosed = errors.New("the terminal's input ended during the prompt")

// DenyPrompter denies every prompt after a one-line notice on W, without
// reading keys: for terminals that cannot show a prompt, where an
// unanswered request would leave the agent waiting.
type DenyPrompter struct {
	W io.Writer
}

// Decide prints the notice and returns Deny.
func (d DenyPrompter) Decide(p protocol.TerminalPrompt, _ <-chan []byte) (protocol.DeveloperDecision, error) {
	fmt.Fprintf(d.W, "\r\nlazaret: denied host escalation request %s (%s): this lazaret-cli does not show escalation prompts\r\n",
		p.RequestID, visibleArgv(p.CommandArgv))
	return deny(p), nil
}

func deny(p protocol.TerminalPrompt) protocol.DeveloperDecision {
	return protocol.DeveloperDecision{RequestID: p.RequestID, RequestSHA256: p.RequestSHA256, Decision: protocol.DecisionDeny}
}

// TerminalPrompter shows a prompt on W, a terminal in raw mode, and reads
// the developer's answer from the keys: y approves, n denies, e edits the
// command as one shell-quoted line (split back into words without a
// shell; Enter accepts the edit, Escape or Ctrl-C abandons it). Every
// string from the request is shown quoted with control and escape
// characters made visible, so a request cannot draw on the terminal.
type TerminalPrompter struct {
	W io.Writer
}

// Decide shows p and returns the developer's decision.
func (t TerminalPrompter) Decide(p protocol.TerminalPrompt, keys <-chan []byte) (protocol.DeveloperDecision, error) {
	argv := p.CommandArgv
	edited := false
	for {
		t.show(p, argv, edited)
		key, err := t.menuKey(keys)
		if err != nil {
			return protocol.DeveloperDecision{}, err
		}
		switch key {
		case 'y':
			fmt.Fprint(t.W, "lazaret: approved\r\n")
			return protocol.DeveloperDecision{
				RequestID: p.RequestID, RequestSHA256: p.RequestSHA256,
				Decision: protocol.DecisionApprove, ApprovedCommandArgv: append([]string(nil), argv...),
			}, nil
		case 'n':
			fmt.Fprint(t.W, "lazaret: denied\r\n")
			return deny(p), nil
		case 'e':
			line, ok, err := t.edit(QuoteArgv(argv), keys)
			if err != nil {
				return protocol.DeveloperDecision{}, err
			}
			if !ok {
				continue
			}
			next, err := SplitArgv(line)
			if err != nil {
				fmt.Fprintf(t.W, "lazaret: the edited command is not used: %s\r\n", visible(err.Error()))
				continue
			}
			argv, edited = next, true
		}
	}
}

func (t TerminalPrompter) show(p protocol.TerminalPrompt, argv []string, edited bool) {
	var b strings.Builder
	b.WriteString("\r\n\x1b[0m--- lazaret: host escalation request ---\r\n")
	fmt.Fprintf(&b, "profile:       %s\r\n", visible(p.AgentProfile))
	if edited {
		fmt.Fprintf(&b, "requested:     %s\r\n", visibleArgv(p.CommandArgv))
		fmt.Fprintf(&b, "edited:        %s\r\n", visibleArgv(argv))
	} else {
		fmt.Fprintf(&b, "command:       %s\r\n", visibleArgv(argv))
	}
	if p.Justification != "" {
		fmt.Fprintf(&b, "justification: %s\r\n", visible(p.Justification))
	}
	b.WriteString("[y] approve  [n] deny  [e] edit the command > ")
	io.WriteString(t.W, b.String())
}

// menuKey waits for y, n or e (either case).
func (t TerminalPrompter) menuKey(keys <-chan []byte) (byte, error) {
	for {
		chunk, ok := <-keys
		if !ok {
			return 0, ErrTerminalClosed
		}
		for _, c := range chunk {
			switch c {
			case 'y', 'Y':
				fmt.Fprint(t.W, "y\r\n")
				return 'y', nil
			case 'n', 'N':
				fmt.Fprint(t.W, "n\r\n")
				return 'n', nil
			case 'e', 'E':
				fmt.Fprint(t.W, "e\r\n")
				return 'e', nil
			}
		}
	}
}

// edit is a one-line editor: printable characters are appended,
// Backspace removes the last character, Ctrl-U clears the line, Enter
// accepts it (ok), Escape or Ctrl-C abandons it. Escape sequences (cursor
// keys) are ignored.
func (t TerminalPrompter) edit(line string, keys <-chan []byte) (string, bool, error) {
	const promptText = "edit> "
	redraw := func() { fmt.Fprintf(t.W, "\r\x1b[K%s%s", promptText, line) }
	redraw()
	for {
		chunk, ok := <-keys
		if !ok {
			return "", false, ErrTerminalClosed
		}
		if len(chunk) > 1 && chunk[0] == 0x1b {
			continue // an escape sequence: a cursor or function key
		}
		for len(chunk) > 0 {
			r, n := utf8.DecodeRune(chunk)
			chunk = chunk[n:]
			switch {
			case r == '\r' || r == '\n':
				fmt.Fprint(t.W, "\r\n")
				return line, true, nil
			case r == 0x1b || r == 0x03:
				fmt.Fprint(t.W, "\r\n")
				return "", false, nil
			case r == 0x7f || r == 0x08:
				if line != "" {
					_, size := utf8.DecodeLastRuneInString(line)
					line = line[:len(line)-size]
				}
			case r == 0x15:
				line = ""
			case r != utf8.RuneError && unicode.IsPrint(r):
				line += string(r)
			}
		}
		redraw()
	}
}

// visibleArgv quotes each element with control characters escaped, so a
// request cannot draw on the developer's terminal.
func visibleArgv(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = visible(a)
	}
	return strings.Join(q, " ")
}

// visible quotes s as a Go string of printable ASCII.
func visible(s string) string { return strconv.QuoteToASCII(s) }
