package session

import (
	"crypto/rand"
	"time"
)

// keyChunk is one read of terminal input, with the input epoch at the
// time of the read: input read before a prompt was drawn belongs to an
// older epoch and never reaches the prompt.
type keyChunk struct {
	epoch uint64
	b     []byte
}

// escIdle is the pause after which an ESC alone is the Escape key and a
// sequence cut short is dropped. A terminal writes each reply and each
// key's sequence at once, so its parts arrive together.
const escIdle = 50 * time.Millisecond

// PromptInput is the developer's input while one prompt is shown: key
// events that arrived after the prompt was drawn, with every sequence
// (terminal replies among them) told apart from keys.
type PromptInput struct {
	// Mark is the session's prompt mark: the CLI printed it when the
	// session began, before any of the sandbox's output, and every
	// prompt shows it; the sandbox never learns it.
	Mark string

	chunks <-chan keyChunk
	// flush discards the terminal's pending input and what was read of
	// it, and returns the epoch from which input counts and whether it
	// discarded anything.
	flush   func() (uint64, bool)
	min     uint64
	readied bool
	// unsettled: input was discarded at Ready, so a terminal reply may
	// have been cut in two; input is dropped until it pauses for escIdle.
	unsettled bool
	parser    KeyParser
	// queue holds parsed events from head on.
	queue []Event
	head  int
}

// newPromptInput is a PromptInput over chunks; flush (may be nil) discards
// pending input and returns the first epoch that counts and whether it
// discarded anything.
func newPromptInput(mark string, chunks <-chan keyChunk, flush func() (uint64, bool)) *PromptInput {
	return &PromptInput{Mark: mark, chunks: chunks, flush: flush}
}

// Ready marks the moment the prompt has been drawn: input typed or
// answered before it is discarded, on the terminal and in the pump. If
// anything was discarded, a reply may have been cut by the flush, so
// input is then also dropped until the first pause of escIdle: the rest
// of a cut reply arrives with its beginning, a developer's key after
// reading the prompt. Next calls Ready if the Prompter did not.
func (in *PromptInput) Ready() {
	in.readied = true
	if in.flush != nil {
		in.min, in.unsettled = in.flush()
	}
	in.parser = KeyParser{}
	in.queue, in.head = in.queue[:0], 0
}

// Next returns the next input event. It returns ErrTerminalClosed when
// the terminal's input ends.
func (in *PromptInput) Next() (Event, error) {
	if !in.readied {
		in.Ready()
	}
	var idle *time.Timer
	defer func() {
		if idle != nil {
			idle.Stop()
		}
	}()
	if in.head == len(in.queue) {
		in.queue, in.head = in.queue[:0], 0
	}
	for len(in.queue) == 0 {
		var timeout <-chan time.Time
		if in.unsettled || in.parser.Pending() {
			if idle == nil {
				idle = time.NewTimer(escIdle)
			} else {
				idle.Reset(escIdle)
			}
			timeout = idle.C
		}
		select {
		case c, ok := <-in.chunks:
			if !ok {
				return Event{}, ErrTerminalClosed
			}
			if c.epoch < in.min {
				// Read before the prompt was drawn: dropped, and what
				// follows it at once may be the rest of a reply.
				in.unsettled = true
				continue
			}
			if in.unsettled {
				continue
			}
			in.queue = in.parser.Feed(in.queue, c.b)
		case <-timeout:
			if in.unsettled {
				in.unsettled = false
				continue
			}
			in.queue = append(in.queue, in.parser.Idle()...)
		}
	}
	ev := in.queue[in.head]
	in.head++
	return ev, nil
}

// newMark returns a random prompt mark of 8 characters from an alphabet
// without look-alikes, in two groups.
func newMark() string {
	const alphabet = "ACDEFHJKMNPRTUVWXY3479"
	var b [8]byte
	_, _ = rand.Read(b[:])
	out := make([]byte, 0, 9)
	for i, c := range b {
		if i == 4 {
			out = append(out, '-')
		}
		out = append(out, alphabet[int(c)%len(alphabet)])
	}
	return string(out)
}
