package supervise

import (
	"errors"
	"os"
	"reflect"
	"testing"

	"lazaret.dev/pkg/handoff"
	"lazaret.dev/pkg/hostid"
)

// The exact command line and descriptor layout of `lazaret-supervisor
// run`, as Launch hands it with and without a log.
func TestRunArgsGolden(t *testing.T) {
	ch, log := os.NewFile(100, "channel"), os.NewFile(101, "log")
	for _, tc := range []struct {
		name  string
		a     RunArgs
		want  []string
		files []*os.File
		logFD int
	}{
		{"with a log", RunArgs{Slot: hostid.SlotSandboxAttachedRunsc, Program: []string{"/usr/bin/runsc", "--", "-x"}, Channel: ch, Log: log},
			[]string{"run", "--slot", "SandboxAttachedRunsc", "--log-fd", "4", "--", "/usr/bin/runsc", "--", "-x"},
			[]*os.File{ch, log}, 4},
		{"without a log", RunArgs{Slot: hostid.SlotSandboxAttachedRunsc, Program: []string{"/bin/true"}, Channel: ch},
			[]string{"run", "--slot", "SandboxAttachedRunsc", "--", "/bin/true"},
			[]*os.File{ch}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.a.Argv()
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Argv = %q, %v\nwant %q", got, err, tc.want)
			}
			if files, err := tc.a.ExtraFiles(); err != nil || !reflect.DeepEqual(files, tc.files) {
				t.Errorf("ExtraFiles = %v, %v; want %v", files, err, tc.files)
			}
			back, err := ParseRunArgs(got[1:])
			if err != nil || back.Slot != tc.a.Slot || !reflect.DeepEqual(back.Program, tc.a.Program) || back.logFD != tc.logFD {
				t.Fatalf("ParseRunArgs = %+v, %v; want slot %v, program %q, log fd %d", back, err, tc.a.Slot, tc.a.Program, tc.logFD)
			}
		})
	}
	if RunLayout.FD(ChannelFile) != 3 || RunLayout.NextFD() != 4 {
		t.Errorf("channel fd %d, log fd %d; want 3, 4", RunLayout.FD(ChannelFile), RunLayout.NextFD())
	}
	if _, err := (&RunArgs{Slot: hostid.SlotSandboxAttachedRunsc, Program: []string{"/bin/true"}}).ExtraFiles(); !errors.Is(err, handoff.ErrFiles) {
		t.Errorf("ExtraFiles without the channel: %v", err)
	}
}

func TestParseRunArgsRejects(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"no slot", []string{"--", "/bin/true"}},
		{"unknown slot", []string{"--slot", "Sandbox", "--", "/bin/true"}},
		{"log on the channel", []string{"--slot", "SandboxAttachedRunsc", "--log-fd", "3", "--", "/bin/true"}},
		{"log fd not a number", []string{"--slot", "SandboxAttachedRunsc", "--log-fd", "four", "--", "/bin/true"}},
		{"relative program", []string{"--slot", "SandboxAttachedRunsc", "--", "true"}},
		{"no program", []string{"--slot", "SandboxAttachedRunsc"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if a, err := ParseRunArgs(tc.args); err == nil {
				t.Fatalf("ParseRunArgs = %+v, want an error", a)
			}
		})
	}
	if a, err := ParseRunArgs([]string{"--slot", "SandboxAttachedRunsc", "--log-fd", "-1", "--", "/bin/true"}); err != nil || a.logFD != 0 {
		t.Errorf("--log-fd -1 = %+v, %v; want no log", a, err)
	}
}
