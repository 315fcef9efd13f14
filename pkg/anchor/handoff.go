package anchor

import (
	"os"

	"lazaret.dev/pkg/handoff"
)

// Flag and descriptor names of `lazaret-anchor serve`.
const (
	flagAwaitIDMap = "await-id-map"

	// ControlFile names the control socket in ServeLayout; the anchor
	// finds its number with ServeLayout.FD(ControlFile).
	ControlFile = "control"
)

// ServeLayout is the hand-off of `lazaret-anchor serve`: descriptor 3 is
// the anchor's end of the control socketpair.
var ServeLayout = handoff.Layout{
	Child:   "lazaret-anchor serve",
	Command: []string{"serve"},
	Flags:   []handoff.Flag{{Name: flagAwaitIDMap, Switch: true}},
	Files:   []string{ControlFile},
}

// Serve is what Start hands `lazaret-anchor serve`.
type Serve struct {
	// AwaitIDMap makes the anchor wait for IDMapWritten and re-execute
	// itself (the ID map is written by newuidmap and newgidmap).
	AwaitIDMap bool

	// Control is the anchor's end of the control socketpair.
	Control *os.File
}

// Argv is the anchor's command line after its executable.
func (s *Serve) Argv() ([]string, error) {
	v := handoff.Values{}
	if s.AwaitIDMap {
		v[flagAwaitIDMap] = "true"
	}
	return ServeLayout.Argv(v, nil)
}

// ExtraFiles is exec.Cmd.ExtraFiles for the anchor: Control.
func (s *Serve) ExtraFiles() ([]*os.File, error) {
	return ServeLayout.ExtraFiles(map[string]*os.File{ControlFile: s.Control})
}

// ParseServe parses the flags of `serve` (what follows the word).
// Control stays nil: Inherit takes it.
func ParseServe(args []string) (Serve, error) {
	v, _, err := ServeLayout.Parse(args)
	if err != nil {
		return Serve{}, err
	}
	return Serve{AwaitIDMap: v[flagAwaitIDMap] == "true"}, nil
}

// Inherit takes Control from this process's descriptors, close-on-exec:
// no program the anchor starts inherits it, and a re-execution of the
// anchor hands it on explicitly.
func (s *Serve) Inherit() error {
	files, err := ServeLayout.Inherit()
	if err != nil {
		return err
	}
	s.Control = files[ControlFile]
	return nil
}
