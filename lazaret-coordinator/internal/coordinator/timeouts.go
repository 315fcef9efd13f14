package coordinator

import (
	"fmt"
	"time"

	"lazaret.dev/pkg/escalation"
	"lazaret.dev/pkg/paths"
)

// Operator settings of the escalation timeouts, read from the
// coordinator's environment (the environment of the CLI that started it).
// The configuration file has no place for them: its schema is closed.
const (
	EnvApprovalTimeout  = "LAZARET_ESCALATION_APPROVAL_TIMEOUT"
	EnvExecutionTimeout = "LAZARET_ESCALATION_EXECUTION_TIMEOUT"
)

// Bounds of the escalation timeouts.
const (
	minEscalationTimeout = time.Second
	maxEscalationTimeout = 24 * time.Hour
)

// escalationTimeouts reads the timeouts from env; an unset variable keeps
// the engine's default (escalation.DefaultApprovalTimeout and
// escalation.DefaultExecutionTimeout).
func escalationTimeouts(env paths.Environment) (escalation.Timeouts, error) {
	var t escalation.Timeouts
	for _, v := range []struct {
		name string
		dst  *time.Duration
	}{{EnvApprovalTimeout, &t.Approval}, {EnvExecutionTimeout, &t.Execution}} {
		if env.LookupEnv == nil {
			break
		}
		s, ok := env.LookupEnv(v.name)
		if !ok || s == "" {
			continue
		}
		d, err := time.ParseDuration(s)
		if err != nil {
			return t, fmt.Errorf("%s=%q: not a duration such as 90s or 5m: %w", v.name, s, err)
		}
		if d < minEscalationTimeout || d > maxEscalationTimeout {
			return t, fmt.Errorf("%s=%q: must be from %v to %v", v.name, s, minEscalationTimeout, maxEscalationTimeout)
		}
		*v.dst = d
	}
	return t, nil
}
