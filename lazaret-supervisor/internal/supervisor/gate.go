package supervisor

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"

	"lazaret.dev/pkg/helpermain"
	"lazaret.dev/pkg/supervise"
)

// gateOpen is the byte that opens the gate.
const gateOpen = 'G'

// Exit codes of a gate that does not become its program.
const (
	// ExitGateClosed: the gate was abandoned (EOF or a wrong byte).
	ExitGateClosed = 125
	// ExitExecFailed: execve of the program failed.
	ExitExecFailed = 127
)

// ErrCausalEdgeLost means the gate's executing thread does not carry the
// parent-death signal, so the program would outlive its supervisor.
var ErrCausalEdgeLost = errors.New("parent-death signal is not armed on the executing thread")

// The parent-death signal is an attribute of the thread the kernel set it
// on, the process's main thread. When a non-main thread calls execve, the
// kernel makes that thread the new leader and the signal is lost with the
// old one. Locking the main goroutine to the main thread during
// initialization keeps the gate's main function, and so its execve, there.
func init() {
	if len(os.Args) > 1 && os.Args[1] == "gate" {
		runtime.LockOSThread()
	}
}

// ErrGateDescriptors means the gate was started without its two pipes.
var ErrGateDescriptors = errors.New("gate descriptors are not pipes (the gate is started only by lazaret-supervisor run)")

// Gate holds the process until the supervisor opens the gate, then
// replaces it with the program by execve. args are the command line after
// the word gate (supervise.GateLayout); the gate and exec-status pipes are
// its inherited descriptors. The process keeps its PID, pidfs inode and
// start time across execve, so the identity the supervisor staged is the
// identity of the program. The program must be absolute: there is no PATH
// lookup.
func Gate(ctx context.Context, args []string) error {
	hand, err := supervise.ParseGate(args)
	if err != nil {
		return err
	}
	argv := hand.Program
	if len(argv) == 0 || !filepath.IsAbs(argv[0]) {
		return fmt.Errorf("gate argv %q: the program must be an absolute path", argv)
	}
	// Inherit makes both pipes close-on-exec: neither may reach the
	// program.
	if err := hand.Inherit(); err != nil {
		return fmt.Errorf("%w: %w", ErrGateDescriptors, err)
	}
	for _, f := range []*os.File{hand.Gate, hand.ExecStatus} {
		var st unix.Stat_t
		if err := unix.Fstat(int(f.Fd()), &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFIFO {
			return fmt.Errorf("%w: %s is not a pipe", ErrGateDescriptors, f.Name())
		}
	}
	gate, status := hand.Gate, int(hand.ExecStatus.Fd())
	opened := make(chan bool, 1)
	go func() {
		var b [1]byte
		n, _ := gate.Read(b[:])
		opened <- n == 1 && b[0] == gateOpen
	}()
	select {
	case <-ctx.Done():
		return &helpermain.ExitError{Code: 128 + int(unix.SIGTERM)}
	case ok := <-opened:
		if !ok {
			return &helpermain.ExitError{Code: ExitGateClosed}
		}
	}
	gate.Close()
	if err := checkPdeathsig(); err != nil {
		writeExecStatus(status, statusEdgeLost)
		return err
	}
	err = unix.Exec(argv[0], argv, os.Environ())
	errno, ok := err.(unix.Errno)
	if !ok {
		errno = unix.EINVAL
	}
	writeExecStatus(status, uint32(errno))
	return &helpermain.ExitError{Code: ExitExecFailed}
}

// statusEdgeLost is the exec status of a gate that refused to execute
// because the causal edge would not hold.
const statusEdgeLost = 0xffffffff

func writeExecStatus(fd int, v uint32) {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], v)
	unix.Write(fd, b[:])
}

// checkPdeathsig confirms that this thread is the main thread and carries
// PDEATHSIG SIGKILL, so that execve keeps it.
func checkPdeathsig() error {
	if tid, pid := unix.Gettid(), unix.Getpid(); tid != pid {
		return fmt.Errorf("gate runs on thread %d, not the main thread %d: %w", tid, pid, ErrCausalEdgeLost)
	}
	var sig int32
	if _, _, e := unix.Syscall6(unix.SYS_PRCTL, unix.PR_GET_PDEATHSIG, uintptr(unsafe.Pointer(&sig)), 0, 0, 0, 0); e != 0 {
		return fmt.Errorf("reading the parent-death signal: %w", os.NewSyscallError("prctl", e))
	}
	if unix.Signal(sig) != unix.SIGKILL {
		return fmt.Errorf("parent-death signal is %d, want SIGKILL: %w", sig, ErrCausalEdgeLost)
	}
	return nil
}
