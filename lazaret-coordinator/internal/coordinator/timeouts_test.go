package coordinator

import (
	"strings"
	"testing"
	"time"

	"lazaret.dev/pkg/paths"
)

func TestEscalationTimeouts(t *testing.T) {
	env := func(kv map[string]string) paths.Environment {
		return paths.Environment{LookupEnv: func(k string) (string, bool) { v, ok := kv[k]; return v, ok }}
	}
	for _, tc := range []struct {
		name                string
		kv                  map[string]string
		approval, execution time.Duration
		err                 string
	}{
		{name: "unset keeps the defaults", kv: map[string]string{}},
		{name: "both", kv: map[string]string{EnvApprovalTimeout: "90s", EnvExecutionTimeout: "2h"}, approval: 90 * time.Second, execution: 2 * time.Hour},
		{name: "empty is unset", kv: map[string]string{EnvApprovalTimeout: ""}},
		{name: "not a duration", kv: map[string]string{EnvApprovalTimeout: "5"}, err: EnvApprovalTimeout + `="5": not a duration`},
		{name: "too short", kv: map[string]string{EnvExecutionTimeout: "500ms"}, err: EnvExecutionTimeout + `="500ms": must be from 1s to 24h0m0s`},
		{name: "too long", kv: map[string]string{EnvApprovalTimeout: "25h"}, err: "must be from 1s to 24h0m0s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := escalationTimeouts(env(tc.kv))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Approval != tc.approval || got.Execution != tc.execution {
				t.Fatalf("got %+v, want approval %v execution %v", got, tc.approval, tc.execution)
			}
		})
	}
}
