package session

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestReadReport(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		steps   []string
		wantErr error  // errors.Is target, nil for ready
		message string // StartError message
	}{
		{name: "ready", in: "step prepare\nstep sandbox\nready\n", steps: []string{"prepare", "sandbox"}},
		{name: "ready alone", in: "ready\n"},
		{name: "ready then junk is not read", in: "ready\nwhatever", wantErr: nil},
		{name: "error", in: "step anchor\nerror anchor: user namespaces are disabled\n", steps: []string{"anchor"}, message: "anchor: user namespaces are disabled"},
		{name: "eof", in: "step prepare\n", steps: []string{"prepare"}, wantErr: ErrCoordinatorExited},
		{name: "empty", in: "", wantErr: ErrCoordinatorExited},
		{name: "unterminated", in: "ready", wantErr: ErrReport},
		{name: "unknown keyword", in: "done\n", wantErr: ErrReport},
		{name: "ready with argument", in: "ready now\n", wantErr: ErrReport},
		{name: "empty step", in: "step \n", wantErr: ErrReport},
		{name: "empty error", in: "error\n", wantErr: ErrReport},
		{name: "control character", in: "step a\x1b[2J\n", wantErr: ErrReport},
		{name: "not utf8", in: "step \xff\n", wantErr: ErrReport},
		{name: "too long", in: "step " + strings.Repeat("a", MaxReportLine) + "\n", wantErr: ErrReport},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var steps []string
			err := ReadReport(strings.NewReader(tt.in), func(s string) { steps = append(steps, s) })
			if tt.message != "" {
				var se *StartError
				if !errors.As(err, &se) || se.Message != tt.message {
					t.Fatalf("err = %v, want StartError %q", err, tt.message)
				}
			} else if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if !reflect.DeepEqual(steps, tt.steps) {
				t.Errorf("steps = %q, want %q", steps, tt.steps)
			}
		})
	}
}

func FuzzReadReport(f *testing.F) {
	for _, s := range []string{"step prepare\nready\n", "error x\n", "", "ready", "step \xff\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		err := ReadReport(strings.NewReader(string(b)), func(s string) {
			if s == "" || strings.ContainsAny(s, "\n\x00") {
				t.Fatalf("step %q passed through", s)
			}
		})
		var se *StartError
		if errors.As(err, &se) && (se.Message == "" || strings.Contains(se.Message, "\n")) {
			t.Fatalf("start error message %q", se.Message)
		}
		if err == nil && !strings.Contains(string(b), "ready\n") {
			t.Fatalf("ready without a ready line in %q", b)
		}
	})
}

func TestExitCode(t *testing.T) {
	three := uint8(3)
	tests := []struct {
		name    string
		exit    ExitCodeCase
		want    int
		message bool
	}{
		{"exited", ExitCodeCase{outcome: 0, code: &three}, 3, false},
		{"terminated", ExitCodeCase{outcome: 1}, ExitTerminated, false},
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
