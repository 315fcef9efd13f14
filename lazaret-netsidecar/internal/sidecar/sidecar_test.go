package sidecar_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"lazaret.dev/pkg/hostid"
	"lazaret.dev/pkg/ids"
	"lazaret.dev/pkg/netlab"
	"lazaret.dev/pkg/netpath"
	"lazaret.dev/pkg/netpolicy"
	"lazaret.dev/pkg/netsidecar"
	"lazaret.dev/pkg/nftplan"
	"lazaret.dev/pkg/testgate"
)

const envBinary = "LAZARET_NETSIDECAR_TEST_BINARY"

func TestMain(m *testing.M) {
	if !netlab.Inside() {
		dir, err := os.MkdirTemp("", "netsidecar-test")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		bin := filepath.Join(dir, "lazaret-netsidecar")
		out, err := exec.Command("go", "build", "-o", bin, "lazaret.dev/lazaret-netsidecar").CombinedOutput()
		if err != nil {
			fmt.Fprintf(os.Stderr, "building lazaret-netsidecar: %v\n%s", err, out)
			os.Exit(1)
		}
		os.Setenv(envBinary, bin)
		code := m.Run()
		os.RemoveAll(dir)
		os.Exit(code)
	}
	os.Exit(m.Run())
}

var (
	a = netip.MustParseAddr
	p = netip.MustParsePrefix
)

var targets = netpolicy.Targets{
	Denied: []netpolicy.Destination{
		{Address: a("10.9.9.9"), Port: 80}, {Address: a("169.254.169.254"), Port: 80},
		{Address: a("203.0.113.200"), Port: 80},
	},
	Permitted: []netpolicy.Destination{{Address: a("10.1.2.3"), Port: 80}, {Address: a("198.51.100.10"), Port: 80}},
	DNS:       []netpolicy.DNSTarget{{Resolver: a("192.0.2.53"), Query: "svc.lab.test"}},
}

var hosts = []netip.Addr{
	a("10.1.2.3"), a("10.9.9.9"), a("169.254.169.254"), a("192.0.2.53"), a("192.0.2.99"),
	a("198.51.100.10"), a("203.0.113.200"),
}

// inet creates the internet namespace with every lab host, TCP services on
// port 80 and resolvers on 192.0.2.53 and 192.0.2.99.
func inet(t *testing.T) *os.File {
	t.Helper()
	ns := netlab.NewNS(t)
	netlab.AddHosts(t, ns, hosts...)
	for _, h := range hosts {
		netlab.ServeTCP(t, ns, netip.AddrPortFrom(h, 80))
	}
	rec := map[string][]netip.Addr{"svc.lab.test": {a("198.51.100.10")}}
	netlab.ServeDNS(t, ns, a("192.0.2.53"), rec)
	netlab.ServeDNS(t, ns, a("192.0.2.99"), rec)
	return ns
}

