package coordinator

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"syscall"
	"time"

	"lazaret.dev/pkg/control"
	"lazaret.dev/pkg/netsidecar"
)

// publishTimeout bounds the sidecar's answer to one published port.
const publishTimeout = 10 * time.Second

// ErrNetworkDown refuses a port while the network is not running.
var ErrNetworkDown = errors.New("the Domain's network is not running")

// Publish is the Domain's control.Ports (docs/NETWORK.md, "Port
// publishing"). For each new forward the HC binds the host end itself, in
// the host's network namespace and as the user, so a port in use or one
// the user may not bind is refused here with its number; it then hands
// the listening socket to the sidecar, which relays each connection to
// the sandbox from the enforcement namespace, and keeps no copy: the
// host port is released exactly when the sidecar exits or the generation
// is released. Every host end is bound before any is handed over, so a
// refused request publishes nothing. The published set is recorded in
// the runtime directory for status.
func (n *sidecarNetwork) Publish(fs []control.PortForward) ([]control.PortForward, error) {
	n.portsMu.Lock()
	defer n.portsMu.Unlock()
	if n.portsDown || n.netns == "" {
		return nil, ErrNetworkDown
	}
	var add []control.PortForward
	for _, f := range fs {
		if !f.HostAddr.Is4() || f.HostPort == 0 || f.SandboxPort == 0 {
			return nil, fmt.Errorf("forward %v: an IPv4 host address and nonzero ports are required", f)
		}
		i := slices.IndexFunc(n.ports, func(p control.PortForward) bool {
			return p.HostAddr == f.HostAddr && p.HostPort == f.HostPort
		})
		if i >= 0 {
			if n.ports[i].SandboxPort != f.SandboxPort {
				return nil, fmt.Errorf("host port %d on %v is already published to sandbox port %d", f.HostPort, f.HostAddr, n.ports[i].SandboxPort)
			}
			continue
		}
		add = append(add, f)
	}
	if len(n.ports)+len(add) > control.MaxPortForwards {
		return nil, fmt.Errorf("at most %d ports may be published in one Domain", control.MaxPortForwards)
	}
	var lns []*net.TCPListener
	defer func() {
		for _, ln := range lns {
			if ln != nil {
				ln.Close()
			}
		}
	}()
	for _, f := range add {
		ln, err := net.ListenTCP("tcp4", net.TCPAddrFromAddrPort(netip.AddrPortFrom(f.HostAddr, f.HostPort)))
		if err != nil {
			return nil, bindError(f, err)
		}
		lns = append(lns, ln)
	}
	for i, f := range add {
		err := n.handOver(lns[i], f)
		lns[i] = nil
		if err != nil {
			n.recordPorts()
			return nil, err
		}
		n.ports = append(n.ports, f)
		n.s.log.Info("port published", "host", f.Host(), "sandbox_port", f.SandboxPort)
	}
	if err := n.recordPorts(); err != nil {
		return nil, err
	}
	return slices.Clone(n.ports), nil
}

// bindError says why the host end of f cannot be bound, naming the port.
func bindError(f control.PortForward, err error) error {
	switch {
	case errors.Is(err, syscall.EADDRINUSE):
		return fmt.Errorf("host port %d on %v is already in use", f.HostPort, f.HostAddr)
	case errors.Is(err, syscall.EACCES):
		return fmt.Errorf("host port %d on %v: this user may not bind it (ports below 1024 need privilege; see net.ipv4.ip_unprivileged_port_start)", f.HostPort, f.HostAddr)
	case errors.Is(err, syscall.EADDRNOTAVAIL):
		return fmt.Errorf("host port %d on %v: %v is not an address of this host", f.HostPort, f.HostAddr, f.HostAddr)
	}
	return fmt.Errorf("binding host port %d on %v: %w", f.HostPort, f.HostAddr, err)
}

// handOver passes ln to the sidecar and waits for its answer; ln is
// closed in every case.
func (n *sidecarNetwork) handOver(ln *net.TCPListener, f control.PortForward) error {
	file, err := ln.File()
	ln.Close()
	if err != nil {
		return fmt.Errorf("publishing host port %d: %w", f.HostPort, err)
	}
	// The sidecar's copy is then the only one.
	err = n.ch.SendFile(&netsidecar.Publish{HostPort: f.HostPort, SandboxPort: f.SandboxPort}, file)
	file.Close()
	if err != nil {
		return fmt.Errorf("publishing host port %d: %w", f.HostPort, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), publishTimeout)
	defer cancel()
	got, err := netsidecar.Expect[*netsidecar.Published](ctx, n.ch)
	if err != nil {
		return fmt.Errorf("publishing host port %d: the network sidecar: %w", f.HostPort, err)
	}
	if got.HostPort != f.HostPort || got.SandboxPort != f.SandboxPort {
		return fmt.Errorf("publishing host port %d: the network sidecar answered for host port %d", f.HostPort, got.HostPort)
	}
	return nil
}

// recordPorts writes the published set for status.
func (n *sidecarNetwork) recordPorts() error {
	control.SortPorts(n.ports)
	if err := control.WritePublishedPorts(n.s.paths.Dir, n.ports); err != nil {
		return fmt.Errorf("recording the published ports: %w", err)
	}
	return nil
}

// closePorts refuses further ports; Release calls it before the sidecar
// goes, which closes the host ends.
func (n *sidecarNetwork) closePorts() {
	n.portsMu.Lock()
	n.portsDown = true
	n.ports = nil
	n.portsMu.Unlock()
}
