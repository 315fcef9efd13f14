package spawn

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"lazaret.dev/pkg/hostid"
)

// Exit codes of a gated child that does not become its program. They are
// those of `lazaret-supervisor gate`, so both gates read alike.
const (
	// ExitGateClosed: the gate was abandoned (EOF or a wrong byte).
	ExitGateClosed = 125
	// ExitExecFailed: entering a namespace, changing directory or execve
	// failed; the exec status says which and why.
	ExitExecFailed = 127
)

// ErrExec means a gated child did not execute its program; the error
// names the step (entering a namespace, changing directory, execve) and
// wraps its errno.
var ErrExec = errors.New("gated child did not execute its program")

// gateOpen is the byte that opens a gate.
const gateOpen = 'G'

// Steps of the gated child after the gate opened, as its exec status
// names them.
const (
	stepPrepare uint32 = iota + 1
	stepSetns
	stepChdir
	stepExec
)

// GatedCmd is a program to start held at a gate: the child exists, is
// named by its pidfd and has its identity read, but runs nothing of the
// program until Gated.Open. Unlike exec.Cmd it is forked by this package
// itself, so that between the fork and execve it can wait for the gate
// and enter namespaces with setns(2), which a Go process, being
// multithreaded, cannot do for itself and exec.Cmd does not offer: no
// gate or nsenter process runs in between, and the staged identity is the
// program's (execve keeps PID, pidfs inode and start time).
type GatedCmd struct {
	// Path is the program, an absolute path; there is no PATH lookup.
	Path string
	// Args is the program's argv, Args[0] included.
	Args []string
	// Env is the program's complete environment.
	Env []string
	// Dir is the working directory to change to before execve; empty
	// keeps the parent's, or, when a mount namespace is entered, that
	// namespace's root (setns(2) moves there).
	Dir string
	// Files[i] becomes descriptor i of the program. A nil entry below 3
	// is /dev/null; a nil entry from 3 on leaves that descriptor closed.
	// Every other descriptor of this process is closed in the child
	// before it waits at the gate. The files stay the caller's.
	Files []*os.File
	// Namespaces are entered in order with setns(2) once the gate opens,
	// a user namespace before the namespaces it owns. The files stay the
	// caller's; the child holds its copies only until execve.
	Namespaces []*os.File
	// Setsid puts the child in a new session; Setctty (which needs
	// Setsid) makes descriptor 0 its controlling terminal.
	Setsid, Setctty bool
	// Pdeathsig is the child's parent-death signal, 0 for none. It is set
	// right after the fork, before the gate, and survives setns into a
	// user namespace owned by this process's user and the execve.
	Pdeathsig syscall.Signal
}

// Gated is a started GatedCmd: its Process, and the gate until Open or
// Abandon.
type Gated struct {
	proc   *Process
	gate   *os.File // write end of the gate pipe
	status *os.File // read end of the exec-status pipe
}

// Process is the child. Before Open it runs nothing of the program; once
// Open returned nil it is the program.
func (g *Gated) Process() *Process { return g.proc }

// StartGated forks cmd held at its gate, from t's thread (so Pdeathsig
// ends the child with this process), and reads its identity.
func (t *Thread) StartGated(cmd *GatedCmd) (*Gated, error) {
	var g *Gated
	err := t.run(func() error {
		var err error
		g, err = startGated(cmd)
		return err
	})
	return g, err
}

// Open releases the gate and waits for the exec status: nil means the
// program runs; otherwise the error matches ErrExec and names the step,
// and the child has exited (ExitExecFailed). Open is called at most once;
// afterwards the caller owns the Process (waits for it, closes it).
func (g *Gated) Open() error {
	_, werr := g.gate.Write([]byte{gateOpen})
	g.gate.Close()
	// A child that failed before its gate wrote why and exited: its
	// status explains the failed write.
	var b [8]byte
	n, err := io.ReadFull(g.status, b[:])
	g.status.Close()
	switch {
	case werr != nil && n != len(b):
		return fmt.Errorf("opening the gate: %w", werr)
	case n == 0 && err == io.EOF:
		return nil
	case n == len(b):
		step, errno := binary.BigEndian.Uint32(b[:4]), unix.Errno(binary.BigEndian.Uint32(b[4:]))
		what := map[uint32]string{stepPrepare: "preparing the child", stepSetns: "entering a namespace", stepChdir: "changing directory", stepExec: "execve"}[step]
		if what == "" {
			what = fmt.Sprintf("step %d", step)
		}
		return fmt.Errorf("%w: %s: %w", ErrExec, what, errno)
	}
	return fmt.Errorf("%w: exec status unreadable: %v", ErrExec, err)
}

