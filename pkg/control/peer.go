package control

import (
	"fmt"
	"net"
	"os"

	"golang.org/x/sys/unix"
)

// Peer is the kernel's account (SO_PEERCRED) of the process that connected
// or bound the other end of a unix socket, as of connect or listen time.
type Peer struct {
	PID int32
	UID uint32
	GID uint32
}

// PeerOf reads the SO_PEERCRED credentials of c.
func PeerOf(c *net.UnixConn) (Peer, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return Peer{}, fmt.Errorf("reading peer credentials: %w", err)
	}
	var cred *unix.Ucred
	var serr error
	if err := raw.Control(func(fd uintptr) {
		cred, serr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return Peer{}, fmt.Errorf("reading peer credentials: %w", err)
	}
	if serr != nil {
		return Peer{}, fmt.Errorf("reading peer credentials: %w", os.NewSyscallError("getsockopt SO_PEERCRED", serr))
	}
	return Peer{PID: cred.Pid, UID: cred.Uid, GID: cred.Gid}, nil
}

// checkPeer admits a peer only when it runs as uid.
func checkPeer(p Peer, uid uint32) error {
	if p.UID != uid {
		return &PeerError{Peer: p, WantUID: uid}
	}
	return nil
}
