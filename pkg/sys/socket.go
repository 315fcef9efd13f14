package sys

import (
	"os"

	"golang.org/x/sys/unix"
)

// Recvmsg is recvmsg(2). recvflags are the flags the kernel set on the
// message (MSG_TRUNC, MSG_CTRUNC).
func Recvmsg(fd int, p, oob []byte, flags int) (n, oobn, recvflags int, err error) {
	err = retry(func() error {
		var err error
		n, oobn, recvflags, _, err = unix.Recvmsg(fd, p, oob, flags)
		return err
	})
	return n, oobn, recvflags, os.NewSyscallError("recvmsg", err)
}

// Sendmsg is sendmsg(2) on a connected socket; it returns the bytes of p
// sent.
func Sendmsg(fd int, p, oob []byte, flags int) (int, error) {
	n, err := retryInt(func() (int, error) { return unix.SendmsgN(fd, p, oob, nil, flags) })
	return n, os.NewSyscallError("sendmsg", err)
}
