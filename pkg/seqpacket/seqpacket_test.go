package seqpacket

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// pair returns a Conn and the raw descriptor of its peer.
func pair(t *testing.T) (*Conn, int) {
	t.Helper()
	c, peer, err := Pair("test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); peer.Close() })
	return c, int(peer.Fd())
}

func TestRecvPolicy(t *testing.T) {
	cases := []struct {
		name   string
		send   func(t *testing.T, fd int)
		maxFds int
		want   error
		n      int
		nfds   int
	}{
		{"message", func(t *testing.T, fd int) { mustSend(t, fd, []byte("hello")) }, 0, nil, 5, 0},
		{"whole buffer", func(t *testing.T, fd int) { mustSend(t, fd, make([]byte, 16)) }, 0, nil, 16, 0},
		{"oversized", func(t *testing.T, fd int) { mustSend(t, fd, make([]byte, 17)) }, 0, ErrTruncated, 0, 0},
		{"descriptor refused", func(t *testing.T, fd int) { mustSend(t, fd, []byte("x"), 0) }, 0, ErrControlTruncated, 0, 0},
		{"descriptor accepted", func(t *testing.T, fd int) { mustSend(t, fd, []byte("x"), 0) }, 1, nil, 1, 1},
		{"too many descriptors", func(t *testing.T, fd int) { mustSend(t, fd, []byte("x"), 0, 1) }, 1, ErrControlTruncated, 0, 0},
		{"oversized with a descriptor", func(t *testing.T, fd int) { mustSend(t, fd, make([]byte, 17), 0) }, 1, ErrTruncated, 0, 0},
		{"descriptors accepted", func(t *testing.T, fd int) { mustSend(t, fd, []byte("xy"), 0, 1) }, 2, nil, 2, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, peer := pair(t)
			tc.send(t, peer)
			n, fds, err := c.Recv(make([]byte, 16), tc.maxFds)
			closeAll(fds)
			if tc.want != nil {
				if !errors.Is(err, tc.want) {
					t.Fatalf("error = %v, want %v", err, tc.want)
				}
			} else if err != nil || n != tc.n || len(fds) != tc.nfds {
				t.Fatalf("Recv = %d, %v, %v; want %d bytes and %d descriptors", n, fds, err, tc.n, tc.nfds)
			}
			// A rejected message is consumed whole; the next one is read.
			mustSend(t, peer, []byte("next"))
			buf := make([]byte, 16)
			if n, _, err := c.Recv(buf, 0); err != nil || !bytes.Equal(buf[:n], []byte("next")) {
				t.Fatalf("next message: %q, %v", buf[:n], err)
			}
		})
	}
}

func TestTruncationNamesTheSize(t *testing.T) {
	c, peer := pair(t)
	mustSend(t, peer, make([]byte, 100))
	_, _, err := c.Recv(make([]byte, 10), 0)
	if !errors.Is(err, ErrTruncated) || err.Error() != "message of 100 bytes, the limit is 10: message truncated" {
		t.Fatalf("error = %v", err)
	}
}

func TestPassedDescriptorIsUsable(t *testing.T) {
	c, peer := pair(t)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if err := Send(peer, []byte("pipe"), int(w.Fd())); err != nil {
		t.Fatal(err)
	}
	_, fds, err := c.Recv(make([]byte, 8), 1)
	if err != nil || len(fds) != 1 {
		t.Fatalf("Recv = %v, %v", fds, err)
	}
	got := os.NewFile(uintptr(fds[0]), "received")
	defer got.Close()
	if flags, err := unix.FcntlInt(uintptr(fds[0]), unix.F_GETFD, 0); err != nil || flags&unix.FD_CLOEXEC == 0 {
		t.Fatalf("received descriptor flags %#x, %v: want close-on-exec", flags, err)
	}
	if _, err := got.Write([]byte("ok")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 2)
	if _, err := io.ReadFull(r, buf); err != nil || string(buf) != "ok" {
		t.Fatalf("read %q, %v", buf, err)
	}
}

func TestClosedPeerIsEOF(t *testing.T) {
	c, peer, err := Pair("test")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	peer.Close()
	if _, _, err := c.Recv(make([]byte, 8), 1); err != io.EOF {
		t.Fatalf("error = %v, want io.EOF", err)
	}
	if err := c.Send([]byte("x")); !errors.Is(err, unix.EPIPE) {
		t.Fatalf("Send to a closed peer = %v, want EPIPE", err)
	}
}

func TestConnRoundTrip(t *testing.T) {
	a, bf, err := Pair("test")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := New(bf)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := a.Send([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 8)
	if n, _, err := b.Recv(buf, 0); err != nil || string(buf[:n]) != "ping" {
		t.Fatalf("Recv = %q, %v", buf[:n], err)
	}
}

func TestRecvAfterClose(t *testing.T) {
	c, _ := pair(t)
	done := make(chan error, 1)
	go func() { _, _, err := c.Recv(make([]byte, 8), 0); done <- err }()
	time.Sleep(20 * time.Millisecond)
	c.Close()
	if err := <-done; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("blocked Recv after Close = %v, want net.ErrClosed", err)
	}
	if err := c.Send([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Send after Close = %v, want net.ErrClosed", err)
	}
}

func TestRecvDeadline(t *testing.T) {
	c, _ := pair(t)
	c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	if _, _, err := c.Recv(make([]byte, 8), 0); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("error = %v, want a deadline error", err)
	}
}

func TestNewRejects(t *testing.T) {
	stream := func(t *testing.T) *os.File {
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { unix.Close(fds[1]) })
		return os.NewFile(uintptr(fds[0]), "stream")
	}
	pipe := func(t *testing.T) *os.File {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { w.Close() })
		return r
	}
	for _, tc := range []struct {
		name string
		open func(*testing.T) *os.File
	}{{"stream socket", stream}, {"pipe", pipe}} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := New(tc.open(t)); !errors.Is(err, ErrNotSeqpacket) {
				t.Fatalf("error = %v, want ErrNotSeqpacket", err)
			}
		})
	}
}

func mustSend(t *testing.T, fd int, b []byte, fds ...int) {
	t.Helper()
	if err := Send(fd, b, fds...); err != nil {
		t.Fatal(err)
	}
}

// FuzzDecide feeds made-up recvmsg results through the policy: it must
// never panic, never return more bytes than the buffer holds, and close
// every descriptor it parsed whenever it returns an error.
func FuzzDecide(f *testing.F) {
	f.Add(5, 16, unix.UnixRights(7), 0, 1)
	f.Add(17, 16, []byte(nil), unix.MSG_TRUNC, 0)
	f.Add(1, 16, unix.UnixRights(7, 8), unix.MSG_CTRUNC, 1)
	f.Add(0, 16, []byte{1, 2, 3}, 0, 1)
	f.Fuzz(func(t *testing.T, n, size int, oob []byte, flags, maxFds int) {
		var closed []int
		closeFd = func(fd int) error { closed = append(closed, fd); return nil }
		t.Cleanup(func() { closeFd = unix.Close })
		parsed, _ := rights(oob)
		got, fds, err := decide(n, size, oob, flags, maxFds)
		if err != nil {
			if got != 0 || fds != nil || len(closed) != len(parsed) {
				t.Fatalf("rejected with %d bytes, %v kept, %v closed of %v", got, fds, closed, parsed)
			}
			return
		}
		if got > size || len(closed) != 0 || len(fds) != len(parsed) {
			t.Fatalf("accepted %d of %d bytes, %v kept, %v closed", got, size, fds, closed)
		}
	})
}