// Abandon closes the gate unopened (the child exits ExitGateClosed without
// executing anything), kills the child through its pidfd, reaps it and
// closes the pidfd.
func (g *Gated) Abandon() {
	g.gate.Close()
	g.status.Close()
	g.proc.Kill()
	g.proc.Wait()
	g.proc.Close()
}

// childSpec is what the forked child reads: prepared in this process's
// memory before the fork, of which the child has a copy. It holds no Go
// pointer the child follows except into that copy.
type childSpec struct {
	path *byte
	argv []*byte // nil-terminated
	envv []*byte // nil-terminated
	dir  *byte   // nil: no chdir

	// src[k] is moved to descriptor k; -1 leaves k closed. The entries
	// from nprog on are the gate, the exec status and the namespaces,
	// which stay close-on-exec.
	src   []int32
	nprog int
	high  int // above every source and every target

	setsid, setctty bool
	pdeathsig       uintptr
	ppid            uintptr
}

func startGated(cmd *GatedCmd) (_ *Gated, err error) {
	if !filepath.IsAbs(cmd.Path) {
		return nil, fmt.Errorf("starting %q: the program must be an absolute path", cmd.Path)
	}
	if len(cmd.Args) == 0 {
		return nil, fmt.Errorf("starting %q: empty argv", cmd.Path)
	}
	if cmd.Setctty && !cmd.Setsid {
		return nil, fmt.Errorf("starting %q: a controlling terminal needs a new session", cmd.Path)
	}
	var closeAfter []*os.File
	defer func() {
		for _, f := range closeAfter {
			f.Close()
		}
	}()
	gateR, gateW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("creating the gate pipe: %w", err)
	}
	closeAfter = append(closeAfter, gateR)
	statusR, statusW, err := os.Pipe()
	if err != nil {
		gateW.Close()
		return nil, fmt.Errorf("creating the exec-status pipe: %w", err)
	}
	closeAfter = append(closeAfter, statusW)
	defer func() {
		if err != nil {
			gateW.Close()
			statusR.Close()
		}
	}()

	spec := &childSpec{nprog: max(len(cmd.Files), 3), ppid: uintptr(os.Getpid())}
	if spec.path, err = syscall.BytePtrFromString(cmd.Path); err != nil {
		return nil, fmt.Errorf("starting %q: %w", cmd.Path, err)
	}
	if spec.argv, err = syscall.SlicePtrFromStrings(cmd.Args); err != nil {
		return nil, fmt.Errorf("starting %q: argv: %w", cmd.Path, err)
	}
	if spec.envv, err = syscall.SlicePtrFromStrings(cmd.Env); err != nil {
		return nil, fmt.Errorf("starting %q: environment: %w", cmd.Path, err)
	}
	if cmd.Dir != "" {
		if spec.dir, err = syscall.BytePtrFromString(cmd.Dir); err != nil {
			return nil, fmt.Errorf("starting %q: directory: %w", cmd.Path, err)
		}
	}
	// Every file is used through its descriptor number from here until the
	// fork; the files are kept reachable until then (closeAfter, cmd).
	for k := 0; k < spec.nprog; k++ {
		var f *os.File
		if k < len(cmd.Files) {
			f = cmd.Files[k]
		}
		if f == nil && k < 3 {
			if f, err = os.OpenFile(os.DevNull, os.O_RDWR, 0); err != nil {
				return nil, fmt.Errorf("starting %q: %w", cmd.Path, err)
			}
			closeAfter = append(closeAfter, f)
		}
		if f == nil {
			spec.src = append(spec.src, -1)
			continue
		}
		spec.src = append(spec.src, int32(f.Fd()))
	}
	spec.src = append(spec.src, int32(gateR.Fd()), int32(statusW.Fd()))
	for _, ns := range cmd.Namespaces {
		spec.src = append(spec.src, int32(ns.Fd()))
	}
	spec.high = len(spec.src)
	for _, fd := range spec.src {
		spec.high = max(spec.high, int(fd)+1)
	}
	spec.setsid, spec.setctty = cmd.Setsid, cmd.Setctty
	spec.pdeathsig = uintptr(cmd.Pdeathsig)

	pid, pidfd, errno := forkGated(spec)
	// Keep every file the child inherited by number open until the fork
	// has been made.
	runtime.KeepAlive(cmd)
	runtime.KeepAlive(closeAfter)
	if errno != 0 {
		return nil, fmt.Errorf("starting %q: %w", cmd.Path, os.NewSyscallError("clone3", errno))
	}
	p, err := adopt(pid, pidfd, cmd.Path)
	if err != nil {
		// Nothing of the program ran: the closed gate ends the child,
		// which is reaped here by its PID (it is this process's unreaped
		// child, so the PID still names it).
		gateW.Close()
		unix.PidfdSendSignal(pidfd, unix.SIGKILL, nil, 0)
		unix.Close(pidfd)
		var ws unix.WaitStatus
		for {
			if _, werr := unix.Wait4(pid, &ws, 0, nil); werr != unix.EINTR {
				break
			}
		}
		return nil, err
	}
	return &Gated{proc: p, gate: gateW, status: statusR}, nil
}

