package session

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"lazaret.dev/pkg/control"
	"lazaret.dev/pkg/hostid"
	"lazaret.dev/pkg/sys"
)

// DefaultStopTimeout bounds `lazaret-cli stop`: finding the coordinator,
// signalling it and waiting until it has released the Domain lock.
const DefaultStopTimeout = 30 * time.Second

// ErrStopTimeout means the Domain lock was still held when the stop's
// time ran out.
var ErrStopTimeout = errors.New("timed out stopping the Domain")

// StopTimeoutError says which coordinator (if one was found) kept the
// Domain lock past the stop's timeout, and where its log is.
type StopTimeoutError struct {
	Timeout time.Duration
	PID     int // the signalled coordinator; 0 when none was found
	Log     string
	Lock    string
}

func (e *StopTimeoutError) Error() string {
	if e.PID == 0 {
		return fmt.Sprintf("%v after %v: the Domain lock %s is held, but no lazaret-coordinator process of this user holds it (a start may be under way); see %s",
			ErrStopTimeout, e.Timeout, e.Lock, e.Log)
	}
	return fmt.Sprintf("%v after %v: lazaret-coordinator pid %d was sent SIGTERM but still holds the Domain lock %s; see %s",
		ErrStopTimeout, e.Timeout, e.PID, e.Lock, e.Log)
}

func (e *StopTimeoutError) Unwrap() error { return ErrStopTimeout }

// StopResult is what Stop did.
type StopResult struct {
	// Running is false when no coordinator held the Domain lock: there was
	// nothing to stop.
	Running bool
	// PID and Identity name the coordinator that was sent SIGTERM.
	PID      int
	Identity hostid.PidfsProcessIdentityV1
	// Generation is the published generation ID in hex, "" when the
	// Domain was not published (it was starting or already tearing down).
	Generation string
	// Took is the time from the signal until the lock was free.
	Took time.Duration
	// Leftover describes a participant the Domain Store still records as
	// not Clean after the coordinator exited; "" when everything was
	// released.
	Leftover string
}

// Stopper ends a Domain's running generation by sending its coordinator
// SIGTERM, which tears the generation down in the model's order.
type Stopper struct {
	// Holders lists the processes that may be the coordinator holding the
	// lock file (dev, ino): lazaret-coordinator processes of this user with
	// a descriptor on it.
	Holders func(dev, ino uint64) []int
	// Holds reports whether pid is (still) such a process.
	Holds func(pid int, dev, ino uint64) bool
	// Live reports what the Domain Store records as live after the stop.
	Live func(t *Target) (string, error)
	// Poll is the interval between looks at the lock.
	Poll time.Duration
}

// NewStopper returns the production Stopper.
func NewStopper() *Stopper {
	return &Stopper{Holders: holders, Holds: coordinatorHolds, Live: LiveRecords}
}

// stopAction is what Stop does after one look at the Domain lock.
type stopAction int

const (
	stopNothing stopAction = iota // the lock is free: nothing runs
	stopSignal                    // exactly one coordinator holds it
	stopWait                      // held, but the holder is not (or not uniquely) a coordinator yet
)

func (a stopAction) String() string {
	return [...]string{"nothing", "signal", "wait"}[a]
}

// decideStop is the planner of one look: held is whether another open
// file description holds the lock, coordinators the candidate holders.
// A CLI that is spawning a coordinator holds the lock before the
// coordinator exists, and a coordinator that forks a helper shares the
// descriptor with the child until its execve closes it; both are
// transient, so anything but exactly one holder means look again.
func decideStop(held bool, coordinators []int) stopAction {
	switch {
	case !held:
		return stopNothing
	case len(coordinators) == 1:
		return stopSignal
	}
	return stopWait
}

// Stop sends the coordinator that holds t's Domain lock SIGTERM and waits,
// at most timeout, until the lock is free. It reports Running=false when
// no coordinator holds the lock. Between finding the coordinator and
// signalling it, the PID is pinned with a pidfd and checked again, so a
// reused PID is never signalled.
func (s *Stopper) Stop(ctx context.Context, t *Target, timeout time.Duration) (StopResult, error) {
	var res StopResult
	if timeout <= 0 {
		timeout = DefaultStopTimeout
	}
	poll := s.Poll
	if poll <= 0 {
		poll = 50 * time.Millisecond
	}
	deadline := time.Now().Add(timeout)
	lock, err := openExistingLock(t.LockPath())
	if errors.Is(err, fs.ErrNotExist) {
		return res, nil
	}
	if err != nil {
		return res, err
	}
	defer lock.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(lock.Fd()), &st); err != nil {
		return res, &os.PathError{Op: "fstat", Path: lock.Name(), Err: err}
	}
	pidfd := -1
	defer func() {
		if pidfd >= 0 {
			unix.Close(pidfd)
		}
	}()
	var signalled time.Time
	for {
		held, err := lockHeld(lock)
		if err != nil {
			return res, err
		}
		if !held || (pidfd >= 0 && exited(pidfd)) {
			// Once the signalled coordinator is gone its lock is released;
			// a holder seen after that is a new start.
			break
		}
		if pidfd < 0 {
			var cands []int
			if s.Holders != nil {
				cands = s.Holders(st.Dev, st.Ino)
			}
			if len(cands) == 0 {
				cands = recordedHolder(t.Paths().Dir)
			}
			if decideStop(held, cands) == stopSignal {
				fd, id, gen, err := s.signal(t, cands[0], st.Dev, st.Ino)
				if err != nil {
					return res, err
				}
				if fd >= 0 {
					pidfd, signalled = fd, time.Now()
					res.Running, res.PID, res.Identity, res.Generation = true, cands[0], id, gen
				}
			}
		}
		if time.Now().After(deadline) {
			return res, &StopTimeoutError{Timeout: timeout, PID: res.PID, Log: t.LogPath(), Lock: t.LockPath()}
		}
		select {
		case <-ctx.Done():
			return res, fmt.Errorf("waiting for the Domain lock %s: %w", t.LockPath(), ctx.Err())
		case <-time.After(poll):
		}
	}
	if !res.Running {
		return res, nil
	}
	res.Took = time.Since(signalled)
	if s.Live != nil {
		live, err := s.Live(t)
		if err != nil {
			return res, fmt.Errorf("reading the Domain Store after the stop: %w", err)
		}
		res.Leftover = live
	}
	return res, nil
}

