package netpolicy

import (
	"errors"
	"fmt"
	"strconv"
)

// Rule violations of the network records; test with errors.Is. Each is
// reported inside a *FieldError, *SchemaError, *MismatchError or
// *TargetError that names the field or target.
var (
	ErrSchemaID         = errors.New("unsupported schema ID")
	ErrUnknownValue     = errors.New("unknown enumeration value")
	ErrUnsorted         = errors.New("entries are not in canonical order")
	ErrDuplicate        = errors.New("duplicate entry")
	ErrConflict         = errors.New("the same prefix is both allowed and denied")
	ErrHostBits         = errors.New("prefix has host bits set")
	ErrInvalidAddress   = errors.New("not a valid address or prefix")
	ErrFamilyMismatch   = errors.New("address does not belong to the entry's address family")
	ErrNotIPv4          = errors.New("the v1 network language is IPv4-only")
	ErrDisposition      = errors.New("address family dispositions must name IPv4 and IPv6 exactly once each")
	ErrIPv6Enabled      = errors.New("IPv6 must be disabled in a v1 policy")
	ErrDefaultAction    = errors.New("each enabled address family needs exactly one default action and a disabled family none")
	ErrDefaultAllow     = errors.New("a v1 default action must be deny (policy fails closed)")
	ErrFamilyDisabled   = errors.New("entry belongs to a disabled address family")
	ErrNoResolver       = errors.New("at least one DNS resolver is required")
	ErrMissingRFC1918   = errors.New("effective deny prefixes must contain every RFC 1918 prefix")
	ErrStructuralTarget = errors.New("address lies in a range the enforcement path always drops")
	ErrZeroPort         = errors.New("port must be nonzero")
	ErrQueryName        = errors.New("query name must be 1 to 253 bytes of UTF-8 without NUL")

	ErrMismatch            = errors.New("readiness record does not match")
	ErrHelperNotReady      = errors.New("connectivity helper was not observed ready")
	ErrRoutesNotAttested   = errors.New("routes through the enforcement namespace were not attested")
	ErrTargetNotProbed     = errors.New("no observation for this target")
	ErrTargetNotConfigured = errors.New("observation for a target the configuration does not name")
	ErrTargetReachable     = errors.New("reachable from inside the enforcement path")
	ErrTargetUnreachable   = errors.New("unreachable from inside the enforcement path")
	ErrTargetUnresolved    = errors.New("query did not resolve through its resolver")
	ErrTargetAllowed       = errors.New("allowed by the effective policy")
	ErrTargetDenied        = errors.New("denied by the effective policy")
	ErrNameNotRefused      = errors.New("the pinning resolver answered a name outside the allowlist")
	ErrNameRefusedByPolicy = errors.New("the name is not allowed by the policy's host names")
)

// FieldError is a rule violation at one field or list element, such as
// "prefix_rules[3]" or "allow[0]"; Value shows the offending value.
type FieldError struct {
	Field string
	Value string
	Err   error
}

func (e *FieldError) Error() string {
	if e.Value == "" {
		return fmt.Sprintf("%s: %v", e.Field, e.Err)
	}
	return fmt.Sprintf("%s %s: %v", e.Field, e.Value, e.Err)
}

func (e *FieldError) Unwrap() error { return e.Err }

// at names element i of a list field.
func at(list string, i int) string { return list + "[" + strconv.Itoa(i) + "]" }

func fieldErr(field string, value any, err error) *FieldError {
	v := ""
	if value != nil {
		v = fmt.Sprint(value)
	}
	return &FieldError{Field: field, Value: v, Err: err}
}

// SchemaError refuses a record whose schema ID is not the one version this
// package reads. There is no fallback to another version or record kind.
type SchemaError struct {
	Record string // "derived network policy", "network readiness attestation", ...
	Got    string
	Want   string
}

func (e *SchemaError) Error() string {
	return fmt.Sprintf("%s schema ID %q is not %q", e.Record, e.Got, e.Want)
}

// Is reports ErrSchemaID.
func (e *SchemaError) Is(target error) bool { return target == ErrSchemaID }

// MismatchError says that a readiness record's field differs from what the
// Host Coordinator expects or from the record that encloses it.
type MismatchError struct {
	Record string // "readiness attestation", "reachability probe", "readiness evidence"
	Field  string
	Got    string
	Want   string
}

func (e *MismatchError) Error() string {
	return fmt.Sprintf("%s %s is %s, want %s", e.Record, e.Field, e.Got, e.Want)
}

// Is reports ErrMismatch.
func (e *MismatchError) Is(target error) bool { return target == ErrMismatch }

// TargetKind names one of the three readiness target lists.
type TargetKind uint8

const (
	TargetDenied TargetKind = iota
	TargetPermitted
	TargetDNS
	// TargetHost is a readiness host reached by name through the pinning
	// resolver; TargetRefusal the name the pinning resolver must refuse.
	TargetHost
	TargetRefusal
)

func (k TargetKind) String() string {
	switch k {
	case TargetDenied:
		return "denied"
	case TargetPermitted:
		return "permitted"
	case TargetDNS:
		return "dns"
	case TargetHost:
		return "host"
	case TargetRefusal:
		return "refusal"
	}
	return fmt.Sprintf("TargetKind(%d)", uint8(k))
}

// TargetError names the readiness target that failed and why.
type TargetError struct {
	Kind   TargetKind
	Target string // "198.51.100.7:443" or "example.test via 192.0.2.53"
	Detail string // optional, such as the policy decision
	Err    error
}

func (e *TargetError) Error() string {
	if e.Detail != "" {
		return fmt.Sprintf("readiness %s target %s: %v (%s)", e.Kind, e.Target, e.Err, e.Detail)
	}
	return fmt.Sprintf("readiness %s target %s: %v", e.Kind, e.Target, e.Err)
}

func (e *TargetError) Unwrap() error { return e.Err }
