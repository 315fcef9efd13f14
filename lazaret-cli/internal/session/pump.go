package session

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"lazaret.dev/pkg/protocol"
	"lazaret.dev/pkg/sys"
)

// Channel is the CLI end of one interactive session
// (*control.InteractiveClient).
type Channel interface {
	Input(p []byte) error
	Resize(rows, columns, pixelWidth, pixelHeight uint16) error
	Hangup() error
	Decide(decision protocol.SignedProtocolRecord) error
	Recv() (protocol.InteractiveSessionBatch, error)
}

// SignalError means the CLI was told to stop (SIGHUP, SIGINT, SIGTERM)
// while the session ran; the session was hung up.
type SignalError struct{ Signal syscall.Signal }

func (e *SignalError) Error() string { return fmt.Sprintf("interrupted by %v", e.Signal) }

// hangupWait bounds the wait for the session's exit after a hang-up.
const hangupWait = 2 * time.Second

// Pump moves bytes between the developer's terminal and a session until
// the session exits.
type Pump struct {
	Channel Channel
	// In is read for keyboard input; it is the terminal (raw mode) in
	// production. Its bytes are sent unchanged.
	In *os.File
	// Out receives the session's output.
	Out io.Writer
	// SizeFd is the terminal whose size is sent on SIGWINCH; -1 for none.
	SizeFd int
	// Signals carries SIGWINCH, SIGHUP, SIGINT and SIGTERM; the caller
	// installs it before changing the terminal mode.
	Signals <-chan os.Signal
	// Prompter decides escalation prompts; Sign signs its decisions.
	Prompter Prompter
	Sign     func(protocol.DeveloperDecision) (protocol.SignedProtocolRecord, error)
	// OnPanic runs before a panic in one of the pump's goroutines
	// continues (it restores the terminal).
	OnPanic func()

	// keys carries the developer's keystrokes to the Prompter while a
	// prompt is shown (prompting): sandbox input cannot answer a prompt,
	// and keys meant for a prompt never reach the sandbox. epoch counts
	// input flushes: a chunk read before the latest flush is stale.
	keys      chan keyChunk
	prompting atomic.Bool
	epoch     atomic.Uint64
	// mark is the session's prompt mark (PromptInput.Mark).
	mark string
	// paste tracks whether the sandbox has bracketed paste on, so that a
	// prompt can turn it on for itself and put it back after.
	paste pasteMode
}

// promptKeys is how many reads of keystrokes wait for a Prompter.
const promptKeys = 64

type recvResult struct {
	exit protocol.SessionExit
	err  error
}

func (p *Pump) guard() {
	if r := recover(); r != nil {
		if p.OnPanic != nil {
			p.OnPanic()
		}
		panic(r)
	}
}

// Run pumps until the session exits and returns its exit. ctx's end and a
// stop signal hang the session up.
func (p *Pump) Run(ctx context.Context) (protocol.SessionExit, error) {
	stopR, stopW, err := os.Pipe()
	if err != nil {
		return protocol.SessionExit{}, fmt.Errorf("creating the input stop pipe: %w", err)
	}
	inputDone := make(chan error, 1)
	p.keys = make(chan keyChunk, promptKeys)
	p.mark = newMark()
	// The mark is printed before any of the sandbox's output, so that the
	// developer has seen it before the sandbox could draw anything.
	fmt.Fprintf(p.Out, "lazaret: escalation prompts in this session show the mark %s; a prompt without it is not from lazaret\r\n", p.mark)
	go func() {
		defer p.guard()
		defer stopR.Close()
		// A prompt waiting for keys learns that none will come.
		defer close(p.keys)
		inputDone <- p.input(int(p.In.Fd()), int(stopR.Fd()))
	}()
	// Closing the write end wakes the input reader; it then closes the
	// read end itself.
	defer stopW.Close()

	received := make(chan recvResult, 1)
	go func() {
		defer p.guard()
		received <- p.receive()
	}()

	var hungUp <-chan time.Time
	var stopped *SignalError
	hangup := func() {
		if hungUp == nil {
			_ = p.Channel.Hangup()
			hungUp = time.After(hangupWait)
		}
	}
	ctxDone := ctx.Done()
	for {
		select {
		case r := <-received:
			if stopped != nil {
				return r.exit, stopped
			}
			return r.exit, r.err
		case sig := <-p.Signals:
			s, _ := sig.(syscall.Signal)
			if s == syscall.SIGWINCH {
				p.resize()
				continue
			}
			stopped = &SignalError{Signal: s}
			hangup()
		case <-ctxDone:
			ctxDone = nil
			if stopped == nil {
				stopped = &SignalError{Signal: syscall.SIGTERM}
			}
			hangup()
		case err := <-inputDone:
			inputDone = nil
			if errors.Is(err, io.EOF) {
				// The terminal went away: nobody can type into this session.
				hangup()
			}
		case <-hungUp:
			if stopped != nil {
				return protocol.SessionExit{}, stopped
			}
			return protocol.SessionExit{}, errors.New("the session did not end after its terminal closed")
		}
	}
}

func (p *Pump) resize() {
	if p.SizeFd < 0 {
		return
	}
	rows, cols, xp, yp, err := Size(p.SizeFd)
	if err == nil {
		_ = p.Channel.Resize(rows, cols, xp, yp)
	}
}