// adopt makes a Process of the child pid this package forked, named by
// pidfd, and reads its identity. On error the caller ends and reaps the
// child.
func adopt(pid, pidfd int, path string) (*Process, error) {
	p := &Process{pid: pid, fd: pidfd, done: make(chan struct{})}
	id, err := hostid.IdentityOf(pidfd)
	if err != nil {
		return nil, fmt.Errorf("identifying %q (pid %d): %w", path, pid, err)
	}
	p.identity = id
	// os.FindProcess opens a pidfd of its own for the unreaped child, so
	// waiting for it, and its ProcessState, are the standard library's.
	osp, err := os.FindProcess(pid)
	if err != nil {
		return nil, fmt.Errorf("starting %q: finding pid %d: %w", path, pid, err)
	}
	p.wait = func() (*os.ProcessState, error) {
		ps, err := osp.Wait()
		if err == nil && !ps.Success() {
			err = &exec.ExitError{ProcessState: ps}
		}
		return ps, err
	}
	return p, nil
}

// cloneArgs is struct clone_args of clone3(2).
type cloneArgs struct {
	flags      uint64
	pidfd      uint64
	childTID   uint64
	parentTID  uint64
	exitSignal uint64
	stack      uint64
	stackSize  uint64
	tls        uint64
	setTID     uint64
	setTIDSize uint64
	cgroup     uint64
}

// forkGated forks with clone3(CLONE_PIDFD), without CLONE_VM: the child
// gets a copy of this process's memory and must wait at its gate, so it
// cannot borrow the parent's. It runs on the calling goroutine's locked
// thread. As in package syscall, the runtime is told about the fork so
// that signals stay blocked across it and no stack growth or allocation
// can happen in the child; the child then runs only childMain, which calls
// nothing but raw system calls.
//
//go:norace
//go:nocheckptr
//go:noinline
func forkGated(spec *childSpec) (pid, pidfd int, errno syscall.Errno) {
	fd := int32(-1) // clone3 stores an int
	args := cloneArgs{flags: unix.CLONE_PIDFD, exitSignal: uint64(unix.SIGCHLD)}
	args.pidfd = uint64(uintptr(unsafe.Pointer(&fd)))
	syscall.ForkLock.Lock()
	runtimeBeforeFork()
	r1, _, e := syscall.RawSyscall(unix.SYS_CLONE3, uintptr(unsafe.Pointer(&args)), unsafe.Sizeof(args), 0)
	if e == 0 && r1 == 0 {
		// The child.
		runtimeAfterForkInChild()
		childMain(spec)
	}
	runtimeAfterFork()
	syscall.ForkLock.Unlock()
	if e != 0 {
		return 0, -1, e
	}
	return int(r1), int(fd), 0
}

