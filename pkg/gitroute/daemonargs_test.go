package gitroute

import (
	"errors"
	"os"
	"reflect"
	"testing"

	"lazaret.dev/pkg/handoff"
	"lazaret.dev/pkg/handoff/handofftest"
)

// The exact command line and descriptor layout of lazaret-gitroute, as
// the coordinator and Start hand it.
func TestDaemonArgsGolden(t *testing.T) {
	for _, tc := range []struct {
		name string
		a    DaemonArgs
		want []string
	}{
		{"coordinator", DaemonArgs{HostRoot: "/w", IsolatedRoot: "/iso", Mountpoint: "/gen/workspace",
			KeepIsolated: "/gen/isolation-keep", IsolationReport: "/gen/isolation-report"},
			[]string{"--host-root", "/w", "--isolated-root", "/iso", "--mountpoint", "/gen/workspace",
				"--keep-isolated", "/gen/isolation-keep", "--isolation-report", "/gen/isolation-report"}},
		{"Start", DaemonArgs{HostRoot: "/w", IsolatedRoot: "/iso", Mountpoint: "/m"},
			[]string{"--host-root", "/w", "--isolated-root", "/iso", "--mountpoint", "/m"}},
		{"mount method", DaemonArgs{HostRoot: "/w", IsolatedRoot: "/iso", Mountpoint: "/m", MountMethod: "direct"},
			[]string{"--host-root", "/w", "--isolated-root", "/iso", "--mountpoint", "/m", "--mount-method", "direct"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			handofftest.RoundTrip(t, tc.a, tc.a.Argv, tc.want, ParseDaemonArgs)
		})
	}
	if fd := DaemonLayout.FD(fileControl); fd != 3 {
		t.Errorf("control is fd %d, want 3", fd)
	}
	c := os.NewFile(100, "control")
	if files, err := (&DaemonArgs{Control: c}).ExtraFiles(); err != nil || !reflect.DeepEqual(files, []*os.File{c}) {
		t.Errorf("ExtraFiles = %v, %v", files, err)
	}
	if _, err := (&DaemonArgs{}).ExtraFiles(); !errors.Is(err, handoff.ErrFiles) {
		t.Errorf("ExtraFiles without control: %v", err)
	}
	if _, err := ParseDaemonArgs([]string{"--host-root", "/w", "--mountpoint", "/m"}); !errors.Is(err, handoff.ErrArgs) {
		t.Errorf("ParseDaemonArgs without --isolated-root: %v", err)
	}
}
