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
// is written while it decides: the session's output waits, held back
// through the control connection, and is written after the decision. in
// delivers what the developer types while the prompt is shown (none of it
// reaches the sandbox) as events; the Prompter calls in.Ready once the
// prompt is drawn, which discards everything typed or answered before.
// The pump signs what Decide returns with the session anchor key and
// sends it.
type Prompter interface {
	Decide(p protocol.TerminalPrompt, in *PromptInput) (protocol.DeveloperDecision, error)
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
func (d DenyPrompter) Decide(p protocol.TerminalPrompt, _ *PromptInput) (protocol.DeveloperDecision, error) {
	fmt.Fprintf(d.W, "\r\nlazaret: denied host escalation request %s (%s): this lazaret-cli does not show escalation prompts\r\n",
		p.RequestID, visibleArgv(p.CommandArgv))
	return deny(p), nil
}

func deny(p protocol.TerminalPrompt) protocol.DeveloperDecision {
	return protocol.DeveloperDecision{RequestID: p.RequestID, RequestSHA256: p.RequestSHA256, Decision: protocol.DecisionDeny}
}

// TerminalPrompter shows a prompt on W, a terminal in raw mode, and reads
// the developer's answer from key events: y approves, n denies, e edits
// the command as one shell-quoted line (split back into words without a
// shell; Enter accepts the edit, Escape or Ctrl-C abandons it). A choice
// is the letter and then Enter, with no other event between them: no
// terminal reply is a key event, and none contains Enter, so no reply to
// a query the sandbox printed can make a choice. Every string from the
// request is shown quoted with control and escape characters made
// visible, so a request cannot draw on the terminal.
type TerminalPrompter struct {
	W io.Writer
}

// Decide shows p and returns the developer's decision.
func (t TerminalPrompter) Decide(p protocol.TerminalPrompt, in *PromptInput) (protocol.DeveloperDecision, error) {
	argv := p.CommandArgv
	edited := false
	for {
		t.show(p, in.Mark, argv, edited)
		in.Ready()
		key, err := t.menuChoice(in)
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
			line, ok, err := t.edit(QuoteArgv(argv), in)
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

// promptReset puts the terminal's rendering state that sandbox output may
// have changed back to what makes the prompt legible and whole: no
// scrolling region (reset between saving and restoring the cursor, DECSC
// and DECRC, since DECSTBM moves the cursor home), SGR attributes, the
// ASCII character set in G0 and G1 shifted in, no insert mode, autowrap,
// a visible cursor, no reverse screen, no left and right margins, and
// 7-bit controls in the terminal's replies (S7C1T, ESC SP F); the
// keyboard unlocked (KAM reset), a synchronized update ended (mode 2026,
// which would hold the prompt off the screen), the default foreground,
// background, cursor colour and palette restored (OSC 110, 111, 112, 104:
// the sandbox could have set the foreground to the background so that
// the real prompt is invisible beside a fake one), and kitty's images
// deleted (one could lie over the prompt's cells). Terminals ignore what
// they do not implement. The prompt is then drawn from where the cursor
// was, and scrolls the whole screen.
const promptReset = "\x1b7\x1b[r\x1b8\x1b[0m\x1b(B\x1b)B\x0f\x1b[4l\x1b[?7h\x1b[?25h\x1b[?5l\x1b[?69l\x1b F" +
	"\x1b[2l\x1b[?2026l\x1b]110\x1b\\\x1b]111\x1b\\\x1b]112\x1b\\\x1b]104\x1b\\\x1b_Ga=d\x1b\\"

// menuLine is the last line of the prompt.
const menuLine = "[y] approve  [n] deny  [e] edit the command; the letter, then Enter > "

func (t TerminalPrompter) show(p protocol.TerminalPrompt, mark string, argv []string, edited bool) {
	var b strings.Builder
	b.WriteString(promptReset)
	fmt.Fprintf(&b, "\r\n--- lazaret: host escalation request --- mark %s ---\r\n", mark)
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
	b.WriteString(menuLine)
	io.WriteString(t.W, b.String())
}

// menu is the state of the menu's choice: the letter typed last, if the
// event before it was not something else.
type menu struct{ pending rune }

// event applies ev; it returns the choice ('y', 'n' or 'e') when ev is
// the Enter that confirms one, and whether the shown choice changed.
func (m *menu) event(ev Event) (choice rune, changed bool) {
	before := m.pending
	if ev.Kind == EventKey {
		switch r := unicode.ToLower(ev.Rune); r {
		case 'y', 'n', 'e':
			m.pending = r
			return 0, m.pending != before
		case '\r', '\n':
			m.pending = 0
			return before, before != 0
		}
	}
	// Any other key, a sequence or a paste between the letter and Enter
	// takes the letter back.
	m.pending = 0
	return 0, before != 0
}

// menuChoice waits for a letter confirmed by Enter, showing the letter
// typed so far after the menu.
func (t TerminalPrompter) menuChoice(in *PromptInput) (rune, error) {
	var m menu
	for {
		ev, err := in.Next()
		if err != nil {
			return 0, err
		}
		choice, changed := m.event(ev)
		if choice != 0 {
			fmt.Fprint(t.W, "\r\n")
			return choice, nil
		}
		if changed {
			shown := ""
			if m.pending != 0 {
				shown = string(m.pending)
			}
			fmt.Fprintf(t.W, "\r\x1b[K%s%s", menuLine, shown)
		}
	}
}

// edit is a one-line editor: printable characters are appended,
// Backspace removes the last character, Ctrl-U clears the line, Enter
// accepts it (ok), Escape or Ctrl-C abandons it. Sequences (cursor keys,
// terminal replies) and pastes are ignored.
func (t TerminalPrompter) edit(line string, in *PromptInput) (string, bool, error) {
	const promptText = "edit> "
	redraw := func() { fmt.Fprintf(t.W, "\r\x1b[K%s%s", promptText, line) }
	redraw()
	for {
		ev, err := in.Next()
		if err != nil {
			return "", false, err
		}
		if ev.Kind != EventKey {
			continue
		}
		switch r := ev.Rune; {
		case r == '\r' || r == '\n':
			fmt.Fprint(t.W, "\r\n")
			return line, true, nil
		case r == KeyEscape || r == 0x03:
			fmt.Fprint(t.W, "\r\n")
			return "", false, nil
		case r == 0x7f || r == 0x08:
			if line != "" {
				_, size := utf8.DecodeLastRuneInString(line)
				line = line[:len(line)-size]
			}
		case r == 0x15:
			line = ""
		case unicode.IsPrint(r):
			line += string(r)
		default:
			continue
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
