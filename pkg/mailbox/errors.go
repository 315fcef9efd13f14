package mailbox

import (
	"errors"
	"fmt"
)

// Sentinel errors. Test with errors.Is.
var (
	// ErrName: a file name is not a mailbox name, or names a kind the
	// directory does not carry. *NameError matches it.
	ErrName = errors.New("invalid mailbox file name")
	// ErrNotRegular: an entry is a symbolic link, directory, FIFO, socket or
	// device rather than a regular file.
	ErrNotRegular = errors.New("mailbox entry is not a regular file")
	// ErrTooLarge: a file exceeds MaxFileBytes.
	ErrTooLarge = errors.New("mailbox file too large")
	// ErrExists: a file of that name is already present; mailbox names are
	// written once.
	ErrExists = errors.New("mailbox file already exists")
	// ErrMissing: no file of that name is present.
	ErrMissing = errors.New("mailbox file missing")
	// ErrRecord: the file content is not one valid SignedProtocolRecord of
	// the kind its name announces.
	ErrRecord = errors.New("invalid mailbox record")
)

// NameError describes why a file name was refused.
type NameError struct {
	Name   string
	Reason string
}

func (e *NameError) Error() string { return fmt.Sprintf("mailbox file name %q: %s", e.Name, e.Reason) }

// Is matches ErrName.
func (e *NameError) Is(target error) bool { return target == ErrName }
