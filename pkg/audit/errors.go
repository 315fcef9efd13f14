package audit

import (
	"errors"
	"fmt"
)

// Error classes; test with errors.Is.
var (
	// ErrInvalidRecord: a record breaks a field rule, or a line is not
	// the canonical encoding of a valid record.
	ErrInvalidRecord = errors.New("invalid audit record")
	// ErrChainBroken: a line's prev is not the SHA-256 of the line before
	// it.
	ErrChainBroken = errors.New("audit chain broken")
	// ErrTruncated: the file ends in a line without its newline.
	ErrTruncated = errors.New("audit log ends in an unterminated line")
	// ErrUnsafeFile: the path is not a regular file owned by this user
	// and closed to writes by group and others.
	ErrUnsafeFile = errors.New("audit log file is not a private regular file")
	// ErrInUse: another Writer holds the file.
	ErrInUse = errors.New("audit log is open for writing by another process")
	// ErrLocked: the data range stayed locked longer than the wait bound.
	ErrLocked = errors.New("audit log stayed locked")
	// ErrClosed: an append after Close.
	ErrClosed = errors.New("audit log writer is closed")
	// ErrWriterFailed: an earlier write or fsync failed, so no further
	// record can extend the chain.
	ErrWriterFailed = errors.New("audit log writer stopped after a failed write")
)

// LineError is a refused line of an audit log file. Line counts from 1.
// It unwraps to its class (ErrInvalidRecord, ErrChainBroken, ErrTruncated)
// and to the cause, when there is one.
type LineError struct {
	Path   string
	Line   int
	Class  error
	Detail string
	Err    error // underlying cause, may be nil
}

func (e *LineError) Error() string {
	msg := fmt.Sprintf("audit log %q line %d: %v", e.Path, e.Line, e.Class)
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap returns the class and the cause.
func (e *LineError) Unwrap() []error {
	if e.Err == nil {
		return []error{e.Class}
	}
	return []error{e.Class, e.Err}
}
