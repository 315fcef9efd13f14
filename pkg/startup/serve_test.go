package startup

import (
	"errors"
	"os"
	"reflect"
	"testing"
	"time"

	"lazaret.dev/pkg/handoff"
	"lazaret.dev/pkg/handoff/handofftest"
)

// The exact command line and descriptor layout of `lazaret-coordinator
// serve`. A change here is a change of the hand-off between two binaries
// that may come from different builds: change it deliberately.
func TestServeGolden(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    Serve
		want []string
	}{
		{"start", Serve{ConfigFile: "/home/u/.config/lazaret/config.toml", Profile: "agents", Workspace: "/home/u/src/w",
			Fingerprint: "ab", Linger: 10 * time.Second, Session: "5e55104e000000000000000000000001"},
			[]string{"serve", "--config", "/home/u/.config/lazaret/config.toml", "--profile", "agents", "--workspace", "/home/u/src/w",
				"--fingerprint", "ab", "--linger", "10s", "--session", "5e55104e000000000000000000000001"}},
		{"recover", Serve{ConfigFile: "c", Profile: "p", Workspace: "w", Fingerprint: "f", Linger: 0, RecoverOnly: true},
			[]string{"serve", "--config", "c", "--profile", "p", "--workspace", "w", "--fingerprint", "f", "--linger", "0s", "--recover-only"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			handofftest.RoundTrip(t, tc.s, tc.s.Argv, tc.want, func(a []string) (Serve, error) { return ParseServe(a[1:]) })
		})
	}
	if lock, report := ServeLayout.FD(fileLock), ServeLayout.FD(fileReport); lock != 3 || report != 4 {
		t.Errorf("domain-lock is fd %d and start-report fd %d, want 3 and 4", lock, report)
	}
	lock, report := os.NewFile(100, "lock"), os.NewFile(101, "report")
	s := Serve{Lock: lock, Report: report}
	if files, err := s.ExtraFiles(); err != nil || !reflect.DeepEqual(files, []*os.File{lock, report}) {
		t.Errorf("ExtraFiles = %v, %v; want [lock report]", files, err)
	}
	s.Report = nil
	if _, err := s.ExtraFiles(); !errors.Is(err, handoff.ErrFiles) {
		t.Errorf("ExtraFiles without the report: %v", err)
	}
}

func TestParseServe(t *testing.T) {
	base := []string{"--config", "c", "--profile", "p", "--workspace", "w", "--fingerprint", "f"}
	s, err := ParseServe(base)
	if err != nil || s.Linger != DefaultLinger || s.RecoverOnly || s.Session != "" {
		t.Fatalf("ParseServe without --linger = %+v, %v; want the default linger", s, err)
	}
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"no fingerprint", base[:6]},
		{"bad linger", append(append([]string{}, base...), "--linger", "soon")},
		{"unknown flag", append(append([]string{}, base...), "--color", "x")},
		{"positional", append(append([]string{}, base...), "extra")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := ParseServe(tc.args); !errors.Is(err, handoff.ErrArgs) {
				t.Fatalf("ParseServe(%q) = %v, want ErrArgs", tc.args, err)
			}
		})
	}
}
