package coordinator

import (
	"os"
	"syscall"

	"lazaret.dev/pkg/hostid"
	"lazaret.dev/pkg/spawn"
)

// launcher starts the HC's gated children (the `runsc exec` clients) from
// one spawn.Thread, whose OS thread never exits: the kernel sends a
// child's parent-death signal when the thread that forked it exits
// (golang/go#27505), so every exec client dies with the HC.
type launcher struct {
	thread *spawn.Thread
}

func newLauncher() *launcher { return &launcher{thread: spawn.NewThread()} }

// gated is a child held at its gate until opened, so its pidfs identity
// is recorded before the program runs; execve keeps the PID, pidfs inode
// and start time. The child is forked by pkg/spawn itself and waits at
// the gate in the fork, before any program: once opened it enters the
// State Anchor's namespaces with setns(2) and executes runsc, with no
// gate or nsenter process in between.
//
// Once the gate is opened the session run (sessions.go) owns proc: it
// waits for it, signals it and closes it after the reap. Until then
// abandon ends it.
type gated struct {
	g        *spawn.Gated
	proc     *spawn.Process
	identity hostid.PidfsProcessIdentityV1
}

// execClient is what a gated exec client runs: argv (argv[0] absolute)
// with the runsc environment, its descriptors from 0 (stdin, stdout,
// stderr, then the process spec), entering namespaces (the anchor's user
// and mount namespaces, in that order) once the gate opens.
type execClient struct {
	argv       []string
	files      []*os.File
	namespaces []*os.File
	// setctty makes descriptor 0, a pty replica, the controlling terminal
	// of the client's new session.
	setctty bool
}

// start forks c held at its gate, in a new session, with PDEATHSIG
// SIGKILL from the launcher's thread.
func (l *launcher) start(c execClient) (*gated, error) {
	g, err := l.thread.StartGated(&spawn.GatedCmd{
		Path: c.argv[0], Args: c.argv, Env: runscEnv,
		Files: c.files, Namespaces: c.namespaces,
		Setsid: true, Setctty: c.setctty, Pdeathsig: syscall.SIGKILL,
	})
	if err != nil {
		return nil, err
	}
	return &gated{g: g, proc: g.Process(), identity: g.Process().Identity()}, nil
}

// open releases the gate and waits for the exec status: nil means runsc
// runs; otherwise the error matches spawn.ErrExec and names the step.
func (g *gated) open() error { return g.g.Open() }

// abandon closes the gate without opening it (the child exits without
// executing anything), kills the child through its pidfd and reaps it.
func (g *gated) abandon() { g.g.Abandon() }
