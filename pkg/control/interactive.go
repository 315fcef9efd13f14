package control

import (
	"context"
	"errors"
	"io"
	"log/slog"

	"lazaret.dev/pkg/ids"
	"lazaret.dev/pkg/protocol"
)

// Interactive output flow limits.
const (
	// outputChunkBytes is the most terminal output read at once, and so the
	// largest TerminalOutput message the server sends.
	outputChunkBytes = 32 << 10
	// outputQueue is how many chunks wait between the terminal and the
	// socket; with the chunk in hand it bounds what a slow client makes the
	// server hold to (outputQueue+1)*outputChunkBytes per session.
	outputQueue = 4
	// maxBatchBytes bounds the message bytes of one batch, well inside
	// MaxFrameBytes.
	maxBatchBytes = 512 << 10
)

func (c *serverConn) interactive(ctx context.Context, req *protocol.InteractiveSessionRequest) {
	reg, release, err := c.acquire(req.SessionID, "interactive execution")
	if err != nil {
		c.fail(err)
		return
	}
	defer release()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sess, err := c.s.cfg.Sessions.Interactive(ctx, InteractiveRequest{
		Binding: reg.binding, Capability: reg.capability, Argv: req.Argv, Size: req.InitialSize,
	})
	if err != nil {
		release()
		c.fail(refuse(CodeSessionFailed, "%v", err))
		return
	}
	log := c.log.With("session_id", req.SessionID.String())
	log.Debug("interactive session started", "argc", len(req.Argv))
	// The empty batch acknowledges the start.
	if err := c.writeRecord(FrameBatch, &protocol.InteractiveSessionBatch{SessionID: req.SessionID}); err != nil {
		c.hangup(sess, log)
		return
	}
	poll := make(chan struct{}, 1)
	pumped := make(chan error, 1)
	go func() { pumped <- c.pump(ctx, sess, req.SessionID, poll, release) }()
	for {
		select {
		case err := <-pumped:
			if err != nil {
				c.hangup(sess, log)
				release()
				if !errors.Is(err, ErrClosed) {
					c.fail(err)
				}
			}
			log.Debug("interactive session ended")
			return
		case r := <-c.in:
			if err := c.event(sess, req.SessionID, r, poll, log); err != nil {
				cancel()
				c.hangup(sess, log)
				<-pumped
				release()
				if !errors.Is(err, ErrClosed) {
					c.fail(err)
				}
				return
			}
		case <-ctx.Done():
			c.hangup(sess, log)
			<-pumped
			return
		}
	}
}

