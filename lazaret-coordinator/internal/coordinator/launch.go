package coordinator

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"

	"golang.org/x/sys/unix"

	"lazaret.dev/pkg/hostid"
	"lazaret.dev/pkg/spawn"
	"lazaret.dev/pkg/supervise"
)

// launcher starts the HC's gated children (the `runsc exec` clients) from
// one spawn.Thread, whose OS thread never exits: the kernel sends a
// child's parent-death signal when the thread that forked it exits
// (golang/go#27505), so every exec client dies with the HC.
type launcher struct {
	thread *spawn.Thread
}

func newLauncher() *launcher { return &launcher{thread: spawn.NewThread()} }

// gated is a child held by `lazaret-supervisor gate` until opened, so its
// pidfs identity is recorded before the program runs; execve keeps the
// PID, pidfs inode and start time.
//
// Once the gate is opened the session run (sessions.go) owns proc: it
// waits for it, signals it and closes it after the reap. Until then
// abandon ends it.
type gated struct {
	proc     *spawn.Process
	identity hostid.PidfsProcessIdentityV1
	gate     *os.File // write end of the gate pipe
	status   *os.File // read end of the exec-status pipe
}

// ErrGate means a gated child did not execute its program.
var ErrGate = errors.New("gated child did not execute its program")

// start starts cmd (whose Path and Args are the program) behind
// supervisor's gate. extra become the program's descriptors from
// supervise.GateLayout.NextFD() on.
func (l *launcher) start(supervisor string, cmd *exec.Cmd, extra []*os.File, setctty bool) (*gated, error) {
	gateR, gateW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("creating the gate pipe: %w", err)
	}
	statusR, statusW, err := os.Pipe()
	if err != nil {
		gateR.Close()
		gateW.Close()
		return nil, fmt.Errorf("creating the exec-status pipe: %w", err)
	}
	program := cmd.Args
	hand := supervise.Gate{Program: program, Gate: gateR, ExecStatus: statusW, Extra: extra}
	args, err := hand.Argv()
	if err == nil {
		cmd.ExtraFiles, err = hand.ExtraFiles()
	}
	if err != nil {
		gateR.Close()
		gateW.Close()
		statusR.Close()
		statusW.Close()
		return nil, err
	}
	cmd.Path = supervisor
	cmd.Args = append([]string{supervisor}, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Setsid:    true,
		Setctty:   setctty,
		Pdeathsig: syscall.SIGKILL,
	}
	proc, err := l.thread.Start(cmd)
	gateR.Close()
	statusW.Close()
	if err != nil {
		gateW.Close()
		statusR.Close()
		return nil, fmt.Errorf("starting %q: %w", program[0], err)
	}
	return &gated{proc: proc, identity: proc.Identity(), gate: gateW, status: statusR}, nil
}

// open releases the gate and waits for the exec status: EOF means the
// program runs.
func (g *gated) open() error {
	_, err := g.gate.Write([]byte{'G'})
	g.gate.Close()
	if err != nil {
		g.status.Close()
		return fmt.Errorf("opening the gate: %w", err)
	}
	var b [4]byte
	n, err := io.ReadFull(g.status, b[:])
	g.status.Close()
	switch {
	case n == 0 && (err == io.EOF):
		return nil
	case n == 4:
		return fmt.Errorf("%w: %v", ErrGate, unix.Errno(binary.BigEndian.Uint32(b[:])))
	}
	return fmt.Errorf("%w: exec status unreadable: %v", ErrGate, err)
}

// abandon closes the gate without opening it (the gate exits 125), kills
// the child through its pidfd and reaps it.
func (g *gated) abandon() {
	g.gate.Close()
	g.status.Close()
	g.proc.Kill()
	g.proc.Wait()
	g.proc.Close()
}
