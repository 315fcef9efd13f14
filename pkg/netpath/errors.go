package netpath

import (
	"errors"
	"fmt"
)

// Errors of building and checking the enforcement path; test with
// errors.Is.
var (
	ErrRulesetMismatch  = errors.New("installed ruleset differs from the plan")
	ErrRouteNotAttested = errors.New("route does not lead through the enforcement namespace")
	ErrUpstreamNotReady = errors.New("upstream interface is not ready")
	ErrBadLink          = errors.New("link prefix must be an IPv4 /30 network")
	ErrReachable        = errors.New("reachable from inside the enforcement path")
	ErrUnreachable      = errors.New("unreachable from inside the enforcement path")
	ErrNotRefused       = errors.New("not refused by the enforcement path")
	ErrNotProbeable     = errors.New("a TCP SYN to it never reaches the enforcement path")
	ErrNotResolved      = errors.New("not resolved through its resolver")
	ErrNotIPv4          = errors.New("address is not IPv4")
)

// RulesetError names the part of the installed ruleset that differs.
type RulesetError struct {
	What   string
	Detail string
}

func (e *RulesetError) Error() string {
	return fmt.Sprintf("installed nftables %s: %s", e.What, e.Detail)
}

func (e *RulesetError) Is(target error) bool { return target == ErrRulesetMismatch }
