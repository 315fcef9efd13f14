package sidecar

import (
	"bufio"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"lazaret.dev/pkg/netsidecar"
)

// listenFile is a listening TCP socket of 127.0.0.1 as a file, and its
// port.
func listenFile(t *testing.T) (*os.File, uint16) {
	t.Helper()
	ln, err := net.ListenTCP("tcp4", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	f, err := ln.File()
	if err != nil {
		t.Fatal(err)
	}
	return f, uint16(ln.Addr().(*net.TCPAddr).Port)
}

// TestListenerOfRefuses: only a listening IPv4 stream socket is taken.
func TestListenerOfRefuses(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	if _, err := listenerOf(r); err == nil {
		t.Error("a pipe was taken as a published socket")
	}
	u, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	uf, _ := u.File()
	u.Close()
	if _, err := listenerOf(uf); err == nil || !strings.Contains(err.Error(), "stream") {
		t.Errorf("a UDP socket: %v", err)
	}
	f, _ := listenFile(t)
	ln, err := listenerOf(f)
	if err != nil {
		t.Fatalf("a listening TCP socket: %v", err)
	}
	ln.Close()
}

// TestRelay relays a connection accepted on the published socket to the
// target port, both ways, with the half-close passed on.
func TestRelay(t *testing.T) {
	svc, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	go func() {
		for {
			c, err := svc.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				b, _ := io.ReadAll(c) // until the client's half-close
				c.Write([]byte("got " + string(b)))
			}()
		}
	}()
	r := &relays{log: slog.New(slog.DiscardHandler), sandbox: netip.MustParseAddr("127.0.0.1")}
	defer r.Close()
	f, hostPort := listenFile(t)
	if err := r.add(&netsidecar.Publish{HostPort: hostPort, SandboxPort: uint16(svc.Addr().(*net.TCPAddr).Port)}, f); err != nil {
		t.Fatal(err)
	}
	c, err := net.DialTCP("tcp4", nil, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: int(hostPort)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	c.Write([]byte("ping"))
	c.CloseWrite()
	got, err := bufio.NewReader(c).ReadString('\n')
	if got != "got ping" || err != io.EOF {
		t.Fatalf("through the relay: %q, %v", got, err)
	}
	if err := r.add(&netsidecar.Publish{HostPort: 1, SandboxPort: 0}, nil); err == nil {
		t.Error("a publish without a socket was taken")
	}
}
