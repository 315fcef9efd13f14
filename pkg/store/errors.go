package store

import (
	"errors"
	"fmt"
)

// Error classes; test with errors.Is.
var (
	// ErrNotFound: a store file or record does not exist.
	ErrNotFound = errors.New("not found")
	// ErrExists: a record or store file that must be new already exists.
	ErrExists = errors.New("already exists")
	// ErrLocked: another process holds the store's file lock.
	ErrLocked = errors.New("store is locked by another process")
	// ErrDamaged: the store file is truncated, not a bbolt file, or fails
	// the page-level consistency check. See DamageError.
	ErrDamaged = errors.New("store file is damaged")
	// ErrSchema: the store's metadata names another schema or version, or
	// none. See SchemaError.
	ErrSchema = errors.New("store schema mismatch")
	// ErrNotDamaged: Quarantine was asked to move aside a file that passes
	// the check.
	ErrNotDamaged = errors.New("store file is not damaged")
	// ErrReadOnly: a write on a store opened read-only.
	ErrReadOnly = errors.New("store is open read-only")

	// ErrInvalidRecord: a value breaks its record's own field rules.
	ErrInvalidRecord = errors.New("invalid record")
	// ErrIllegalTransition: the state change is not an edge the rules
	// allow.
	ErrIllegalTransition = errors.New("illegal state transition")
	// ErrEvidenceChanged: recorded evidence would be replaced or cleared.
	ErrEvidenceChanged = errors.New("recorded evidence cannot be replaced or cleared")
	// ErrMissingEvidence: a state lacks the evidence it requires.
	ErrMissingEvidence = errors.New("required evidence is missing")
	// ErrAbsenceProofRequired: clearing needs an explicit absence proof.
	ErrAbsenceProofRequired = errors.New("transition to Clean requires proof of runtime absence")
	// ErrReferenceMismatch: a record names a Domain, generation or
	// sidecar other than the one it belongs to.
	ErrReferenceMismatch = errors.New("record refers to another domain, generation or identity")
)

// SchemaProblem says how store metadata failed to match.
type SchemaProblem uint8

// Schema problems.
const (
	// SchemaUnversioned: no metadata bucket or record.
	SchemaUnversioned SchemaProblem = iota + 1
	// SchemaUnreadable: the metadata record does not decode.
	SchemaUnreadable
	// SchemaUnknown: another schema identity.
	SchemaUnknown
	// SchemaOlder: this schema at an older version.
	SchemaOlder
	// SchemaNewer: this schema at a newer version.
	SchemaNewer
)

func (p SchemaProblem) String() string {
	switch p {
	case SchemaUnversioned:
		return "unversioned"
	case SchemaUnreadable:
		return "unreadable metadata"
	case SchemaUnknown:
		return "unknown schema"
	case SchemaOlder:
		return "older version"
	case SchemaNewer:
		return "newer version"
	}
	return fmt.Sprintf("problem(%d)", uint8(p))
}

// SchemaError is a refusal to read a store whose metadata does not match.
// No row of such a store has been read.
type SchemaError struct {
	Path    string
	Problem SchemaProblem
	Want    Schema
	Got     Schema // zero when unversioned or unreadable
	Detail  string
}

func (e *SchemaError) Error() string {
	got := e.Got.String()
	if e.Problem == SchemaUnversioned || e.Problem == SchemaUnreadable {
		got = "no readable schema"
		if e.Detail != "" {
			got += " (" + e.Detail + ")"
		}
	}
	hint := ""
	switch e.Problem {
	case SchemaNewer:
		hint = "; it was written by a newer Lazaret: upgrade to read it"
	case SchemaOlder:
		hint = "; it was written by an older Lazaret and this version does not migrate it"
	case SchemaUnknown, SchemaUnversioned, SchemaUnreadable:
		hint = "; it is not a store of this kind"
	}
	return fmt.Sprintf("store file %q: %v: file has %s, this program reads %s%s; the file was left unchanged",
		e.Path, e.Problem, got, e.Want, hint)
}

// Is makes errors.Is(err, ErrSchema) true.
func (e *SchemaError) Is(target error) bool { return target == ErrSchema }

// DamageError is a refusal to use a damaged store file. The file has not
// been modified.
type DamageError struct {
	Path   string
	Reason string
}

func (e *DamageError) Error() string {
	return fmt.Sprintf("store file %q is damaged: %s; the file was left unchanged: restore it from a backup or move it aside with \"lazaret-cli store quarantine\"", e.Path, e.Reason)
}

// Is makes errors.Is(err, ErrDamaged) true.
func (e *DamageError) Is(target error) bool { return target == ErrDamaged }

// RecordError is a refused record write or an unreadable record. It
// unwraps to its class (ErrIllegalTransition, ErrEvidenceChanged, ...) and
// to the underlying cause, so errors.Is works for both.
type RecordError struct {
	Record string // record kind: "participant", "session terminal", ...
	Key    string // which record: "generation 0a.. role Sandbox"
	Field  string // offending field, when one is to blame
	Class  error
	Err    error // underlying cause, may be nil
}

func (e *RecordError) Error() string {
	msg := e.Record
	if e.Key != "" {
		msg += " " + e.Key
	}
	if e.Field != "" {
		msg += ": field " + e.Field
	}
	msg += ": " + e.Class.Error()
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap returns the class and the cause.
func (e *RecordError) Unwrap() []error {
	if e.Err == nil {
		return []error{e.Class}
	}
	return []error{e.Class, e.Err}
}
