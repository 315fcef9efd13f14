package cli

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/urfave/cli/v2"

	"lazaret.dev/pkg/control"
)

// defaultPublishAddress is where published ports are bound unless
// --publish-address says otherwise: the host's loopback only.
var defaultPublishAddress = netip.MustParseAddr("127.0.0.1")

// publishFlags are the port publishing flags of start and exec.
func publishFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringSliceFlag{Name: "publish", Usage: "forward TCP `[HOST_PORT:]SANDBOX_PORT` from the host (127.0.0.1 unless --publish-address) to the sandbox; repeatable"},
		&cli.StringFlag{Name: "publish-address", Usage: "bind published ports on IPv4 `ADDR` instead of 127.0.0.1: anyone who can reach ADDR reaches the sandbox's service"},
	}
}

// parsePort parses one port number of a --publish value.
func parsePort(spec, what, s string) (uint16, error) {
	if strings.Contains(s, "-") {
		return 0, fmt.Errorf("--publish %q: port ranges are not supported; repeat --publish for each port", spec)
	}
	n, err := strconv.ParseUint(s, 10, 16)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("--publish %q: %s %q is not a port number from 1 to 65535", spec, what, s)
	}
	return uint16(n), nil
}

// parsePublish parses --publish values ([HOST_PORT:]SANDBOX_PORT, a lone
// SANDBOX_PORT meaning the same port on the host) bound on addr, and
// refuses a host port given twice. The result is in canonical order.
func parsePublish(specs []string, addr netip.Addr) ([]control.PortForward, error) {
	var out []control.PortForward
	for _, spec := range specs {
		parts := strings.Split(spec, ":")
		var f control.PortForward
		f.HostAddr = addr
		var err error
		switch len(parts) {
		case 1:
			if f.SandboxPort, err = parsePort(spec, "sandbox port", parts[0]); err != nil {
				return nil, err
			}
			f.HostPort = f.SandboxPort
		case 2:
			if f.HostPort, err = parsePort(spec, "host port", parts[0]); err != nil {
				return nil, err
			}
			if f.SandboxPort, err = parsePort(spec, "sandbox port", parts[1]); err != nil {
				return nil, err
			}
		default:
			return nil, fmt.Errorf("--publish %q: want [HOST_PORT:]SANDBOX_PORT; a bind address goes in --publish-address", spec)
		}
		if i := slices.IndexFunc(out, func(o control.PortForward) bool { return o.HostPort == f.HostPort }); i >= 0 {
			if out[i].SandboxPort == f.SandboxPort {
				return nil, fmt.Errorf("--publish %q: host port %d is given twice", spec, f.HostPort)
			}
			return nil, fmt.Errorf("--publish %q: host port %d is already forwarded to sandbox port %d", spec, f.HostPort, out[i].SandboxPort)
		}
		out = append(out, f)
	}
	if len(out) > control.MaxPortForwards {
		return nil, fmt.Errorf("--publish: %d ports, at most %d", len(out), control.MaxPortForwards)
	}
	control.SortPorts(out)
	return out, nil
}

// parsePublishAddress parses --publish-address; empty means loopback.
// It reports whether the address is reachable from beyond this host.
func parsePublishAddress(s string) (netip.Addr, bool, error) {
	if s == "" {
		return defaultPublishAddress, false, nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil || !a.Is4() {
		return netip.Addr{}, false, fmt.Errorf("--publish-address %q: not an IPv4 address (the sandbox network is IPv4 only)", s)
	}
	return a, !a.IsLoopback(), nil
}

// publishRequest is what start and exec publish: nil when --publish is
// not given. A bind address beyond loopback is only taken when given
// explicitly, and is warned about.
func publishRequest(c *cli.Context) ([]control.PortForward, error) {
	specs := c.StringSlice("publish")
	if len(specs) == 0 {
		if c.IsSet("publish-address") {
			return nil, fail(c, "--publish-address needs --publish")
		}
		return nil, nil
	}
	addr, exposed, err := parsePublishAddress(c.String("publish-address"))
	if err != nil {
		return nil, fail(c, "%v", err)
	}
	fs, err := parsePublish(specs, addr)
	if err != nil {
		return nil, fail(c, "%v", err)
	}
	if exposed {
		fmt.Fprintf(stderrOf(c), "lazaret-cli: warning: publishing on %v: anyone who can reach that address reaches the sandbox's services\n", addr)
	}
	return fs, nil
}

// checkBindable tries to bind each host end not already published by the
// Domain (recorded in dir; one published to another sandbox port is
// refused), so that a port in use or one this user may
// not bind is refused before a Domain is started for nothing. The
// coordinator checks again when it binds.
func checkBindable(fs []control.PortForward, dir string) error {
	have, _ := control.ReadPublishedPorts(dir)
	for _, f := range fs {
		if i := slices.IndexFunc(have, func(h control.PortForward) bool {
			return h.HostAddr == f.HostAddr && h.HostPort == f.HostPort
		}); i >= 0 {
			if have[i].SandboxPort != f.SandboxPort {
				return fmt.Errorf("--publish: host port %d on %v is already published to sandbox port %d", f.HostPort, f.HostAddr, have[i].SandboxPort)
			}
			continue
		}
		ln, err := net.Listen("tcp4", f.Host())
		if err != nil {
			switch {
			case errors.Is(err, syscall.EADDRINUSE):
				return fmt.Errorf("--publish: host port %d on %v is already in use", f.HostPort, f.HostAddr)
			case errors.Is(err, syscall.EACCES):
				return fmt.Errorf("--publish: host port %d on %v: this user may not bind it (ports below 1024 need privilege)", f.HostPort, f.HostAddr)
			case errors.Is(err, syscall.EADDRNOTAVAIL):
				return fmt.Errorf("--publish-address %v: not an address of this host", f.HostAddr)
			}
			return fmt.Errorf("--publish: binding host port %d on %v: %w", f.HostPort, f.HostAddr, err)
		}
		ln.Close()
	}
	return nil
}

// publish asks the Domain's coordinator to publish fs, before the
// session's command runs; tell prints what is published on stderr.
func publish(c *cli.Context, client *control.Client, fs []control.PortForward, tell bool) error {
	if len(fs) == 0 {
		return nil
	}
	all, err := client.Publish(c.Context, fs)
	if err != nil {
		return fail(c, "%v", err)
	}
	if tell {
		for _, f := range all {
			if slices.Contains(fs, f) {
				fmt.Fprintf(stderrOf(c), "lazaret-cli: published %v\n", f)
			}
		}
	}
	return nil
}
