package seqpacket

import (
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"

	"lazaret.dev/pkg/sys"
)

// Errors of the transport; test with errors.Is.
var (
	// ErrNotSeqpacket means a descriptor is not a connected AF_UNIX
	// SOCK_SEQPACKET socket.
	ErrNotSeqpacket = errors.New("not a unix SOCK_SEQPACKET socket")
	// ErrTruncated means a message was larger than the receive buffer.
	ErrTruncated = errors.New("message truncated")
	// ErrControlTruncated means a message carried more descriptors (or
	// other ancillary data) than the receiver accepts.
	ErrControlTruncated = errors.New("ancillary data truncated")
)

// Socketpair returns a connected pair of close-on-exec SOCK_SEQPACKET
// sockets in blocking mode, named name and name+"-peer". The caller owns
// both.
func Socketpair(name string) (*os.File, *os.File, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, os.NewSyscallError("socketpair", err)
	}
	return os.NewFile(uintptr(fds[0]), name), os.NewFile(uintptr(fds[1]), name+"-peer"), nil
}

// Check returns nil when fd is an AF_UNIX SOCK_SEQPACKET socket, and an
// error matching ErrNotSeqpacket when it is another socket or no socket.
func Check(fd int) error {
	typ, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TYPE)
	if err == nil {
		var domain int
		domain, err = unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_DOMAIN)
		if err == nil && (typ != unix.SOCK_SEQPACKET || domain != unix.AF_UNIX) {
			return fmt.Errorf("descriptor %d has domain %d type %d: %w", fd, domain, typ, ErrNotSeqpacket)
		}
	}
	switch {
	case errors.Is(err, unix.ENOTSOCK):
		return fmt.Errorf("descriptor %d: %w", fd, ErrNotSeqpacket)
	case err != nil:
		return fmt.Errorf("inspecting descriptor %d: %w", fd, os.NewSyscallError("getsockopt", err))
	}
	return nil
}

// Send sends b as one message on the socket fd, passing fds as SCM_RIGHTS
// (the caller keeps its own copies). A peer that is gone is EPIPE, never
// SIGPIPE.
func Send(fd int, b []byte, fds ...int) error {
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	n, err := sys.Sendmsg(fd, b, oob, unix.MSG_NOSIGNAL)
	if err != nil {
		return err
	}
	if n != len(b) {
		return fmt.Errorf("sent %d of %d bytes: %w", n, len(b), io.ErrShortWrite)
	}
	return nil
}

// Recv receives one message on the socket fd into buf and returns its
// length and the descriptors it carried (close-on-exec, owned by the
// caller), at most maxFds of them. It applies the package's policy: see
// the package documentation.
func Recv(fd int, buf []byte, maxFds int) (int, []int, error) {
	var oob []byte
	if maxFds > 0 {
		oob = make([]byte, unix.CmsgSpace(4*maxFds))
	}
	// MSG_TRUNC makes the kernel report the whole length of a message
	// longer than buf, so that the error can name it.
	n, oobn, flags, err := sys.Recvmsg(fd, buf, oob, unix.MSG_CMSG_CLOEXEC|unix.MSG_TRUNC)
	if err != nil {
		return 0, nil, err
	}
	return decide(n, len(buf), oob[:oobn], flags, maxFds)
}

// decide applies the policy to what recvmsg returned: n bytes of a buffer
// of size, the control data oob and the message flags.
func decide(n, size int, oob []byte, flags, maxFds int) (int, []int, error) {
	fds, perr := rights(oob)
	switch {
	case flags&unix.MSG_CTRUNC != 0:
		closeAll(fds)
		return 0, nil, fmt.Errorf("message carries more than %d descriptors: %w", maxFds, ErrControlTruncated)
	case perr != nil:
		closeAll(fds)
		return 0, nil, fmt.Errorf("parsing ancillary data: %w: %w", ErrControlTruncated, perr)
	case len(fds) > maxFds:
		// The control buffer is rounded up and can hold one more.
		closeAll(fds)
		return 0, nil, fmt.Errorf("message carries %d descriptors, more than %d: %w", len(fds), maxFds, ErrControlTruncated)
	case flags&unix.MSG_TRUNC != 0 || n > size:
		closeAll(fds)
		return 0, nil, fmt.Errorf("message of %d bytes, the limit is %d: %w", n, size, ErrTruncated)
	case n == 0 && len(fds) == 0:
		return 0, nil, io.EOF
	}
	return n, fds, nil
}

// rights returns the descriptors of every SCM_RIGHTS message in oob. Other
// control messages are ignored: the sockets here never ask for
// credentials.
func rights(oob []byte) ([]int, error) {
	if len(oob) == 0 {
		return nil, nil
	}
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, err
	}
	var fds []int
	for i := range msgs {
		if msgs[i].Header.Level != unix.SOL_SOCKET || msgs[i].Header.Type != unix.SCM_RIGHTS {
			continue
		}
		if len(msgs[i].Data)%4 != 0 {
			// ParseUnixRights assumes whole descriptors.
			return fds, fmt.Errorf("SCM_RIGHTS message of %d bytes", len(msgs[i].Data))
		}
		got, err := unix.ParseUnixRights(&msgs[i])
		if err != nil {
			return fds, err
		}
		fds = append(fds, got...)
	}
	return fds, nil
}

// closeFd closes a received descriptor; the fuzz test replaces it, since
// its descriptors are made up.
var closeFd = unix.Close

func closeAll(fds []int) {
	for _, fd := range fds {
		closeFd(fd)
	}
}
