package pinresolver

import (
	"errors"
	"strconv"
)

// Configuration errors, reported inside a *ConfigError; test with errors.Is.
var (
	ErrRequired     = errors.New("required")
	ErrUpstreamAddr = errors.New("upstream must be a specified IPv4 address with a nonzero port")
	ErrNegative     = errors.New("must not be negative")
	ErrTTLRange     = errors.New("MinTTL must not exceed MaxTTL")
)

// ErrDropped is wrapped by the error Resolve returns with a nil response: the
// message was not answered at all.
var ErrDropped = errors.New("query dropped without a response")

// Upstream exchange failures, the reasons of Upstream events.
var (
	ErrUpstreamTimeout   = errors.New("no matching upstream answer before the deadline")
	ErrUpstreamMismatch  = errors.New("upstream answer does not match the query")
	ErrUpstreamMalformed = errors.New("upstream answer is malformed")
	ErrUpstreamTruncated = errors.New("upstream answer is truncated over TCP")
	ErrCNAMELoop         = errors.New("CNAME chain loops")
	ErrCNAMEChain        = errors.New("CNAME chain is longer than " + strconv.Itoa(MaxCNAMEHops) + " hops")
	ErrCNAMEAmbiguous    = errors.New("a name in the CNAME chain has more than one CNAME")
)

// ConfigError is an invalid Config field.
type ConfigError struct {
	Field string
	Value string
	Err   error
}

func (e *ConfigError) Error() string {
	s := "pinresolver: Config." + e.Field
	if e.Value != "" {
		s += " " + strconv.Quote(e.Value)
	}
	return s + ": " + e.Err.Error()
}

func (e *ConfigError) Unwrap() error { return e.Err }
