package control

import (
	"errors"
	"fmt"
)

// Code classifies a refusal the server reports in an error frame. The
// values are part of the wire format (docs/CONTROL.md).
type Code uint32

// Error frame codes.
const (
	// CodeMalformed: a frame or the record in it does not decode or breaks
	// a rule of its schema.
	CodeMalformed Code = iota + 1
	// CodeUnexpected: a frame of a type that is not allowed at this point of
	// the exchange.
	CodeUnexpected
	// CodeUnauthorized: the request needs a client certificate the
	// connection does not have, or names another CLI than the certificate.
	CodeUnauthorized
	// CodeGeneration: the record names another generation.
	CodeGeneration
	// CodeConflict: the CLI ID is already enrolled, or the session ID is
	// registered with a different binding.
	CodeConflict
	// CodeUnknownSession: the session ID is not registered.
	CodeUnknownSession
	// CodeForeignSession: the session ID is registered by another CLI.
	CodeForeignSession
	// CodeBusy: the session is already running a command.
	CodeBusy
	// CodeLimit: a server limit (connections, CLIs, sessions) is reached.
	CodeLimit
	// CodeSessionFailed: the sandbox could not run the command.
	CodeSessionFailed
	// CodeEnrollmentRefused: the certificate signing request is not
	// acceptable.
	CodeEnrollmentRefused
	// CodeInternal: the server failed in a way the client cannot fix.
	CodeInternal
	// CodePortRefused: a port cannot be published (the host port is in
	// use or may not be bound, or the sandbox port is already published
	// on another host end).
	CodePortRefused
	numCodes
)

var codeNames = [...]string{
	CodeMalformed:         "malformed request",
	CodeUnexpected:        "unexpected frame",
	CodeUnauthorized:      "not authorized",
	CodeGeneration:        "wrong generation",
	CodeConflict:          "conflicting registration",
	CodeUnknownSession:    "unknown session",
	CodeForeignSession:    "session of another CLI",
	CodeBusy:              "session busy",
	CodeLimit:             "server limit reached",
	CodeSessionFailed:     "session failed",
	CodeEnrollmentRefused: "enrollment refused",
	CodeInternal:          "internal server error",
	CodePortRefused:       "port refused",
}

// Valid reports whether c is a defined code.
func (c Code) Valid() bool { return c >= CodeMalformed && c < numCodes }

func (c Code) String() string {
	if c.Valid() {
		return codeNames[c]
	}
	return fmt.Sprintf("error code %d", uint32(c))
}

// RemoteError is a refusal: the content of an error frame. The server
// builds one to send; the client returns the one it received.
type RemoteError struct {
	Code    Code
	Message string
}

func (e *RemoteError) Error() string {
	if e.Message == "" {
		return e.Code.String()
	}
	return e.Code.String() + ": " + e.Message
}

// Is reports whether target is the sentinel of e's code.
func (e *RemoteError) Is(target error) bool {
	t, ok := target.(*RemoteError)
	return ok && t.Message == "" && t.Code == e.Code
}

func refuse(c Code, format string, args ...any) *RemoteError {
	return &RemoteError{Code: c, Message: fmt.Sprintf(format, args...)}
}

// Sentinels for errors.Is, one per Code.
var (
	ErrMalformed         = &RemoteError{Code: CodeMalformed}
	ErrUnexpected        = &RemoteError{Code: CodeUnexpected}
	ErrUnauthorized      = &RemoteError{Code: CodeUnauthorized}
	ErrGeneration        = &RemoteError{Code: CodeGeneration}
	ErrConflict          = &RemoteError{Code: CodeConflict}
	ErrUnknownSession    = &RemoteError{Code: CodeUnknownSession}
	ErrForeignSession    = &RemoteError{Code: CodeForeignSession}
	ErrBusy              = &RemoteError{Code: CodeBusy}
	ErrLimit             = &RemoteError{Code: CodeLimit}
	ErrSessionFailed     = &RemoteError{Code: CodeSessionFailed}
	ErrEnrollmentRefused = &RemoteError{Code: CodeEnrollmentRefused}
	ErrInternal          = &RemoteError{Code: CodeInternal}
	ErrPortRefused       = &RemoteError{Code: CodePortRefused}
)

// Local errors.
var (
	// ErrFrame means bytes on the socket are not a well-formed frame.
	ErrFrame = errors.New("malformed control frame")
	// ErrFrameSize means a frame's length prefix is zero or above
	// MaxFrameBytes.
	ErrFrameSize = errors.New("control frame length out of bounds")
	// ErrPeerUID means the process at the other end of the socket runs as
	// another user.
	ErrPeerUID = errors.New("control socket peer runs as another user")
	// ErrPublication means a published file is not what it must be: not
	// private to the user, of the wrong type, or not the recorded object.
	ErrPublication = errors.New("control publication check failed")
	// ErrClosed means the connection or session has already ended.
	ErrClosed = errors.New("control connection closed")
)

// Error is a client failure: which socket, at which step, and why.
type Error struct {
	Socket string
	Step   string
	Err    error
}

func (e *Error) Error() string {
	return fmt.Sprintf("control socket %q: %s: %v", e.Socket, e.Step, e.Err)
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// PeerError reports a peer the SO_PEERCRED check refused.
type PeerError struct {
	Peer    Peer
	WantUID uint32
}

func (e *PeerError) Error() string {
	return fmt.Sprintf("control socket peer pid %d runs as uid %d, want uid %d", e.Peer.PID, e.Peer.UID, e.WantUID)
}

// Is matches ErrPeerUID.
func (e *PeerError) Is(target error) bool { return target == ErrPeerUID }
