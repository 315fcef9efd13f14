package netlab

import (
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"lazaret.dev/pkg/netpath"
	"lazaret.dev/pkg/testgate"
)

// EnvProvided says that a test internet (StartInternet, started by
// cmd/testinternet) is already routed from the network namespace the
// tests run in, so a test uses it instead of building a lab of its own.
// This is how the unprivileged run gets one: building it needs root.
const EnvProvided = "LAZARET_TEST_INTERNET"

// Provided reports whether EnvProvided is set.
func Provided() bool { return os.Getenv(EnvProvided) == "1" }

// Hosts of the test internet, on documentation and benchmarking
// addresses. They avoid 192.0.2.0/24 and 203.0.113.0/24, which some
// build hosts use for their own network and proxies; every one of them
// answers TCP on port 443 with "hello from <address>:443".
var (
	// InternetPermitted is a host profiles allow; port 9 discards what
	// it receives, for throughput measurements.
	InternetPermitted = netip.MustParseAddr("198.51.100.1")
	// InternetResolver answers InternetName with InternetAnswer.
	InternetResolver = netip.MustParseAddr("198.51.100.53")
	// InternetOtherResolver answers the same, but no policy lists it.
	InternetOtherResolver = netip.MustParseAddr("198.51.100.99")
	// InternetAnswer is the address InternetName resolves to.
	InternetAnswer = netip.MustParseAddr("198.51.100.80")
	// InternetDenied is in 198.19.0.0/24, which no profile allows.
	InternetDenied = netip.MustParseAddr("198.19.0.1")
	// InternetNamed are more hosts in 198.19.0.0/24: no prefix allows
	// them, so the sandbox reaches them only once the pinning resolver
	// pinned a name that resolves to them (see DynamicSuffix).
	InternetNamed = []netip.Addr{
		netip.MustParseAddr("198.19.0.10"), netip.MustParseAddr("198.19.0.11"), netip.MustParseAddr("198.19.0.12"),
		netip.MustParseAddr("198.19.0.13"),
	}
	// InternetShadowed is in 198.51.100.64/26, which profiles deny.
	InternetShadowed = netip.MustParseAddr("198.51.100.65")
	// InternetCarveOut is in that denied /26 but allowed by a longer
	// prefix of its own.
	InternetCarveOut = netip.MustParseAddr("198.51.100.70")
	// InternetPrivate holds one host in each RFC 1918 range.
	InternetPrivate = []netip.Addr{
		netip.MustParseAddr("10.1.2.3"), netip.MustParseAddr("172.16.1.3"), netip.MustParseAddr("192.168.1.3"),
	}
	// HostLinkAddress is the host's own address on its link to the test
	// internet; the host answers TCP there and on 127.0.0.1, port 443.
	HostLinkAddress  = netip.MustParsePrefix("198.18.5.1/24")
	internetLinkAddr = netip.MustParsePrefix("198.18.5.2/24")
)

// InternetName is the name the test internet's resolvers answer besides
// those in DynamicSuffix.
const InternetName = "example.com"

// Host link names in the host's namespace and the internet's.
const hostLinkName, internetLinkName = "lzinet0", "lzhost0"

// Internet is a running test internet: a network namespace holding its
// hosts and services, linked and routed to a host namespace.
type Internet struct {
	ns      *os.File
	host    *os.File
	closers []io.Closer
	gitRoot string // the git service's repositories, removed at Close
}

// StartInternet builds the test internet and routes its prefixes (not a
// default route: the host keeps its own) from the namespace host. Its
// HTTPS services (APIHost, OtherHost) run git, which must be on PATH.
func StartInternet(host *os.File) (_ *Internet, err error) {
	inet, err := netpath.NewNetNS()
	if err != nil {
		return nil, fmt.Errorf("test internet namespace: %w", err)
	}
	in := &Internet{ns: inet, host: host}
	defer func() {
		if err != nil {
			in.Close()
		}
	}()
	if err := up(host, "lo"); err != nil {
		return nil, err
	}
	hosts := []netip.Addr{InternetPermitted, InternetResolver, InternetOtherResolver, InternetDenied, InternetShadowed, InternetCarveOut}
	hosts = append(hosts, InternetPrivate...)
	hosts = append(hosts, InternetNamed...)
	if err := addHosts(inet, hosts...); err != nil {
		return nil, err
	}
	for _, h := range hosts {
		if err := in.serve(serveTCP(inet, netip.AddrPortFrom(h, 443))); err != nil {
			return nil, err
		}
	}
	if err := in.serve(serveDiscard(inet, netip.AddrPortFrom(InternetPermitted, 9))); err != nil {
		return nil, err
	}
	git, gitRoot, err := makeGitRoot()
	if err != nil {
		return nil, err
	}
	in.gitRoot = gitRoot
	for _, h := range []netip.Addr{APIHost, OtherHost} {
		if err := in.serve(serveHTTPS(inet, netip.AddrPortFrom(h, TLSPort), git, gitRoot)); err != nil {
			return nil, err
		}
	}
	records := map[string][]netip.Addr{InternetName: {InternetAnswer}}
	for _, r := range []netip.Addr{InternetResolver, InternetOtherResolver} {
		_, pc, err := serveDNS(inet, r, records)
		if err != nil {
			return nil, err
		}
		in.closers = append(in.closers, pc)
	}
	if err := link(host, hostLinkName, HostLinkAddress, inet, internetLinkName, internetLinkAddr); err != nil {
		return nil, err
	}
	routes := []netip.Prefix{netip.MustParsePrefix("198.51.100.0/24"), netip.MustParsePrefix("198.19.0.0/24")}
	for _, p := range InternetPrivate {
		routes = append(routes, netip.PrefixFrom(p, 32))
	}
	for _, p := range routes {
		if err := route(host, p, internetLinkAddr.Addr()); err != nil {
			return nil, err
		}
	}
	if err := route(inet, netip.Prefix{}, HostLinkAddress.Addr()); err != nil {
		return nil, err
	}
	for _, a := range []netip.AddrPort{netip.AddrPortFrom(HostLinkAddress.Addr(), 443), netip.MustParseAddrPort("127.0.0.1:443")} {
		if err := in.serve(serveTCP(host, a)); err != nil {
			return nil, err
		}
	}
	return in, nil
}