// hangup closes a session whose client is gone and waits a bounded time
// for it to end.
func (c *serverConn) hangup(sess InteractiveSession, log *slog.Logger) {
	if err := sess.Close(); err != nil {
		log.Debug("closing interactive session", "err", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.s.limits.HangupTimeout)
	defer cancel()
	if _, err := sess.Wait(ctx); err != nil {
		log.Debug("waiting for interactive session after hang-up", "err", err)
	}
}

// event applies one client frame to the session.
func (c *serverConn) event(sess InteractiveSession, id ids.SessionID, r readResult, poll chan<- struct{}, log *slog.Logger) error {
	if r.err != nil {
		if errors.Is(r.err, io.EOF) {
			return ErrClosed
		}
		return r.err
	}
	if r.f.Type != FrameEvent {
		return refuse(CodeUnexpected, "expected an event frame during an interactive session, got a %v frame", r.f.Type)
	}
	var ev protocol.InteractiveSessionEvent
	if err := decodeRecord(r.f.Body, &ev); err != nil {
		return err
	}
	var err error
	switch ev.Kind {
	case protocol.InteractiveTerminal:
		t := ev.Terminal
		if got := t.SessionID(); got != id {
			return refuse(CodeUnexpected, "event names session %v, this connection runs session %v", got, id)
		}
		switch t.Kind {
		case protocol.EventInput:
			err = sess.Input(t.Input.Bytes)
		case protocol.EventResize:
			err = sess.Resize(*t.Resize)
		case protocol.EventSignal:
			err = sess.Signal(t.Signal.Signal)
		case protocol.EventClose:
			err = sess.Close()
		}
	case protocol.InteractivePromptDecision:
		err = sess.Decide(*ev.Decision)
	case protocol.InteractivePoll:
		select {
		case poll <- struct{}{}:
		default:
		}
	}
	if err != nil {
		// The session reports its end through its output and exit; a
		// refused input or decision is not the client's fault to fail on.
		log.Debug("interactive event not applied", "kind", ev.Kind, "err", err)
	}
	return nil
}

// batcher collects messages for one batch.
type batcher struct {
	id    ids.SessionID
	msgs  []protocol.InteractiveSessionMessage
	bytes int
}

func (b *batcher) full() bool {
	return len(b.msgs) >= protocol.MaxBatchMessages || b.bytes >= maxBatchBytes-outputChunkBytes
}

func (b *batcher) output(p []byte) {
	b.msgs = append(b.msgs, protocol.InteractiveSessionMessage{
		Kind: protocol.InteractiveMessageTerminal,
		Terminal: &protocol.SessionTerminalMessage{
			Kind: protocol.MessageOutput, Output: &protocol.TerminalOutput{SessionID: b.id, Bytes: p},
		},
	})
	b.bytes += len(p) + 32
}

func (b *batcher) prompt(p protocol.TerminalPrompt) {
	p.SessionID = b.id
	b.msgs = append(b.msgs, protocol.InteractiveSessionMessage{Kind: protocol.InteractiveMessagePrompt, Prompt: &p})
	n := len(p.Justification) + len(p.AgentProfile) + 128
	for _, a := range p.CommandArgv {
		n += len(a) + 4
	}
	b.bytes += n
}

// pump moves terminal output and prompts to the client in batches until the
// terminal closes, then sends the exit. It returns nil after the exit was
// sent.
func (c *serverConn) pump(ctx context.Context, sess InteractiveSession, id ids.SessionID, poll <-chan struct{}, release func()) error {
	chunks := make(chan []byte, outputQueue)
	go func() {
		defer close(chunks)
		for {
			buf := make([]byte, outputChunkBytes)
			n, err := sess.Read(buf)
			if n > 0 {
				select {
				case chunks <- buf[:n]:
				case <-ctx.Done():
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	prompts := sess.Prompts()
	send := func(b *batcher) error {
		if err := c.writeRecord(FrameBatch, &protocol.InteractiveSessionBatch{SessionID: id, Messages: b.msgs}); err != nil {
			return ErrClosed
		}
		return nil
	}
	for {
		b := &batcher{id: id}
		open := true
		select {
		case p, ok := <-chunks:
			if ok {
				b.output(p)
			} else {
				open = false
			}
		case p, ok := <-prompts:
			if ok {
				b.prompt(p)
			} else {
				prompts = nil
			}
		case <-poll:
			// A poll is answered with a batch, empty when nothing waits.
		case <-ctx.Done():
			return ErrClosed
		}
	drain:
		for open && !b.full() {
			select {
			case p, ok := <-chunks:
				if !ok {
					open = false
					break drain
				}
				b.output(p)
			case p, ok := <-prompts:
				if !ok {
					prompts = nil
					continue
				}
				b.prompt(p)
			default:
				break drain
			}
		}
		if !open {
			return c.finish(ctx, sess, b, prompts, send, release)
		}
		if err := send(b); err != nil {
			return err
		}
	}
}

// finish sends what is left, pending prompts, and the exit; the session is
// released just before the batch carrying the exit goes out.
func (c *serverConn) finish(ctx context.Context, sess InteractiveSession, b *batcher, prompts <-chan protocol.TerminalPrompt, send func(*batcher) error, release func()) error {
	for prompts != nil {
		select {
		case p, ok := <-prompts:
			if !ok {
				prompts = nil
				continue
			}
			if b.full() {
				if err := send(b); err != nil {
					return err
				}
				b = &batcher{id: b.id}
			}
			b.prompt(p)
		default:
			prompts = nil
		}
	}
	exit, err := sess.Wait(ctx)
	if err != nil {
		return refuse(CodeSessionFailed, "waiting for session %v: %v", b.id, err)
	}
	exit.SessionID = b.id
	if len(b.msgs) >= protocol.MaxBatchMessages {
		if err := send(b); err != nil {
			return err
		}
		b = &batcher{id: b.id}
	}
	b.msgs = append(b.msgs, protocol.InteractiveSessionMessage{
		Kind:     protocol.InteractiveMessageTerminal,
		Terminal: &protocol.SessionTerminalMessage{Kind: protocol.MessageExit, Exit: &exit},
	})
	release()
	return send(b)
}
