package seqpacket

import (
	"errors"
	"fmt"
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Conn is a SOCK_SEQPACKET socket driven by the runtime poller, so that
// deadlines interrupt a blocked Send or Recv. Sends are safe from several
// goroutines; receives must come from one goroutine at a time.
type Conn struct {
	f      *os.File
	closed atomic.Bool
}

// New checks that f is an AF_UNIX SOCK_SEQPACKET socket and wraps a
// non-blocking close-on-exec duplicate of it. It takes ownership of f: f
// is closed whether or not New succeeds.
func New(f *os.File) (*Conn, error) {
	defer f.Close()
	raw, err := f.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("socket %q: %w", f.Name(), err)
	}
	dup := -1
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		if cerr = Check(int(fd)); cerr != nil {
			return
		}
		dup, cerr = unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0)
		if cerr != nil {
			cerr = os.NewSyscallError("fcntl", cerr)
		}
	}); err != nil {
		return nil, fmt.Errorf("socket %q: %w", f.Name(), err)
	}
	if cerr != nil {
		return nil, fmt.Errorf("socket %q: %w", f.Name(), cerr)
	}
	// A non-blocking descriptor is registered with the poller by NewFile.
	if err := unix.SetNonblock(dup, true); err != nil {
		unix.Close(dup)
		return nil, fmt.Errorf("socket %q: %w", f.Name(), os.NewSyscallError("fcntl", err))
	}
	return &Conn{f: os.NewFile(uintptr(dup), f.Name())}, nil
}

// Pair returns a connected pair: this end as a Conn, and the peer as a
// blocking close-on-exec file, for example to pass to a child.
func Pair(name string) (*Conn, *os.File, error) {
	a, b, err := Socketpair(name)
	if err != nil {
		return nil, nil, err
	}
	c, err := New(a)
	if err != nil {
		b.Close()
		return nil, nil, err
	}
	return c, b, nil
}

// Send sends b as one message with fds passed as SCM_RIGHTS, waiting
// while the socket's buffer is full. After Close, Send and Recv return
// an error matching net.ErrClosed, as a net.Conn does.
func (c *Conn) Send(b []byte, fds ...int) error {
	raw, err := c.f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := raw.Write(func(fd uintptr) bool {
		serr = Send(int(fd), b, fds...)
		return !errors.Is(serr, unix.EAGAIN)
	}); err != nil {
		return c.pollError(err)
	}
	return serr
}

// Recv receives one message into buf with at most maxFds descriptors,
// under the package's policy, waiting until one arrives or the read
// deadline passes (an error matching os.ErrDeadlineExceeded).
func (c *Conn) Recv(buf []byte, maxFds int) (int, []int, error) {
	raw, err := c.f.SyscallConn()
	if err != nil {
		return 0, nil, err
	}
	var n int
	var fds []int
	var rerr error
	if err := raw.Read(func(fd uintptr) bool {
		n, fds, rerr = Recv(int(fd), buf, maxFds)
		return !errors.Is(rerr, unix.EAGAIN)
	}); err != nil {
		return 0, nil, c.pollError(err)
	}
	return n, fds, rerr
}

// SetDeadline sets the read and write deadlines.
func (c *Conn) SetDeadline(t time.Time) error { return c.f.SetDeadline(t) }

// SetReadDeadline sets the deadline of Recv; a time in the past
// interrupts a blocked Recv.
func (c *Conn) SetReadDeadline(t time.Time) error { return c.f.SetReadDeadline(t) }

// SyscallConn gives raw access to the socket, for example to poll it
// together with other descriptors.
func (c *Conn) SyscallConn() (syscall.RawConn, error) { return c.f.SyscallConn() }

// Close closes this end; the peer reads io.EOF.
func (c *Conn) Close() error {
	c.closed.Store(true)
	return c.f.Close()
}

// pollError reports a wait the poller ended: a deadline as it is, and a
// close as net.ErrClosed (the file layer's own error for it is not
// exported).
func (c *Conn) pollError(err error) error {
	if c.closed.Load() && !errors.Is(err, os.ErrDeadlineExceeded) {
		return net.ErrClosed
	}
	return err
}
