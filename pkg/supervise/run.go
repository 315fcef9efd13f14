package supervise

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"

	"lazaret.dev/pkg/handoff"
	"lazaret.dev/pkg/hostid"
)

// Flag and descriptor names of `lazaret-supervisor run`.
const (
	flagSlot  = "slot"
	flagLogFD = "log-fd"

	// ChannelFile names the generation channel in RunLayout; the
	// supervisor finds its number with RunLayout.FD(ChannelFile).
	ChannelFile = "channel"
)

// RunLayout is the hand-off of `lazaret-supervisor run --slot SLOT
// [--log-fd FD] -- PROGRAM [ARGS...]`: descriptor 3 is the supervisor's
// end of the generation channel. The optional log follows the Layout's
// files, at RunLayout.NextFD(), and --log-fd names it.
var RunLayout = handoff.Layout{
	Child:    "lazaret-supervisor run",
	Command:  []string{"run"},
	Flags:    []handoff.Flag{{Name: flagSlot, Required: true}, {Name: flagLogFD}},
	Files:    []string{ChannelFile},
	Trailing: true,
}

// ErrNoChannel means the supervisor was not handed a generation channel.
var ErrNoChannel = fmt.Errorf("no generation channel on fd %d (lazaret-supervisor run is started by lazaret-coordinator)", RunLayout.FD(ChannelFile))

// RunArgs is what Launch hands `lazaret-supervisor run`.
type RunArgs struct {
	// Slot is the child's slot.
	Slot hostid.Slot
	// Program is the child's argv; Program[0] is absolute.
	Program []string
	// Channel is the supervisor's end of the generation channel (Pair).
	Channel *os.File
	// Log, when set, receives the supervisor's own log.
	Log *os.File

	// logFD is the descriptor --log-fd names, between ParseRunArgs and
	// Inherit; 0 for none.
	logFD int
}

// Argv is the supervisor's command line after its executable.
func (a *RunArgs) Argv() ([]string, error) {
	v := handoff.Values{flagSlot: a.Slot.String()}
	if a.Log != nil {
		v[flagLogFD] = strconv.Itoa(RunLayout.NextFD())
	}
	return RunLayout.Argv(v, a.Program)
}

// ExtraFiles is exec.Cmd.ExtraFiles for the supervisor: Channel, then Log
// when set.
func (a *RunArgs) ExtraFiles() ([]*os.File, error) {
	var extra []*os.File
	if a.Log != nil {
		extra = append(extra, a.Log)
	}
	return RunLayout.ExtraFiles(map[string]*os.File{ChannelFile: a.Channel}, extra...)
}

// ParseRunArgs parses what follows the word run: the slot by its schema
// name, --log-fd (a negative value means none; it may not name stdio or
// the channel) and an absolute program. Channel and Log stay nil: Inherit
// takes them.
func ParseRunArgs(args []string) (RunArgs, error) {
	v, program, err := RunLayout.Parse(args)
	if err != nil {
		return RunArgs{}, err
	}
	a := RunArgs{Program: program}
	if a.Slot, err = parseSlot(v[flagSlot]); err != nil {
		return RunArgs{}, err
	}
	if s, ok := v[flagLogFD]; ok {
		fd, err := strconv.Atoi(s)
		switch {
		case err != nil:
			return RunArgs{}, fmt.Errorf("%s: --%s %q is not a number: %w", RunLayout.Child, flagLogFD, s, handoff.ErrArgs)
		case fd >= 0 && fd < RunLayout.NextFD():
			return RunArgs{}, fmt.Errorf("--%s %d: descriptors 0-%d are stdio and the channel", flagLogFD, fd, RunLayout.NextFD()-1)
		case fd >= 0:
			a.logFD = fd
		}
	}
	if len(program) == 0 || !filepath.IsAbs(program[0]) {
		return RunArgs{}, fmt.Errorf("program %q: give the child as `-- /absolute/path args...` (no PATH lookup)", program)
	}
	return a, nil
}

// Inherit takes Log, when --log-fd named one, and Channel from this
// process's descriptors, both close-on-exec. A missing channel is
// ErrNoChannel.
func (a *RunArgs) Inherit() error {
	if a.logFD > 0 {
		if _, err := unix.FcntlInt(uintptr(a.logFD), unix.F_GETFD, 0); err != nil {
			return fmt.Errorf("--%s %d: descriptor is not open", flagLogFD, a.logFD)
		}
	}
	files, err := RunLayout.Inherit()
	if err != nil {
		return fmt.Errorf("%w: %w", ErrNoChannel, err)
	}
	a.Channel = files[ChannelFile]
	if a.logFD > 0 {
		unix.CloseOnExec(a.logFD)
		a.Log = os.NewFile(uintptr(a.logFD), "log")
	}
	return nil
}

// parseSlot returns the slot whose schema name is name.
func parseSlot(name string) (hostid.Slot, error) {
	for s := hostid.Slot(1); s.Valid(); s++ {
		if s.String() == name {
			return s, nil
		}
	}
	return 0, fmt.Errorf("--%s: slot %q: want one of the HostProcessOwnershipSlot names, such as SandboxAttachedRunsc: %w", flagSlot, name, handoff.ErrArgs)
}
