package session

import (
	"io"
	"strings"
	"testing"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"lazaret.dev/pkg/ids"
	"lazaret.dev/pkg/protocol"
)

// rawKeyDecision is the baseline: the prompt as it decided before input
// was parsed, the first y, n or e byte of any read deciding, whatever
// sequence it was part of.
func rawKeyDecision(t TerminalPrompter, p protocol.TerminalPrompt, chunks <-chan keyChunk) byte {
	t.show(p, "", p.CommandArgv, false)
	for c := range chunks {
		for _, b := range c.b {
			switch b {
			case 'y', 'Y', 'n', 'N', 'e', 'E':
				return b
			}
		}
	}
	return 0
}

// BenchmarkPromptDecision measures a prompt from its drawing to the
// decision over a scripted key stream: the developer's y and Enter,
// alone or after a burst of 64 terminal replies. raw is the baseline
// (bytes delivered as keys); parsed is the prompt with the key parser
// and the choice confirmed by Enter; flushed adds the flush of a real
// pseudo-terminal's input when the prompt opens.
func BenchmarkPromptDecision(b *testing.B) {
	tp := protocol.TerminalPrompt{
		RequestID: ids.RequestID{7}, RequestSHA256: ids.Digest{8}, AgentProfile: "dev",
		CommandArgv: []string{"/usr/bin/git", "push", "origin", "main"}, Justification: "ship it",
	}
	burst := make([][]byte, 0, 64)
	for i := 0; len(burst) < cap(burst); i++ {
		r := terminalReplies[i%len(terminalReplies)].reply
		// The baseline would stop at the y of a reply; the burst keeps to
		// replies without y, n or e so that both paths read all of it.
		if !strings.ContainsAny(r, "yYnNeE") {
			burst = append(burst, []byte(r))
		}
	}
	ptm, tty, err := pty.Open()
	if err != nil {
		b.Skipf("no pseudo-terminal available: %v", err)
	}
	defer ptm.Close()
	defer tty.Close()
	prompter := TerminalPrompter{W: io.Discard}
	for _, script := range []struct {
		name   string
		chunks [][]byte
	}{
		{"keys", [][]byte{[]byte("y"), []byte("\r")}},
		{"replies-then-keys", append(append([][]byte(nil), burst...), []byte("y"), []byte("\r"))},
	} {
		fill := func() chan keyChunk {
			ch := make(chan keyChunk, len(script.chunks))
			for _, c := range script.chunks {
				ch <- keyChunk{epoch: 1, b: c}
			}
			close(ch)
			return ch
		}
		b.Run(script.name+"/raw", func(b *testing.B) {
			for b.Loop() {
				if rawKeyDecision(prompter, tp, fill()) != 'y' {
					b.Fatal("no approval")
				}
			}
		})
		b.Run(script.name+"/parsed", func(b *testing.B) {
			for b.Loop() {
				in := newPromptInput("MARK-BNCH", fill(), func() (uint64, bool) { return 1, false })
				if d, err := prompter.Decide(tp, in); err != nil || d.Decision != protocol.DecisionApprove {
					b.Fatalf("decision %+v, %v", d, err)
				}
			}
		})
		b.Run(script.name+"/flushed", func(b *testing.B) {
			fd := int(tty.Fd())
			for b.Loop() {
				in := newPromptInput("MARK-BNCH", fill(), func() (uint64, bool) {
					_ = unix.IoctlSetInt(fd, unix.TCFLSH, unix.TCIFLUSH)
					return 1, false
				})
				if d, err := prompter.Decide(tp, in); err != nil || d.Decision != protocol.DecisionApprove {
					b.Fatalf("decision %+v, %v", d, err)
				}
			}
		})
	}
}
