package supervise

import (
	"os"

	"lazaret.dev/pkg/handoff"
)

// GateLayout is the hand-off of `lazaret-supervisor gate -- PROGRAM
// [ARGS...]`, which holds a child until its parent opens the gate and then
// becomes the program: descriptor 3 is the gate pipe's read end,
// descriptor 4 the exec-status pipe's write end. Files after them reach
// the program from GateLayout.NextFD() on.
var GateLayout = handoff.Layout{
	Child:    "lazaret-supervisor gate",
	Command:  []string{"gate"},
	Files:    []string{gateFile, execStatusFile},
	Trailing: true,
}

const (
	gateFile       = "gate"
	execStatusFile = "exec-status"
)

// Gate is what a parent hands `lazaret-supervisor gate`.
type Gate struct {
	// Program is the argv the gate executes; Program[0] is absolute.
	Program []string
	// Gate is the read end of the gate pipe: one byte opens it, EOF
	// abandons the child.
	Gate *os.File
	// ExecStatus is the write end of the exec-status pipe: it closes on a
	// successful execve; on failure the gate writes the errno first.
	ExecStatus *os.File
	// Extra are handed on to the program, from GateLayout.NextFD() on.
	Extra []*os.File
}

// Argv is the gate's command line after its executable.
func (g *Gate) Argv() ([]string, error) { return GateLayout.Argv(nil, g.Program) }

// ExtraFiles is exec.Cmd.ExtraFiles for the gate.
func (g *Gate) ExtraFiles() ([]*os.File, error) {
	return GateLayout.ExtraFiles(map[string]*os.File{gateFile: g.Gate, execStatusFile: g.ExecStatus}, g.Extra...)
}

// ParseGate parses what follows the word gate. The files stay nil:
// Inherit takes them.
func ParseGate(args []string) (Gate, error) {
	_, program, err := GateLayout.Parse(args)
	if err != nil {
		return Gate{}, err
	}
	return Gate{Program: program}, nil
}

// Inherit takes Gate and ExecStatus from this process's descriptors,
// close-on-exec so neither reaches the program. Extra stays nil: those
// descriptors are the program's.
func (g *Gate) Inherit() error {
	files, err := GateLayout.Inherit()
	if err != nil {
		return err
	}
	g.Gate, g.ExecStatus = files[gateFile], files[execStatusFile]
	return nil
}
