package pinresolver

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// ServeUDP answers queries arriving on conn until conn is closed, then waits
// for the queries in flight and returns nil. At most Config.MaxUDPInFlight
// queries are handled at once; a datagram arriving beyond that is dropped.
// It returns the error of a read that fails for any other reason. ServeUDP
// does not close conn.
func (s *Server) ServeUDP(conn net.PacketConn) error {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	sem := make(chan struct{}, s.cfg.MaxUDPInFlight)
	buf := make([]byte, streamMaxSize)
	for {
		n, addr, err := conn.ReadFrom(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return fmt.Errorf("reading DNS query datagram: %w", err)
		}
		select {
		case sem <- struct{}{}:
		default:
			continue // flood: drop rather than queue
		}
		msg := bytes.Clone(buf[:n])
		wg.Go(func() {
			defer func() { <-sem }()
			resp, _ := s.ResolveUDP(ctx, msg)
			if resp != nil {
				_, _ = conn.WriteTo(resp, addr)
			}
		})
	}
}

// ServeTCP answers DNS over TCP on connections accepted from l until l is
// closed; it then closes the connections it still serves, waits for them and
// returns nil. At most Config.MaxTCPConns connections are served at once; a
// connection beyond that is closed at once. Each connection carries queries
// in two-byte length framing, answered in order; it is closed after
// Config.TCPIdleTimeout without a complete query, on a zero length, and on a
// message that is dropped rather than answered. Transient accept errors are
// retried with backoff. ServeTCP does not close l.
func (s *Server) ServeTCP(l net.Listener) error {
	ctx, cancel := context.WithCancel(context.Background())
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns = map[net.Conn]struct{}{}
	)
	defer func() {
		cancel()
		mu.Lock()
		for c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	}()
	sem := make(chan struct{}, s.cfg.MaxTCPConns)
	var backoff time.Duration
	for {
		c, err := l.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			// EMFILE, ECONNABORTED and the like pass; back off as
			// net/http does rather than spin or give up.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			time.Sleep(backoff)
			continue
		}
		backoff = 0
		select {
		case sem <- struct{}{}:
		default:
			_ = c.Close()
			continue
		}
		mu.Lock()
		conns[c] = struct{}{}
		mu.Unlock()
		wg.Go(func() {
			defer func() {
				mu.Lock()
				delete(conns, c)
				mu.Unlock()
				_ = c.Close()
				<-sem
			}()
			s.serveConn(ctx, c)
		})
	}
}

func (s *Server) serveConn(ctx context.Context, c net.Conn) {
	var l [2]byte
	for {
		if err := c.SetReadDeadline(time.Now().Add(s.cfg.TCPIdleTimeout)); err != nil {
			return
		}
		if _, err := io.ReadFull(c, l[:]); err != nil {
			return
		}
		n := binary.BigEndian.Uint16(l[:])
		if n == 0 {
			return
		}
		msg := make([]byte, n)
		if _, err := io.ReadFull(c, msg); err != nil {
			return
		}
		resp, _ := s.Resolve(ctx, msg)
		if resp == nil {
			return
		}
		out := make([]byte, 2+len(resp))
		binary.BigEndian.PutUint16(out, uint16(len(resp)))
		copy(out[2:], resp)
		if err := c.SetWriteDeadline(time.Now().Add(s.cfg.TCPIdleTimeout)); err != nil {
			return
		}
		if _, err := c.Write(out); err != nil {
			return
		}
	}
}
