package supervise

import (
	"errors"
	"os"
	"reflect"
	"testing"

	"lazaret.dev/pkg/handoff"
)

// The exact command line and descriptor layout of `lazaret-supervisor
// gate`; sessions hand the program its process spec at the first extra
// descriptor, 5.
func TestGateGolden(t *testing.T) {
	g := Gate{Program: []string{"/usr/bin/nsenter", "--", "-x"}}
	argv, err := g.Argv()
	if want := []string{"gate", "--", "/usr/bin/nsenter", "--", "-x"}; err != nil || !reflect.DeepEqual(argv, want) {
		t.Fatalf("Argv = %q, %v; want %q", argv, err, want)
	}
	back, err := ParseGate(argv[1:])
	if err != nil || !reflect.DeepEqual(back.Program, g.Program) {
		t.Fatalf("ParseGate = %q, %v; want %q", back.Program, err, g.Program)
	}
	if GateLayout.FD(gateFile) != 3 || GateLayout.FD(execStatusFile) != 4 || GateLayout.NextFD() != 5 {
		t.Errorf("gate fd %d, exec-status fd %d, first extra fd %d; want 3, 4, 5",
			GateLayout.FD(gateFile), GateLayout.FD(execStatusFile), GateLayout.NextFD())
	}
	gr, sw, mem := os.NewFile(100, "g"), os.NewFile(101, "s"), os.NewFile(102, "m")
	g.Gate, g.ExecStatus, g.Extra = gr, sw, []*os.File{mem}
	if files, err := g.ExtraFiles(); err != nil || !reflect.DeepEqual(files, []*os.File{gr, sw, mem}) {
		t.Errorf("ExtraFiles = %v, %v", files, err)
	}
	g.ExecStatus = nil
	if _, err := g.ExtraFiles(); !errors.Is(err, handoff.ErrFiles) {
		t.Errorf("ExtraFiles without exec-status: %v", err)
	}
	if p, err := ParseGate([]string{"/bin/true"}); err == nil {
		t.Errorf("ParseGate without -- = %q, want an error", p.Program)
	}
}
