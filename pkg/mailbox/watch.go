package mailbox

import (
	"context"
	"fmt"
	"time"

	"golang.org/x/sys/unix"

	"lazaret.dev/pkg/sys"
)

// pollSlice bounds one ppoll(2) so that a cancelled context is noticed
// promptly even while no file arrives.
const pollSlice = 50 * time.Millisecond

// Notifier wakes a reader when a file is renamed or written into a
// directory. It uses inotify on the retained directory descriptor (through
// /proc/self/fd, so the watched object is the opened directory, not a
// re-walked path). Where inotify is unavailable, or does not see writes
// made from the other side of the sandbox boundary, Wait still returns
// after its timeout, so callers rescan periodically either way.
type Notifier struct {
	fd int
}

// Notify starts watching d. It never fails: without inotify the Notifier
// only sleeps, and the reason is logged.
func (d *Dir) Notify() *Notifier {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		d.log.Info("watching mailbox by rescan only", "reason", fmt.Sprintf("inotify: %v", err))
		return &Notifier{fd: -1}
	}
	target := fmt.Sprintf("/proc/self/fd/%d", d.fd)
	if _, err := unix.InotifyAddWatch(fd, target, unix.IN_MOVED_TO|unix.IN_CLOSE_WRITE|unix.IN_CREATE|unix.IN_ONLYDIR); err != nil {
		unix.Close(fd)
		d.log.Info("watching mailbox by rescan only", "reason", fmt.Sprintf("inotify watch on %q: %v", d.path, err))
		return &Notifier{fd: -1}
	}
	return &Notifier{fd: fd}
}

// Wait returns nil when an event arrived or max elapsed, and ctx.Err()
// when ctx ends first. Pending events are drained.
func (n *Notifier) Wait(ctx context.Context, max time.Duration) error {
	deadline := time.Now().Add(max)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		left := time.Until(deadline)
		if left <= 0 {
			return nil
		}
		slice := min(left, pollSlice)
		var fds []unix.PollFd
		if n.fd >= 0 {
			fds = []unix.PollFd{{Fd: int32(n.fd), Events: unix.POLLIN}}
		}
		// ppoll, not poll: a wait of 200 µs must not become 1 or 2 ms.
		k, err := sys.PollFor(fds, slice)
		if err != nil {
			return fmt.Errorf("waiting for mailbox events: %w", err)
		}
		if k > 0 {
			n.drain()
			return nil
		}
	}
}

func (n *Notifier) drain() {
	var buf [4096]byte
	for {
		k, err := unix.Read(n.fd, buf[:])
		if k <= 0 || err != nil {
			return
		}
	}
}

// Close stops watching.
func (n *Notifier) Close() error {
	if n.fd < 0 {
		return nil
	}
	err := unix.Close(n.fd)
	n.fd = -1
	return err
}

// Serve drains d whenever a file arrives, and at least every rescan, until
// ctx ends. It is the host's outbox loop: handle receives each valid
// entry, still unverified.
func (d *Dir) Serve(ctx context.Context, rescan time.Duration, handle func(Entry)) error {
	n := d.Notify()
	defer n.Close()
	for {
		if err := d.Drain(handle); err != nil {
			d.log.Error("scanning mailbox", "err", err)
		}
		if err := n.Wait(ctx, rescan); err != nil {
			return err
		}
	}
}