func selfIdentity(t testing.TB, pid int) hostid.PidfsProcessIdentityV1 {
	t.Helper()
	fd, err := hostid.OpenPidfd(pid)
	if err != nil {
		t.Fatal(err)
	}
	defer closeFd(fd)
	id, err := hostid.IdentityOf(fd)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func closeFd(fd int) { os.NewFile(uintptr(fd), "pidfd").Close() }

type running struct {
	cmd     *exec.Cmd
	ch      *netsidecar.Channel
	start   *netsidecar.Start
	stderr  *logBuffer
	ownUser bool
}

// launch starts the sidecar with policy sealed (or not) and sends start.
func launch(t *testing.T, ownUser bool, encoded []byte, sealed bool, start *netsidecar.Start) *running {
	t.Helper()
	return launchAt(t, ownUser, encoded, sealed, start, filepath.Join(t.TempDir(), "names.log"), nil)
}

// launchWithNames is launch with a sealed policy and the name log at
// logPath.
func launchWithNames(t *testing.T, ownUser bool, encoded []byte, start *netsidecar.Start, logPath string) *running {
	t.Helper()
	return launchAt(t, ownUser, encoded, true, start, logPath, nil)
}

// launchAt starts the sidecar with the name log at logPath and brokered,
// the credential broker's encoded configuration (nil for none).
func launchAt(t *testing.T, ownUser bool, encoded []byte, sealed bool, start *netsidecar.Start, logPath string, brokered []byte) *running {
	t.Helper()
	var mem *os.File
	var err error
	if sealed {
		mem, err = netsidecar.SealPolicy(encoded)
	} else {
		mem, err = os.CreateTemp(t.TempDir(), "policy")
		if err == nil {
			_, err = mem.Write(encoded)
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	ch, child, err := netsidecar.ChannelPair()
	if err != nil {
		t.Fatal(err)
	}
	names, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer names.Close()
	brk, err := netsidecar.SealBroker(brokered)
	if err != nil {
		t.Fatal(err)
	}
	defer brk.Close()
	cmd, err := netsidecar.Command(os.Getenv(envBinary), ownUser, netsidecar.Descriptors{Channel: child, Policy: mem, Names: names, Broker: brk})
	if err != nil {
		t.Fatal(err)
	}
	var stderr logBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	child.Close()
	mem.Close()
	r := &running{cmd: cmd, ch: ch, start: start, stderr: &stderr, ownUser: ownUser}
	t.Cleanup(func() {
		ch.Close()
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("sidecar stderr:\n%s", stderr.String())
		}
	})
	if err := ch.Send(start); err != nil {
		t.Fatal(err)
	}
	return r
}

func newStart(t *testing.T, pol *netpolicy.DerivedNetworkPolicy, upstream string, hostAddrs []netip.Addr) (*netsidecar.Start, []byte) {
	t.Helper()
	enc, err := pol.Encode()
	if err != nil {
		t.Fatal(err)
	}
	s := &netsidecar.Start{
		DomainID:                 ids.DomainID{1},
		GenerationID:             ids.GenerationID(ids.New()),
		ConfigurationFingerprint: ids.Digest{3},
		NetworkSidecarID:         ids.SidecarID(ids.New()),
		PolicyDigest:             netpolicy.DigestOfEncoding(enc),
		HostAddresses:            hostAddrs,
		UpstreamInterface:        upstream,
		Targets:                  targets,
		RuntimeSupervisor:        selfIdentity(t, os.Getpid()),
		ConnectTimeoutMillis:     2000,
	}
	return s, enc
}

func ctx(t *testing.T, d time.Duration) context.Context {
	c, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return c
}

// installed reads Installed and opens the sandbox namespace by the path it
// names, checking its identity.
func installed(t *testing.T, r *running) (*netsidecar.Installed, *os.File) {
	t.Helper()
	inst, err := netsidecar.Expect[*netsidecar.Installed](ctx(t, 20*time.Second), r.ch)
	if err != nil {
		t.Fatalf("%v\n%s", err, r.stderr)
	}
	sbx, err := os.Open(inst.SandboxNetNSPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sbx.Close() })
	if id, err := hostid.NamespaceOf(int(sbx.Fd())); err != nil || id != inst.SandboxNamespace {
		t.Fatalf("sandbox netns %q is %v (%v), Installed says %v", inst.SandboxNetNSPath, id, err, inst.SandboxNamespace)
	}
	enf, err := hostid.NamespaceOfProcess(r.cmd.Process.Pid, "net")
	if err != nil || enf != inst.EnforcementNamespace {
		t.Fatalf("sidecar's netns %v (%v), Installed says %v", enf, err, inst.EnforcementNamespace)
	}
	return inst, sbx
}

// ready reads Ready and binds it as the coordinator would.
func ready(t *testing.T, r *running, inst *netsidecar.Installed, helper hostid.PidfsProcessIdentityV1) *netpolicy.NetworkReadinessEvidence {
	t.Helper()
	rd, err := netsidecar.Expect[*netsidecar.Ready](ctx(t, 30*time.Second), r.ch)
	if err != nil {
		t.Fatalf("%v\n%s", err, r.stderr)
	}
	att, err := netpolicy.DecodeAttestation(rd.Attestation)
	if err != nil {
		t.Fatal(err)
	}
	probe, err := netpolicy.DecodeProbe(rd.Probe)
	if err != nil {
		t.Fatal(err)
	}
	want := &netpolicy.Expected{
		DomainID: r.start.DomainID, GenerationID: r.start.GenerationID,
		ConfigurationFingerprint: r.start.ConfigurationFingerprint, NetworkSidecarID: r.start.NetworkSidecarID,
		DerivedPolicyDigest: r.start.PolicyDigest, EnforcementNamespace: inst.EnforcementNamespace,
		RuntimeSupervisor: r.start.RuntimeSupervisor, ConnectivityHelper: helper, Targets: r.start.Targets,
	}
	ev, err := netpolicy.Bind(want, att, probe)
	if err != nil {
		t.Fatalf("binding readiness evidence: %v", err)
	}
	return ev
}

func TestSidecarVethUpstream(t *testing.T) {
	if !netlab.Enter(t) {
		return
	}
	for _, ownUser := range []bool{false, true} {
		t.Run(fmt.Sprintf("own_user_namespace=%v", ownUser), func(t *testing.T) {
			internet := inet(t)
			start, enc := newStart(t, netlab.Policy(t), "up0", []netip.Addr{a("198.18.0.1")})
			r := launch(t, ownUser, enc, true, start)
			inst, sbx := installed(t, r)
			if inst.PolicyDigest != start.PolicyDigest || len(inst.ObservedRoutes) != 2 {
				t.Fatalf("Installed %+v", inst)
			}

			// The parent attaches the upstream, as a connectivity helper would.
			enf, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", r.cmd.Process.Pid))
			if err != nil {
				t.Fatal(err)
			}
			netlab.Link(t, enf, "up0", p("198.18.0.1/30"), internet, "wan0", p("198.18.0.2/30"))
			netlab.Route(t, enf, netip.Prefix{}, a("198.18.0.2"))
			enf.Close()
			helper := selfIdentity(t, os.Getpid())
			if err := r.ch.Send(&netsidecar.HelperStarted{ConnectivityHelper: helper}); err != nil {
				t.Fatal(err)
			}
			ev := ready(t, r, inst, helper)
			if len(ev.Probe.Denied) != 3 || len(ev.Probe.Permitted) != 2 || len(ev.Probe.DNS) != 1 {
				t.Fatalf("probe %+v", ev.Probe)
			}
			// By Ready the probe rules are gone: the ruleset is the plan.
			checkRulesetIsPlan(t, r, start)
			// os/exec copies the sidecar's stderr from a pipe on its own
			// goroutine: a line logged before Ready may arrive here after.
			if !r.stderr.waitFor("refused_by_deny_rule=1", 5*time.Second) {
				t.Errorf("the sidecar's log shows no denied target refused by its deny rule:\n%s", r.stderr)
			}

			if got := netlab.Dial(t, sbx, netip.MustParseAddrPort("198.51.100.10:80"), time.Second); got != netpath.Connected {
				t.Fatalf("permitted host: %v", got)
			}
			if got := netlab.Dial(t, sbx, netip.MustParseAddrPort("203.0.113.200:80"), time.Second); got != netpath.TimedOut {
				t.Fatalf("denied host: %v", got)
			}

			// Killing the sidecar ends the enforcement namespace; the
			// sandbox namespace, still held here, has no way out.
			r.cmd.Process.Kill()
			r.cmd.Wait()
			deadline := time.Now().Add(5 * time.Second)
			for netlab.Dial(t, sbx, netip.MustParseAddrPort("198.51.100.10:80"), 300*time.Millisecond).Reachable() {
				if time.Now().After(deadline) {
					t.Fatal("the sandbox still reaches the internet after the sidecar died")
				}
			}
		})
	}
}

func TestSidecarRefuses(t *testing.T) {
	if !netlab.Enter(t) {
		return
	}
	pol := netlab.Policy(t)
	tests := []struct {
		name   string
		sealed bool
		mutate func(s *netsidecar.Start)
		want   string
	}{
		{"digest mismatch", true, func(s *netsidecar.Start) { s.PolicyDigest[0] ^= 1 }, "policy digest does not match"},
		{"unsealed policy", false, func(*netsidecar.Start) {}, "is not sealed"},
		{"contradicting target", true, func(s *netsidecar.Start) {
			s.Targets.Permitted = append(s.Targets.Permitted, netpolicy.Destination{Address: a("10.9.9.9"), Port: 80})
		}, "readiness permitted target 10.9.9.9:80"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			start, enc := newStart(t, pol, "up0", nil)
			tc.mutate(start)
			r := launch(t, false, enc, tc.sealed, start)
			_, err := netsidecar.Expect[*netsidecar.Installed](ctx(t, 10*time.Second), r.ch)
			if !errors.Is(err, netsidecar.ErrFailed) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("sidecar answered %v, want a failure saying %q", err, tc.want)
			}
		})
	}
}

