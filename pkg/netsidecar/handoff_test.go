package netsidecar

import (
	"errors"
	"os"
	"reflect"
	"testing"

	"lazaret.dev/pkg/handoff"
)

// The exact command line and descriptor layout of lazaret-netsidecar, as
// the coordinator (behind unshare) and Command hand it.
func TestDescriptorsGolden(t *testing.T) {
	var d Descriptors
	if argv, err := d.Argv(); err != nil || len(argv) != 0 {
		t.Fatalf("Argv = %q, %v; want none", argv, err)
	}
	if Layout.FD(fileChannel) != 3 || Layout.FD(filePolicy) != 4 || Layout.FD(fileNames) != 5 || Layout.FD(fileBroker) != 6 || Layout.NextFD() != 7 {
		t.Errorf("control fd %d, policy fd %d, names fd %d, broker fd %d, next fd %d; want 3, 4, 5, 6, 7",
			Layout.FD(fileChannel), Layout.FD(filePolicy), Layout.FD(fileNames), Layout.FD(fileBroker), Layout.NextFD())
	}
	ch, pol, names, brk := os.NewFile(100, "control"), os.NewFile(101, "policy"), os.NewFile(102, "names"), os.NewFile(103, "broker")
	d = Descriptors{Channel: ch, Policy: pol, Names: names, Broker: brk}
	if files, err := d.ExtraFiles(); err != nil || !reflect.DeepEqual(files, []*os.File{ch, pol, names, brk}) {
		t.Errorf("ExtraFiles = %v, %v", files, err)
	}
	d.Policy = nil
	if _, err := d.ExtraFiles(); !errors.Is(err, handoff.ErrFiles) {
		t.Errorf("ExtraFiles without the policy: %v", err)
	}
}