// serveHTTPS serves the HTTPS services (newServices) on addr inside ns
// with ServerTLSConfig, until the returned server is closed.
func serveHTTPS(ns *os.File, addr netip.AddrPort, git, gitRoot string) (io.Closer, error) {
	ln, err := listen(ns, addr)
	if err != nil {
		return nil, err
	}
	srv := &http.Server{
		Handler:           newServices(addr.String(), git, gitRoot),
		TLSConfig:         ServerTLSConfig(),
		ReadHeaderTimeout: 10 * time.Second,
		// Handshakes with an unknown name are the clients' mistakes.
		ErrorLog: log.New(io.Discard, "", 0),
	}
	go srv.ServeTLS(ln, "", "")
	return srv, nil
}

func (in *Internet) serve(c io.Closer, err error) error {
	if err != nil {
		return err
	}
	in.closers = append(in.closers, c)
	return nil
}

// Close stops the services and removes the link, and with it the
// routes; the internet's namespace ends with its last reference.
func (in *Internet) Close() error {
	for _, c := range in.closers {
		c.Close()
	}
	in.closers = nil
	var err error
	if in.gitRoot != "" {
		err = os.RemoveAll(in.gitRoot)
		in.gitRoot = ""
	}
	if h, herr := handleAt(in.host); herr == nil {
		if l, lerr := h.LinkByName(hostLinkName); lerr == nil {
			err = errors.Join(err, h.LinkDel(l))
		}
		h.Close()
	}
	return errors.Join(err, in.ns.Close())
}

// started is the internet RunInInternet built for this test binary.
var started *Internet

// EnterInternet runs the calling top-level test where a test internet is
// routed: the provided one (EnvProvided), or one built in a lab of its
// own (Enter), which needs root. It returns false where the test must
// return (outside the lab).
func EnterInternet(t *testing.T) bool {
	t.Helper()
	if Provided() || started != nil {
		return true
	}
	NeedInternet(t)
	if !Enter(t) {
		return false
	}
	host, err := netpath.CurrentNetNS()
	if err != nil {
		t.Fatal(err)
	}
	in, err := StartInternet(host)
	if err != nil {
		host.Close()
		t.Fatalf("starting the test internet: %v", err)
	}
	t.Cleanup(func() {
		in.Close()
		host.Close()
	})
	return true
}

// NeedInternet skips the test, or fails it when privileged tests are
// mandatory, unless a test internet is or can be had: provided, built by
// RunInInternet, or buildable because this is root.
func NeedInternet(t testing.TB) {
	t.Helper()
	if Provided() || started != nil || os.Geteuid() == 0 {
		return
	}
	testgate.Require(t, "the test internet", func() error {
		return fmt.Errorf("building one needs root and %s=1 is not set (as root, run cmd/testinternet of lazaret.dev/pkg/netlab and set it)", EnvProvided)
	})
}

// RunInInternet runs the tests of m where a test internet is routed: the
// provided one, or, as root, one built in new network and mount
// namespaces for the whole test binary, which is re-executed there.
// Without either, the tests run as they are and NeedInternet gates those
// that need it. It returns the exit code for os.Exit.
func RunInInternet(m *testing.M) int {
	switch {
	case Provided():
		return m.Run()
	case Inside():
		host, err := netpath.CurrentNetNS()
		if err != nil {
			fmt.Fprintln(os.Stderr, "test internet:", err)
			return 1
		}
		in, err := StartInternet(host)
		if err != nil {
			fmt.Fprintln(os.Stderr, "starting the test internet:", err)
			return 1
		}
		started = in
		code := m.Run()
		in.Close()
		host.Close()
		return code
	case os.Geteuid() != 0:
		return m.Run()
	}
	cmd := exec.Command(os.Args[0], os.Args[1:]...)
	cmd.Env = append(os.Environ(), EnvInside+"=1")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET | syscall.CLONE_NEWNS, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.ExitCode() > 0 {
			return ee.ExitCode()
		}
		fmt.Fprintln(os.Stderr, "running the tests in a test internet:", err)
		return 1
	}
	return 0
}