// checkRulesetIsPlan compares the sidecar's installed ruleset with the
// plan of its start message.
func checkRulesetIsPlan(t *testing.T, r *running, start *netsidecar.Start) {
	t.Helper()
	enf, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", r.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	defer enf.Close()
	plan, err := nftplan.New(netlab.Policy(t), nftplan.Config{SandboxInterface: netpath.DefaultSandboxInterface,
		UpstreamInterface: start.UpstreamInterface, HostAddresses: start.HostAddresses,
		RelayFrom: netpath.Config{}.WithDefaults().SandboxAddress(), RelayTo: netpath.Config{}.WithDefaults().Gateway()})
	if err != nil {
		t.Fatal(err)
	}
	if err := netpath.VerifyRuleset(enf, plan); err != nil {
		t.Fatalf("the sidecar's ruleset after readiness: %v", err)
	}
}

// TestSidecarReadinessFailureNamesTarget: a target the enforcement path
// does not treat as configured fails the start with Failed naming it.
// (A denied target that answers cannot reach the probes here: the sidecar
// refuses a denied target the policy allows before installing anything,
// see TestSidecarRefuses; pkg/netpath's TestProbeNamesFailingTarget
// covers it against the probes themselves.)
func TestSidecarReadinessFailureNamesTarget(t *testing.T) {
	if !netlab.Enter(t) {
		return
	}
	// netlab.Policy with a second resolver, 192.0.2.54, where nothing
	// answers.
	pol, err := netpolicy.Derive(
		[]netip.Prefix{p("198.51.100.0/24"), p("203.0.113.0/24"), p("10.1.2.3/32"), p("192.0.2.0/24")},
		append([]netip.Prefix{p("203.0.113.128/25")}, netpolicy.RFC1918...),
		[]netip.Addr{a("192.0.2.53"), a("192.0.2.54")})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		mutate func(*netpolicy.Targets)
		want   string
	}{
		// Allowed by the policy, but no host answers there.
		{"permitted target silent", func(tg *netpolicy.Targets) {
			tg.Permitted = append(tg.Permitted, netpolicy.Destination{Address: a("203.0.113.10"), Port: 80})
		}, "readiness permitted target 203.0.113.10:80: unreachable"},
		{"dns silent", func(tg *netpolicy.Targets) {
			tg.DNS = append(tg.DNS, netpolicy.DNSTarget{Resolver: a("192.0.2.54"), Query: "svc.lab.test"})
		}, `readiness dns target "svc.lab.test" via 192.0.2.54: not resolved`},
		// Denied by the policy, but a SYN to it never leaves the sandbox
		// namespace, so no deny rule can be seen refusing it.
		{"denied target never leaves", func(tg *netpolicy.Targets) {
			tg.Denied = append([]netpolicy.Destination{{Address: a("127.0.0.1"), Port: 80}}, tg.Denied...)
		}, "readiness denied target 127.0.0.1:80: a TCP SYN to it never reaches the enforcement path"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			internet := inet(t)
			start, enc := newStart(t, pol, "up0", nil)
			start.ConnectTimeoutMillis = 0 // the default bounds
			start.Targets = netpolicy.Targets{
				Denied:    append([]netpolicy.Destination(nil), targets.Denied...),
				Permitted: append([]netpolicy.Destination(nil), targets.Permitted...),
				DNS:       append([]netpolicy.DNSTarget(nil), targets.DNS...),
			}
			tc.mutate(&start.Targets)
			r := launch(t, false, enc, true, start)
			installed(t, r)
			enf, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", r.cmd.Process.Pid))
			if err != nil {
				t.Fatal(err)
			}
			netlab.Link(t, enf, "up0", p("198.18.0.1/30"), internet, "wan0", p("198.18.0.2/30"))
			netlab.Route(t, enf, netip.Prefix{}, a("198.18.0.2"))
			enf.Close()
			if err := r.ch.Send(&netsidecar.HelperStarted{ConnectivityHelper: selfIdentity(t, os.Getpid())}); err != nil {
				t.Fatal(err)
			}
			began := time.Now()
			_, err = netsidecar.Expect[*netsidecar.Ready](ctx(t, 30*time.Second), r.ch)
			if !errors.Is(err, netsidecar.ErrFailed) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("sidecar answered %v, want a failure saying %q", err, tc.want)
			}
			t.Logf("failed %v after HelperStarted: %v", time.Since(began), err)
		})
	}
}

