package session

import "testing"

func TestExitCode(t *testing.T) {
	three := uint8(3)
	tests := []struct {
		name    string
		exit    ExitCodeCase
		want    int
		message bool
	}{
		{"exited", ExitCodeCase{outcome: 0, code: &three}, 3, false},
		{"terminated", ExitCodeCase{outcome: 1}, ExitTerminated, true},
		{"runtime lost", ExitCodeCase{outcome: 2}, ExitRuntimeLost, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, msg := ExitCode(tt.exit.record())
			if got != tt.want || (msg != "") != tt.message {
				t.Fatalf("ExitCode = %d, %q; want %d, message %v", got, msg, tt.want, tt.message)
			}
		})
	}
}
