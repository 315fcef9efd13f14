package control

import (
	"context"
	"io"

	"lazaret.dev/pkg/protocol"
)

// ExecRequest is a non-interactive command for a registered session. The
// binding and capability are the session's registration, for the sandbox
// side to hand to the guest.
type ExecRequest struct {
	Binding    protocol.SessionBinding
	Capability protocol.SessionRequestCapability
	Argv       []string
}

// InteractiveRequest is a terminal session for a registered session.
type InteractiveRequest struct {
	Binding    protocol.SessionBinding
	Capability protocol.SessionRequestCapability
	Argv       []string
	Size       protocol.TerminalResize
}

// Sessions is the sandbox side of the control channel, implemented by the
// Host Coordinator. The server calls it only for authorized requests of
// registered sessions, at most one command per session at a time.
type Sessions interface {
	// Execute runs argv without a terminal, writes its output to stdout and
	// stderr (each Write blocks until the client has been sent the bytes),
	// and returns how it ended. ctx ends when the client goes away; the
	// command must then be stopped. An error means the command could not be
	// run; it is reported to the client as CodeSessionFailed.
	Execute(ctx context.Context, req ExecRequest, stdout, stderr io.Writer) (protocol.SessionExit, error)
	// Interactive starts argv on a terminal of req.Size. ctx ends when the
	// connection is torn down.
	Interactive(ctx context.Context, req InteractiveRequest) (InteractiveSession, error)
}

// InteractiveSession is one running terminal session. The server reads its
// output from one goroutine and calls the other methods from another.
type InteractiveSession interface {
	// Read reads terminal output. It returns an error (io.EOF or any other)
	// once the terminal has closed; the server then calls Wait.
	Read(p []byte) (int, error)
	// Input writes keyboard input to the terminal.
	Input(p []byte) error
	// Resize changes the terminal size.
	Resize(size protocol.TerminalResize) error
	// Signal delivers Interrupt, Quit or Suspend to the foreground process.
	Signal(sig protocol.TerminalSignalKind) error
	// Decide hands over the developer's signed decision on a prompt.
	Decide(decision protocol.SignedProtocolRecord) error
	// Prompts delivers escalation prompts for this session's terminal; nil
	// when there are none.
	Prompts() <-chan protocol.TerminalPrompt
	// Close hangs up: the client closed the session or went away. Output
	// then ends and Wait returns.
	Close() error
	// Wait returns how the session ended.
	Wait(ctx context.Context) (protocol.SessionExit, error)
}
