package sys

import (
	"errors"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// Poll is poll(2). timeout is in milliseconds, negative to wait without
// limit. An interrupted wait resumes with what is left of timeout, so the
// call never waits longer in total than asked.
func Poll(fds []unix.PollFd, timeout int) (int, error) {
	var deadline time.Time
	if timeout > 0 {
		deadline = time.Now().Add(time.Duration(timeout) * time.Millisecond)
	}
	for {
		n, err := unix.Poll(fds, timeout)
		if !errors.Is(err, unix.EINTR) {
			return n, os.NewSyscallError("poll", err)
		}
		if timeout > 0 {
			left := time.Until(deadline)
			// Round up: a wait cut short by less than a millisecond
			// still waits once more rather than spinning.
			timeout = int((left + time.Millisecond - 1) / time.Millisecond)
			if timeout <= 0 {
				timeout = 0
			}
		}
	}
}

// PollFor is ppoll(2) with a timeout of d (at least 0; the kernel's
// resolution, not poll(2)'s milliseconds). An interrupted wait resumes
// with what is left of d.
func PollFor(fds []unix.PollFd, d time.Duration) (int, error) {
	deadline := time.Now().Add(d)
	for {
		ts := unix.NsecToTimespec(max(d, 0).Nanoseconds())
		n, err := unix.Ppoll(fds, &ts, nil)
		if !errors.Is(err, unix.EINTR) {
			return n, os.NewSyscallError("ppoll", err)
		}
		d = time.Until(deadline)
	}
}

// Wait4 is wait4(2).
func Wait4(pid int, ws *unix.WaitStatus, options int, ru *unix.Rusage) (int, error) {
	wpid, err := retryInt(func() (int, error) { return unix.Wait4(pid, ws, options, ru) })
	return wpid, os.NewSyscallError("wait4", err)
}

// PidfdOpen is pidfd_open(2) (Linux 5.3 and later). The kernel sets
// O_CLOEXEC on the descriptor; the caller owns it.
func PidfdOpen(pid int, flags int) (int, error) {
	fd, err := retryInt(func() (int, error) { return unix.PidfdOpen(pid, flags) })
	return fd, os.NewSyscallError("pidfd_open", err)
}

// PidfdSendSignal is pidfd_send_signal(2) (Linux 5.1 and later).
func PidfdSendSignal(pidfd int, sig unix.Signal, info *unix.Siginfo, flags int) error {
	return os.NewSyscallError("pidfd_send_signal", retry(func() error {
		return unix.PidfdSendSignal(pidfd, sig, info, flags)
	}))
}
