package escalation

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"

	"golang.org/x/sys/unix"

	"lazaret.dev/pkg/config"
	"lazaret.dev/pkg/fsroot"
	"lazaret.dev/pkg/protocol"
	"lazaret.dev/pkg/sys"
)

// execFd is the descriptor number at which the child finds the opened
// executable; it runs /proc/self/fd/3, the object that was checked.
const execFd = 3

// OpenExecutable re-checks the executable object of an approved argv and
// returns it opened with O_PATH, for execution by descriptor. The rules
// are config.CheckExecutable's (reached through no symbolic link, a
// regular file with exactly one hard link, owned by root or uid, no group
// or other write permission, executable by the caller), applied to the
// path and then again to the opened object itself, so that the object
// executed is the object checked.
func OpenExecutable(path string, uid int) (*os.File, error) {
	if err := config.CheckExecutable(path, uid); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrExecutable, err)
	}
	fd, err := fsroot.OpenPath(unix.AT_FDCWD, path)
	if err != nil {
		return nil, fmt.Errorf("%w: opening %q: %w", ErrExecutable, path, err)
	}
	f := os.NewFile(uintptr(fd), path)
	if err := checkOpened(fd, path, uid); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

func checkOpened(fd int, path string, uid int) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("%w: inspecting %q: %w", ErrExecutable, path, err)
	}
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return fmt.Errorf("%w: %q is not a regular file", ErrExecutable, path)
	case st.Nlink != 1:
		return fmt.Errorf("%w: %q has %d hard links", ErrExecutable, path, st.Nlink)
	case st.Uid != 0 && int(st.Uid) != uid:
		return fmt.Errorf("%w: %q is owned by uid %d", ErrExecutable, path, st.Uid)
	case st.Mode&0o022 != 0:
		return fmt.Errorf("%w: %q has mode %04o", ErrExecutable, path, st.Mode&0o7777)
	}
	if err := sys.Faccessat2(fd, "", unix.X_OK, unix.AT_EMPTY_PATH|unix.AT_EACCESS); err != nil {
		return fmt.Errorf("%w: %q is not executable: %w", ErrExecutable, path, err)
	}
	return nil
}

type piece struct {
	stream protocol.ResultStream
	b      []byte
}

// execute runs StartHostExecution and then CompleteHostExecution,
// FailHostExecution, TimeoutRequest or CancelRequest.
func (r *request) execute(argv []string) (protocol.EscalationOutcome, *uint8, error) {
	cfg := &r.e.cfg
	if r.ctx.Err() != nil {
		cause := context.Cause(r.ctx)
		return outcomeOf(cause), nil, cause
	}
	// Every record of the request up to here becomes durable with this
	// one, before the command starts.
	r.commit(nil, func() { r.phase, r.sphase = PhaseExecuting, SessionHostExecuting })
	if err := r.unaudited(); err != nil {
		// Fail closed: a command runs only once every record of its
		// request up to its start is durable.
		return protocol.OutcomeFailed, nil, err
	}
	exe, err := OpenExecutable(argv[0], cfg.UID)
	if err != nil {
		return protocol.OutcomeFailed, nil, err
	}
	defer exe.Close()
	ctx, cancel := context.WithTimeoutCause(r.ctx, cfg.Timeouts.Execution, ErrTimedOut)
	defer cancel()

	outR, outW, err := os.Pipe()
	if err != nil {
		return protocol.OutcomeFailed, nil, fmt.Errorf("creating stdout pipe: %w", err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return protocol.OutcomeFailed, nil, fmt.Errorf("creating stderr pipe: %w", err)
	}
	cmd := &exec.Cmd{
		Path:       fmt.Sprintf("/proc/self/fd/%d", execFd),
		Args:       argv,
		Dir:        cfg.Workspace,
		Env:        cfg.Env,
		Stdout:     outW,
		Stderr:     errW,
		ExtraFiles: []*os.File{exe},
		SysProcAttr: &syscall.SysProcAttr{
			Setsid:    true,
			Pdeathsig: syscall.SIGKILL,
		},
	}
	err = cmd.Start()
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		return protocol.OutcomeFailed, nil, fmt.Errorf("%w: starting %q: %w", ErrStart, argv[0], err)
	}
	pgid := cmd.Process.Pid
	r.e.log.Info("host command started", "request", r.id, "executable", fmt.Sprintf("%q", argv[0]), "pid", pgid, "dir", fmt.Sprintf("%q", cfg.Workspace))
	exited := make(chan error, 1)
	go func() {
		err := cmd.Wait()
		// Whatever the command left behind in its process group dies
		// with it, and the output pipes close.
		syscall.Kill(-pgid, syscall.SIGKILL)
		exited <- err
	}()

	pieces := make(chan piece)
	readersDone := make(chan struct{}, 2)
	for _, src := range []struct {
		f      *os.File
		stream protocol.ResultStream
	}{{outR, protocol.StreamStdout}, {errR, protocol.StreamStderr}} {
		go func() {
			defer src.f.Close()
			readStream(src.f, src.stream, pieces)
			readersDone <- struct{}{}
		}()
	}
	go func() {
		<-readersDone
		<-readersDone
		close(pieces)
	}()

	var stop error
	kill := func(cause error) {
		if stop == nil {
			stop = cause
			syscall.Kill(-pgid, syscall.SIGKILL)
		}
	}
	done := ctx.Done()
	for open := true; open; {
		select {
		case p, ok := <-pieces:
			if !ok {
				open = false
				break
			}
			if stop != nil {
				continue // output after a cancellation or timeout is dropped
			}
			if err := r.sendChunk(ctx, p.stream, p.b); err != nil {
				if ctx.Err() != nil {
					kill(context.Cause(ctx))
				} else {
					kill(fmt.Errorf("sending output: %w", err))
				}
			}
		case <-done:
			kill(context.Cause(ctx))
			done = nil
		}
	}
	waitErr := <-exited
	switch {
	case errors.Is(stop, ErrTimedOut) || errors.Is(stop, ErrCancelled) || errors.Is(stop, context.Canceled):
		return outcomeOf(stop), nil, stop
	case stop != nil:
		return protocol.OutcomeFailed, nil, stop
	}
	st := cmd.ProcessState
	if st == nil {
		return protocol.OutcomeFailed, nil, fmt.Errorf("waiting for %q: %w", argv[0], waitErr)
	}
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return protocol.OutcomeFailed, nil, fmt.Errorf("%w: %q was killed by signal %v", ErrSignaled, argv[0], ws.Signal())
	}
	code := uint8(st.ExitCode())
	return protocol.OutcomeCompleted, &code, nil
}

// readStream sends what f yields in pieces of at most one chunk.
func readStream(f *os.File, stream protocol.ResultStream, out chan<- piece) {
	buf := make([]byte, protocol.MaxChunkBytes)
	for {
		n, err := f.Read(buf)
		if n > 0 {
			out <- piece{stream, append([]byte(nil), buf[:n]...)}
		}
		if err != nil {
			return // io.EOF once every writer closed, or a read error
		}
	}
}