// childMain is the forked child up to execve. It never returns. Only raw
// system calls: the child has one thread and a copy of a runtime whose
// other threads it does not have.
//
//go:norace
//go:nocheckptr
//go:nosplit
func childMain(s *childSpec) {
	var err1 syscall.Errno
	var b [8]byte
	var n uintptr
	nsrc := len(s.src)
	status := uintptr(s.src[s.nprog+1]) // the exec status pipe, wherever it is now
	step := stepPrepare
	if s.setsid {
		if _, _, err1 = syscall.RawSyscall(unix.SYS_SETSID, 0, 0, 0); err1 != 0 {
			goto report
		}
	}
	if s.pdeathsig != 0 {
		if _, _, err1 = syscall.RawSyscall6(unix.SYS_PRCTL, unix.PR_SET_PDEATHSIG, s.pdeathsig, 0, 0, 0, 0); err1 != 0 {
			goto report
		}
		// The parent may have died before the signal was armed.
		if ppid, _, _ := syscall.RawSyscall(unix.SYS_GETPPID, 0, 0, 0); ppid != s.ppid {
			self, _, _ := syscall.RawSyscall(unix.SYS_GETPID, 0, 0, 0)
			syscall.RawSyscall(unix.SYS_KILL, self, s.pdeathsig, 0)
			goto report
		}
	}
	// Move every source above every source and target, then into place,
	// so no move overwrites a descriptor still to be moved; then close
	// everything else this process had open.
	for k := 0; k < nsrc; k++ {
		if s.src[k] < 0 {
			continue
		}
		var fd uintptr
		if fd, _, err1 = syscall.RawSyscall(unix.SYS_FCNTL, uintptr(s.src[k]), unix.F_DUPFD_CLOEXEC, uintptr(s.high)); err1 != 0 {
			goto report
		}
		s.src[k] = int32(fd)
	}
	// The high copy of the exec status, which no move below overwrites.
	status = uintptr(s.src[s.nprog+1])
	for k := 0; k < nsrc; k++ {
		if s.src[k] < 0 {
			continue
		}
		flags := uintptr(0)
		if k >= s.nprog {
			flags = unix.O_CLOEXEC
		}
		if _, _, err1 = syscall.RawSyscall(unix.SYS_DUP3, uintptr(s.src[k]), uintptr(k), flags); err1 != 0 {
			goto report
		}
	}
	status = uintptr(s.nprog + 1)
	for k := 0; k < s.nprog; k++ {
		if s.src[k] < 0 {
			syscall.RawSyscall(unix.SYS_CLOSE, uintptr(k), 0, 0)
		}
	}
	syscall.RawSyscall(unix.SYS_CLOSE_RANGE, uintptr(nsrc), uintptr(^uint32(0)), 0)
	if s.setctty {
		if _, _, err1 = syscall.RawSyscall(unix.SYS_IOCTL, 0, unix.TIOCSCTTY, 1); err1 != 0 {
			goto report
		}
	}

	// The gate: one byte opens it, anything else abandons the child.
	for {
		n, _, err1 = syscall.RawSyscall(unix.SYS_READ, uintptr(s.nprog), uintptr(unsafe.Pointer(&b[0])), 1)
		if err1 != unix.EINTR {
			break
		}
	}
	if err1 != 0 || n != 1 || b[0] != gateOpen {
		syscall.RawSyscall(unix.SYS_EXIT_GROUP, ExitGateClosed, 0, 0)
	}
	step = stepSetns
	for k := s.nprog + 2; k < nsrc; k++ {
		if _, _, err1 = syscall.RawSyscall(unix.SYS_SETNS, uintptr(k), 0, 0); err1 != 0 {
			goto report
		}
	}
	if s.dir != nil {
		step = stepChdir
		if _, _, err1 = syscall.RawSyscall(unix.SYS_CHDIR, uintptr(unsafe.Pointer(s.dir)), 0, 0); err1 != 0 {
			goto report
		}
	}
	step = stepExec
	_, _, err1 = syscall.RawSyscall(unix.SYS_EXECVE, uintptr(unsafe.Pointer(s.path)),
		uintptr(unsafe.Pointer(&s.argv[0])), uintptr(unsafe.Pointer(&s.envv[0])))

report:
	b[0], b[1], b[2], b[3] = byte(step>>24), byte(step>>16), byte(step>>8), byte(step)
	b[4], b[5], b[6], b[7] = byte(err1>>24), byte(err1>>16), byte(err1>>8), byte(err1)
	syscall.RawSyscall(unix.SYS_WRITE, status, uintptr(unsafe.Pointer(&b[0])), 8)
	syscall.RawSyscall(unix.SYS_EXIT_GROUP, ExitExecFailed, 0, 0)
}