// signal pins pid with a pidfd, checks that the pinned process is the
// lock's coordinator, and sends it SIGTERM. It returns fd -1 and no error
// when the process is gone or turned out not to hold the lock: the caller
// looks again.
func (s *Stopper) signal(t *Target, pid int, dev, ino uint64) (int, hostid.PidfsProcessIdentityV1, string, error) {
	var id hostid.PidfsProcessIdentityV1
	fd, err := hostid.OpenPidfd(pid)
	if errors.Is(err, hostid.ErrProcessExited) {
		return -1, id, "", nil
	}
	if err != nil {
		return -1, id, "", fmt.Errorf("pinning lazaret-coordinator pid %d: %w", pid, err)
	}
	// The pidfd now names one process. The PID-keyed check below is about
	// that process only if it still exists afterwards, which IdentityOf
	// confirms (a PID is not reused while its process exists).
	if (s.Holds == nil || !s.Holds(pid, dev, ino)) && !isRecordedCoordinator(t.Paths().Dir, fd) {
		unix.Close(fd)
		return -1, id, "", nil
	}
	id, err = hostid.IdentityOf(fd)
	if errors.Is(err, hostid.ErrProcessExited) {
		unix.Close(fd)
		return -1, id, "", nil
	}
	if err != nil {
		unix.Close(fd)
		return -1, id, "", fmt.Errorf("identifying lazaret-coordinator pid %d: %w", pid, err)
	}
	gen := ""
	if pub, _, err := control.ReadIdentityFile(t.Paths().Identity); err == nil {
		gen = pub.GenerationIdentity.GenerationID.String()
	}
	if err := unix.PidfdSendSignal(fd, unix.SIGTERM, nil, 0); err != nil {
		unix.Close(fd)
		if errors.Is(err, unix.ESRCH) {
			return -1, id, "", nil
		}
		return -1, id, "", fmt.Errorf("sending SIGTERM to lazaret-coordinator pid %d: %w", pid, &os.SyscallError{Syscall: "pidfd_send_signal", Err: err})
	}
	return fd, id, gen, nil
}

// exited reports whether the process behind pidfd has exited: a pidfd
// polls readable then.
func exited(pidfd int) bool {
	fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
	n, err := sys.Poll(fds, 0)
	return err == nil && n > 0
}

// openExistingLock opens the Domain lock file without creating it.
func openExistingLock(path string) (*os.File, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, &os.PathError{Op: "fstat", Path: path, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Uid != uint32(os.Geteuid()) {
		unix.Close(fd)
		return nil, fmt.Errorf("Domain lock %q is not a regular file owned by uid %d", path, os.Geteuid())
	}
	return os.NewFile(uintptr(fd), path), nil
}

// lockHeld reports whether another open file description holds f's
// flock. It takes a shared lock without waiting and gives it up at once,
// so a CLI that looks at that moment only waits one poll.
func lockHeld(f *os.File) (bool, error) {
	err := sys.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB)
	switch {
	case err == nil:
		_ = sys.Flock(int(f.Fd()), unix.LOCK_UN)
		return false, nil
	case errors.Is(err, unix.EWOULDBLOCK):
		return true, nil
	}
	return false, fmt.Errorf("%q: %w", f.Name(), err)
}

// isRecordedCoordinator reports whether the process behind pidfd is the
// coordinator recorded in dir, by pidfs authority. The recorded coordinator
// wrote that record after taking the Domain lock over and removes it before
// releasing the lock.
func isRecordedCoordinator(dir string, pidfd int) bool {
	id, err := control.ReadCoordinatorIdentity(dir)
	if err != nil {
		return false
	}
	got, err := hostid.AuthorityOf(pidfd)
	return err == nil && got == id.Authority
}

// coordinatorHolds reports whether pid runs lazaret-coordinator and has a
// descriptor on the file (dev, ino).
func coordinatorHolds(pid int, dev, ino uint64) bool {
	exe, err := os.Readlink(filepath.Join("/proc", strconv.Itoa(pid), "exe"))
	if err != nil || !strings.HasPrefix(filepath.Base(exe), "lazaret-coordinator") {
		return false
	}
	return hasDescriptorOn(pid, dev, ino)
}

// hasDescriptorOn reports whether pid has an open descriptor on the file
// (dev, ino).
func hasDescriptorOn(pid int, dev, ino uint64) bool {
	fdDir := filepath.Join("/proc", strconv.Itoa(pid), "fd")
	fds, err := os.ReadDir(fdDir)
	if err != nil {
		return false
	}
	for _, fe := range fds {
		var st unix.Stat_t
		if unix.Stat(filepath.Join(fdDir, fe.Name()), &st) == nil && st.Dev == dev && st.Ino == ino {
			return true
		}
	}
	return false
}