// receive writes output and handles prompts until the exit.
func (p *Pump) receive() recvResult {
	for {
		b, err := p.Channel.Recv()
		if err != nil {
			return recvResult{err: err}
		}
		for _, m := range b.Messages {
			switch {
			case m.Kind == protocol.InteractiveMessagePrompt && m.Prompt != nil:
				if err := p.prompt(*m.Prompt); err != nil {
					return recvResult{err: err}
				}
			case m.Terminal != nil && m.Terminal.Kind == protocol.MessageExit:
				return recvResult{exit: *m.Terminal.Exit}
			case m.Terminal != nil && m.Terminal.Output != nil:
				p.paste.observe(m.Terminal.Output.Bytes)
				if _, err := p.Out.Write(m.Terminal.Output.Bytes); err != nil {
					return recvResult{err: fmt.Errorf("writing the session's output: %w", err)}
				}
			}
		}
	}
}

// prompt runs the Prompter on the receiving goroutine, so the session's
// output waits in the channel until the decision is sent, and routes the
// developer's keys to it instead of the session. While the prompt is
// shown, bracketed paste is on, so that a paste arrives as one sequence
// and never as keys; afterwards it is as the sandbox left it.
func (p *Pump) prompt(tp protocol.TerminalPrompt) error {
	prompter := p.Prompter
	if prompter == nil {
		prompter = DenyPrompter{W: p.Out}
	}
	_, denies := prompter.(DenyPrompter)
	p.prompting.Store(true)
	if !denies {
		io.WriteString(p.Out, pasteOn)
	}
	d, err := prompter.Decide(tp, newPromptInput(p.mark, p.keys, p.flushInput))
	if !denies && !p.paste.on {
		io.WriteString(p.Out, pasteOff)
	}
	p.prompting.Store(false)
	// Keys typed for the prompt after its answer are dropped, not sent.
	p.drainKeys()
	if err != nil {
		return fmt.Errorf("deciding escalation request %s: %w", tp.RequestID, err)
	}
	rec, err := p.Sign(d)
	if err != nil {
		return fmt.Errorf("signing the decision on escalation request %s: %w", tp.RequestID, err)
	}
	return p.Channel.Decide(rec)
}

// flushInput discards the terminal's unread input (TCIFLUSH) and every
// chunk already read, and returns the new epoch: chunks read from now on
// carry it.
func (p *Pump) flushInput() (uint64, bool) {
	discarded := false
	if p.In != nil {
		fd := int(p.In.Fd())
		// On a pipe (in tests) both fail: nothing is pending there.
		if n, err := unix.IoctlGetInt(fd, unix.TIOCINQ); err == nil && n > 0 {
			discarded = true
		}
		_ = unix.IoctlSetInt(fd, unix.TCFLSH, unix.TCIFLUSH)
	}
	e := p.epoch.Add(1)
	return e, p.drainKeys() || discarded
}

// drainKeys drops the chunks waiting in keys and reports whether there
// were any.
func (p *Pump) drainKeys() bool {
	dropped := false
	for {
		select {
		case _, ok := <-p.keys:
			if !ok {
				return dropped
			}
			dropped = true
		default:
			return dropped
		}
	}
}

// input reads fd until end of file or until stop becomes readable, sending
// every chunk as is. It polls instead of blocking in read so that it can be
// stopped without changing the terminal's file status flags.
func (p *Pump) input(fd, stop int) error {
	buf := make([]byte, 32<<10)
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}, {Fd: int32(stop), Events: unix.POLLIN}}
	for {
		fds[0].Revents, fds[1].Revents = 0, 0
		if _, err := sys.Poll(fds, -1); err != nil {
			return fmt.Errorf("waiting for terminal input: %w", err)
		}
		if fds[1].Revents != 0 {
			return nil
		}
		if fds[0].Revents&(unix.POLLIN|unix.POLLHUP|unix.POLLERR|unix.POLLNVAL) == 0 {
			continue
		}
		// The epoch is taken before the read: a chunk that was pending
		// when a prompt flushed the input counts as stale.
		epoch := p.epoch.Load()
		n, err := sys.Read(fd, buf)
		switch {
		case errors.Is(err, unix.EAGAIN):
			continue
		case errors.Is(err, unix.EIO), n == 0 && err == nil:
			return io.EOF
		case err != nil:
			return fmt.Errorf("reading terminal input: %w", err)
		}
		if p.prompting.Load() {
			select {
			case p.keys <- keyChunk{epoch: epoch, b: bytes.Clone(buf[:n])}:
			default: // the prompter is behind; the keys are dropped
			}
			continue
		}
		if err := p.Channel.Input(buf[:n]); err != nil {
			return err
		}
	}
}

const (
	pasteOn  = "\x1b[?2004h"
	pasteOff = "\x1b[?2004l"
)

// pasteMode follows the sandbox's bracketed paste mode (DEC private mode
// 2004) in its output: the last CSI ? 2004 h or l seen, also when split
// across writes. A mode set among others (CSI ? 1049 ; 2004 h) is not
// seen; the prompt then turns the mode off afterwards, which costs the
// sandbox's program only the brackets around a later paste.
type pasteMode struct {
	on   bool
	tail []byte
}

func (m *pasteMode) observe(b []byte) {
	const keep = len(pasteOn) - 1
	// A sequence split across writes starts in the tail, which is
	// shorter than it, and ends in the first bytes of b.
	joint := append(append(make([]byte, 0, 2*keep), m.tail...), b[:min(len(b), keep)]...)
	m.apply(joint)
	m.apply(b)
	if len(b) >= keep {
		m.tail = append(m.tail[:0], b[len(b)-keep:]...)
		return
	}
	m.tail = append(m.tail, b...)
	if len(m.tail) > keep {
		m.tail = append(m.tail[:0], m.tail[len(m.tail)-keep:]...)
	}
}

func (m *pasteMode) apply(buf []byte) {
	on, off := bytes.LastIndex(buf, []byte(pasteOn)), bytes.LastIndex(buf, []byte(pasteOff))
	if on >= 0 || off >= 0 {
		m.on = on > off
	}
}
