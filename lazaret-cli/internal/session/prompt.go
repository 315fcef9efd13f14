package session

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"lazaret.dev/pkg/protocol"
)

// Prompter decides the host escalation prompts that arrive on a session's
// terminal. It runs on the pump's receiving goroutine, so no sandbox output
// is written while it decides; the pump signs what it returns with the
// session anchor key and sends it.
type Prompter interface {
	Decide(p protocol.TerminalPrompt) (protocol.DeveloperDecision, error)
}

// DenyPrompter denies every prompt after a one-line notice on W: this
// build of lazaret-cli has no interactive approval, and an unanswered
// request would leave the agent waiting.
type DenyPrompter struct {
	W io.Writer
}

// Decide prints the notice and returns Deny.
func (d DenyPrompter) Decide(p protocol.TerminalPrompt) (protocol.DeveloperDecision, error) {
	fmt.Fprintf(d.W, "\r\nlazaret: denied host escalation request %s (%s): this lazaret-cli does not show escalation prompts\r\n",
		p.RequestID, visibleArgv(p.CommandArgv))
	return protocol.DeveloperDecision{RequestID: p.RequestID, RequestSHA256: p.RequestSHA256, Decision: protocol.DecisionDeny}, nil
}

// visibleArgv quotes each element with control characters escaped, so a
// request cannot draw on the developer's terminal.
func visibleArgv(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = strconv.QuoteToASCII(a)
	}
	return strings.Join(q, " ")
}
