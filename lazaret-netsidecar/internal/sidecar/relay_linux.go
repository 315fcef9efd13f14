package sidecar

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"slices"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"lazaret.dev/pkg/netpath"
	"lazaret.dev/pkg/netsidecar"
)

// Bounds of the port relay.
const (
	// maxRelayed bounds the connections relayed at once for one published
	// port; more are closed at once.
	maxRelayed = 256
	// relayDialTimeout bounds the connect to the sandbox.
	relayDialTimeout = 5 * time.Second
	// maxPublished bounds the published ports of one generation.
	maxPublished = 64
)

// relays are the published ports: each a listening socket bound on the
// host by the coordinator, accepted here, and every connection relayed to
// the sandbox's port from the enforcement namespace (docs/NETWORK.md,
// "Port publishing"). Nothing from upstream is involved: tap0 never
// forwards a connection to the sandbox.
type relays struct {
	log     *slog.Logger
	sandbox netip.Addr
	mu      sync.Mutex
	lns     []net.Listener
	wg      sync.WaitGroup
	closed  bool
}

func newRelays(log *slog.Logger) *relays {
	return &relays{log: log, sandbox: netpath.Config{}.WithDefaults().SandboxAddress()}
}

// listenerOf checks that f is a listening IPv4 TCP socket and takes
// ownership of it.
func listenerOf(f *os.File) (net.Listener, error) {
	defer f.Close()
	fd := int(f.Fd())
	// Go listens with MPTCP where the kernel has it; a plain TCP client
	// gets plain TCP from such a socket.
	for _, c := range []struct {
		opt  int
		want []int
		what string
	}{
		{unix.SO_DOMAIN, []int{unix.AF_INET}, "an IPv4 socket"},
		{unix.SO_TYPE, []int{unix.SOCK_STREAM}, "a stream socket"},
		{unix.SO_PROTOCOL, []int{unix.IPPROTO_TCP, unix.IPPROTO_MPTCP}, "a TCP socket"},
		{unix.SO_ACCEPTCONN, []int{1}, "listening"},
	} {
		v, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, c.opt)
		if err != nil {
			return nil, fmt.Errorf("checking the published socket: %w", os.NewSyscallError("getsockopt", err))
		}
		if !slices.Contains(c.want, v) {
			return nil, fmt.Errorf("the published descriptor is not %s", c.what)
		}
	}
	ln, err := net.FileListener(f)
	if err != nil {
		return nil, fmt.Errorf("taking the published socket: %w", err)
	}
	return ln, nil
}

// add starts relaying connections accepted on f to the sandbox's port.
func (r *relays) add(m *netsidecar.Publish, f *os.File) error {
	if f == nil {
		return errors.New("publish message without a socket")
	}
	if m.SandboxPort == 0 {
		f.Close()
		return errors.New("publish message for sandbox port 0")
	}
	ln, err := listenerOf(f)
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed || len(r.lns) >= maxPublished {
		ln.Close()
		return fmt.Errorf("at most %d ports may be published", maxPublished)
	}
	r.lns = append(r.lns, ln)
	dst := netip.AddrPortFrom(r.sandbox, m.SandboxPort)
	r.log.Info("relaying a published port", "host", ln.Addr().String(), "sandbox", dst.String())
	r.wg.Add(1)
	go r.serve(ln, dst)
	return nil
}

func (r *relays) serve(ln net.Listener, dst netip.AddrPort) {
	defer r.wg.Done()
	slots := make(chan struct{}, maxRelayed)
	for {
		c, err := ln.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				r.log.Warn("published port stopped accepting", "host", ln.Addr().String(), "err", err.Error())
			}
			return
		}
		select {
		case slots <- struct{}{}:
		default:
			r.log.Warn("published port: too many connections; closing a new one", "host", ln.Addr().String(), "limit", maxRelayed)
			c.Close()
			continue
		}
		go func() {
			defer func() { <-slots }()
			relay(c, dst)
		}()
	}
}

// relay copies between the host's connection c and a new connection to
// dst, half-closing each direction when the other side ends it.
func relay(c net.Conn, dst netip.AddrPort) {
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), relayDialTimeout)
	s, err := (&net.Dialer{}).DialContext(ctx, "tcp4", dst.String())
	cancel()
	if err != nil {
		return
	}
	defer s.Close()
	done := make(chan struct{}, 2)
	pipe := func(to, from net.Conn) {
		_, _ = io.Copy(to, from)
		if tc, ok := to.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		done <- struct{}{}
	}
	go pipe(s, c)
	go pipe(c, s)
	<-done
	<-done
}

// Close stops accepting on every published port; relayed connections end
// when the sidecar exits.
func (r *relays) Close() {
	r.mu.Lock()
	r.closed = true
	lns := r.lns
	r.lns = nil
	r.mu.Unlock()
	for _, ln := range lns {
		ln.Close()
	}
	r.wg.Wait()
}