// TestSidecarSlirp runs the real connectivity helper. The lab's own
// network namespace plays the host: slirp4netns opens its sockets there,
// the lab routes to the internet namespace, and the lab has a loopback
// service and an address of its own that the sandbox must not reach.
func TestSidecarSlirp(t *testing.T) {
	slirp := testgate.Command(t, "slirp4netns")
	if !netlab.Enter(t) {
		return
	}
	internet := inet(t)
	lab, err := netpath.CurrentNetNS()
	if err != nil {
		t.Fatal(err)
	}
	defer lab.Close()
	netlab.Up(t, lab, "lo")
	netlab.Link(t, lab, "inet0", p("198.18.5.1/24"), internet, "lab0", p("198.18.5.2/24"))
	netlab.Route(t, lab, netip.Prefix{}, a("198.18.5.2"))
	netlab.Route(t, internet, netip.Prefix{}, a("198.18.5.1"))
	netlab.ServeTCP(t, lab, netip.MustParseAddrPort("127.0.0.1:8080"))
	netlab.ServeTCP(t, lab, netip.MustParseAddrPort("198.18.5.1:8080"))
	for _, ownUser := range []bool{false, true} {
		t.Run(fmt.Sprintf("own_user_namespace=%v", ownUser), func(t *testing.T) {
			hostAddrs := []netip.Addr{a("198.18.5.1"), a("10.0.2.2"), a("10.0.2.3")}
			start, enc := newStart(t, netlab.Policy(t), netpath.SlirpTap, hostAddrs)
			r := launch(t, ownUser, enc, true, start)
			inst, sbx := installed(t, r)

			helperStart := time.Now()
			s, err := netpath.StartSlirp(ctx(t, 10*time.Second), netpath.SlirpConfig{Binary: slirp, PID: r.cmd.Process.Pid, JoinUserNS: ownUser}, os.Stderr)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(s.Stop)
			t.Logf("slirp4netns ready in %v", time.Since(helperStart))
			helper := s.Identity()
			if err := r.ch.Send(&netsidecar.HelperStarted{ConnectivityHelper: helper}); err != nil {
				t.Fatal(err)
			}
			began := time.Now()
			ready(t, r, inst, helper)
			t.Logf("readiness through slirp4netns in %v", time.Since(began))

			for _, tc := range []struct {
				dst  string
				want bool
			}{
				{"198.51.100.10:80", true},
				{"10.1.2.3:80", true},
				{"203.0.113.200:80", false},
				{"10.0.2.2:8080", false},   // the host's loopback through slirp
				{"198.18.5.1:8080", false}, // the host's own address
				{"169.254.169.254:80", false},
			} {
				if got := netlab.Dial(t, sbx, netip.MustParseAddrPort(tc.dst), time.Second); got.Reachable() != tc.want {
					t.Errorf("%s: %v, want reachable=%v", tc.dst, got, tc.want)
				}
			}
			got, err := netpath.Resolve(context.Background(), sbx, a("192.0.2.99"), "svc.lab.test",
				netpath.ProbeConfig{DNSTimeout: 500 * time.Millisecond, DNSAttempts: 1})
			if err != nil || len(got) != 0 {
				t.Errorf("DNS through the unlisted resolver 192.0.2.99: %v %v", got, err)
			}

			// The helper's death leaves the sandbox without a way out too.
			s.Stop()
			deadline := time.Now().Add(5 * time.Second)
			for netlab.Dial(t, sbx, netip.MustParseAddrPort("198.51.100.10:80"), 300*time.Millisecond).Reachable() {
				if time.Now().After(deadline) {
					t.Fatal("the sandbox still reaches the internet after slirp4netns stopped")
				}
			}
		})
	}
}

// logBuffer collects a process's stderr, which os/exec writes from its own
// goroutine, for concurrent reading.
type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// waitFor reports whether s appears in the log within d.
func (l *logBuffer) waitFor(s string, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for !strings.Contains(l.String(), s) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}
