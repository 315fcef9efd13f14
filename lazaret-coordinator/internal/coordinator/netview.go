package coordinator

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"lazaret.dev/pkg/control"
	"lazaret.dev/pkg/domainstore"
	"lazaret.dev/pkg/handoff"
	"lazaret.dev/pkg/hostid"
	"lazaret.dev/pkg/ids"
	"lazaret.dev/pkg/locate"
	"lazaret.dev/pkg/netpath"
	"lazaret.dev/pkg/netpolicy"
	"lazaret.dev/pkg/netprofile"
	"lazaret.dev/pkg/netsidecar"
)

// Bounds of the network step.
const (
	installTimeout   = 30 * time.Second
	slirpTimeout     = 15 * time.Second
	readinessTimeout = 90 * time.Second
	sidecarExitGrace = 5 * time.Second
)

// slirpGateway and slirpDNS are the connectivity helper's own addresses,
// which lead to the host and are always dropped.
var slirpGateway, slirpDNS = netip.MustParseAddr("10.0.2.2"), netip.MustParseAddr("10.0.2.3")

// sidecarNetwork is the enforced network (docs/NETWORK.md): the derived
// policy sealed in a memfd, lazaret-netsidecar in new network and mount
// namespaces inside the State Anchor's user namespace (so the sandbox
// namespace it creates belongs to the user namespace runsc runs in), and
// slirp4netns joined to the sidecar's user and network namespaces. The HC
// is the Runtime Supervisor of both, a direct existing-process edge; the
// sidecar's readiness is bound into the Network participant before the
// sandbox starts.
type sidecarNetwork struct {
	s              *scope
	anchor         *stateAnchor
	sidecar        string // lazaret-netsidecar
	unshare, slirp string // from the distribution
	nsenter        string
	stderr         io.Writer

	policy  *netpolicy.DerivedNetworkPolicy
	encoded []byte
	digest  ids.Digest
	targets netpolicy.Targets

	ch      *netsidecar.Channel
	cmd     *exec.Cmd
	exited  chan struct{}
	waitErr error
	helper  *netpath.Slirp
	netns   string // the sandbox namespace path runsc joins
	lost    chan struct{}

	// portsMu serialises Publish, which alone uses ch after readiness.
	portsMu   sync.Mutex
	ports     []control.PortForward // published, canonical order
	portsDown bool                  // released: no more ports
}

// newSidecarNetwork derives the policy of the resolved configuration and
// locates the programs the network step runs.
func newSidecarNetwork(s *scope, a *stateAnchor, stderr io.Writer) (*sidecarNetwork, error) {
	pol, t, err := netprofile.PolicyOf(s.cfg)
	if err != nil {
		return nil, err
	}
	enc, err := pol.Encode()
	if err != nil {
		return nil, fmt.Errorf("encoding the network policy: %w", err)
	}
	n := &sidecarNetwork{s: s, anchor: a, stderr: stderr, policy: pol, encoded: enc,
		digest: netpolicy.DigestOfEncoding(enc), targets: t, exited: make(chan struct{}), lost: make(chan struct{})}
	f, err := locate.New()
	if err != nil {
		return nil, fmt.Errorf("locating helper binaries: %w", err)
	}
	if n.sidecar, err = f.Find("lazaret-netsidecar"); err != nil {
		return nil, fmt.Errorf("locating lazaret-netsidecar: %w", err)
	}
	for _, p := range []struct {
		name, pkg string
		dst       *string
	}{{"unshare", "util-linux", &n.unshare}, {"nsenter", "util-linux", &n.nsenter}, {"slirp4netns", "slirp4netns", &n.slirp}} {
		bin, err := exec.LookPath(p.name)
		if err != nil {
			return nil, fmt.Errorf("locating %s (install %s): %w", p.name, p.pkg, err)
		}
		if *p.dst, err = filepath.Abs(bin); err != nil {
			return nil, err
		}
	}
	return n, nil
}

func (n *sidecarNetwork) Step() Step            { return StepNetwork }
func (n *sidecarNetwork) NamespacePath() string { return n.netns }
func (n *sidecarNetwork) Participant() bool     { return true }
func (n *sidecarNetwork) Lost() <-chan struct{} { return n.lost }

// Resolvers are the DNS servers the sandbox's resolv.conf names: the
// pinning resolver on the enforcement end for a policy with names (the
// only way a name's addresses become reachable), else the only resolvers
// the policy lets the sandbox reach.
func (n *sidecarNetwork) Resolvers() []netip.Addr {
	if n.policy.HasNames() {
		return []netip.Addr{netpath.DefaultLink.Addr().Next()}
	}
	var out []netip.Addr
	for _, r := range n.policy.Resolvers {
		out = append(out, r.Address)
	}
	return out
}

// hostAddresses are this host's own IPv4 addresses and the helper's
// gateway and DNS forwarder, all dropped by the ruleset.
func hostAddresses() ([]netip.Addr, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, fmt.Errorf("listing the host's addresses: %w", err)
	}
	out := []netip.Addr{slirpGateway, slirpDNS}
	for _, a := range addrs {
		p, err := netip.ParsePrefix(a.String())
		if err != nil {
			continue
		}
		ip := p.Addr().Unmap()
		if ip.Is4() && !ip.IsLoopback() && !slices.Contains(out, ip) {
			out = append(out, ip)
		}
	}
	return out, nil
}

// Start is the network step: the Network participant (Intent, policy
// digest and the HC as its Runtime Supervisor) before the sidecar, its
// enforcement namespace once installed; the Helper participant before
// slirp4netns, staged and committed; then readiness, bound and recorded,
// which commits the Network participant.
func (n *sidecarNetwork) Start(ctx context.Context) error {
	s := n.s
	if err := s.intent(domainstore.RoleNetwork); err != nil {
		return err
	}
	if err := s.update(domainstore.RoleNetwork, domainstore.StateIntent, func(o *domainstore.ParticipantOwnership) {
		o.Network.DerivedPolicyDigest = ptr(n.digest)
		o.Network.RuntimeSupervisor = committed(s.self)
	}); err != nil {
		return err
	}
	hosts, err := hostAddresses()
	if err != nil {
		return err
	}
	mem, err := netsidecar.SealPolicy(n.encoded)
	if err != nil {
		return fmt.Errorf("sealing the network policy: %w", err)
	}
	ch, child, err := netsidecar.ChannelPair()
	if err != nil {
		mem.Close()
		return fmt.Errorf("creating the network sidecar's channel: %w", err)
	}
	n.ch = ch
	// Not bound to ctx: the sidecar holds the namespaces until Release.
	names, err := control.OpenNameLog(s.paths.Dir)
	if err != nil {
		mem.Close()
		child.Close()
		return err
	}
	defer names.Close()
	// The broker's configuration holds the real values of the brokered
	// credentials: it leaves this process only in this sealed memfd,
	// which is closed once the sidecar has it.
	brk, err := netsidecar.SealBroker(s.broker.encodedConfig())
	if err != nil {
		mem.Close()
		child.Close()
		return err
	}
	defer brk.Close()
	argv, files, err := handoff.Render(&netsidecar.Descriptors{Channel: child, Policy: mem, Names: names, Broker: brk})
	var cmd *exec.Cmd
	if err == nil {
		cmd, err = n.anchor.command(context.Background(), append([]string{n.unshare, "--net", "--mount", "--", n.sidecar}, argv...))
	}
	if err != nil {
		mem.Close()
		child.Close()
		return fmt.Errorf("starting the network sidecar: %w", err)
	}
	cmd.Dir = "/"
	cmd.Stdout, cmd.Stderr = n.stderr, n.stderr
	cmd.ExtraFiles = files
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	s.log.Info("starting network sidecar in the state anchor's user namespace", "binary", n.sidecar, "policy_digest", n.digest.String())
	err = cmd.Start()
	child.Close()
	mem.Close()
	if err != nil {
		return fmt.Errorf("starting %q: %w", n.sidecar, err)
	}
	n.cmd = cmd
	go func() {
		n.waitErr = cmd.Wait()
		close(n.exited)
	}()
	pid := cmd.Process.Pid
	if err := n.ch.Send(&netsidecar.Start{
		DomainID: s.domain, GenerationID: s.id, ConfigurationFingerprint: s.fingerprint,
		NetworkSidecarID: s.sidecarID, PolicyDigest: n.digest, HostAddresses: hosts,
		UpstreamInterface: netpath.SlirpTap, Targets: n.targets, RuntimeSupervisor: s.self,
	}); err != nil {
		return fmt.Errorf("sending the network sidecar its start: %w", err)
	}
	ictx, cancel := context.WithTimeout(ctx, installTimeout)
	inst, err := netsidecar.Expect[*netsidecar.Installed](ictx, n.ch)
	cancel()
	if err != nil {
		return fmt.Errorf("installing the network policy: %w", err)
	}
	if inst.PolicyDigest != n.digest {
		return fmt.Errorf("the network sidecar installed policy %v, not %v: %w", inst.PolicyDigest, n.digest, netsidecar.ErrDigest)
	}
	enf, err := hostid.NamespaceOfProcess(pid, "net")
	if err != nil {
		return fmt.Errorf("identifying the enforcement namespace: %w", err)
	}
	if enf != inst.EnforcementNamespace {
		return fmt.Errorf("the network sidecar reports enforcement namespace %v, its process is in %v", inst.EnforcementNamespace, enf)
	}
	if err := checkNamespacePath(inst.SandboxNetNSPath, inst.SandboxNamespace); err != nil {
		return err
	}
	if err := s.update(domainstore.RoleNetwork, domainstore.StateIntent, func(o *domainstore.ParticipantOwnership) {
		o.Network.Namespace = ptr(enf)
	}); err != nil {
		return err
	}

	helper, err := n.startHelper(ctx, pid)
	if err != nil {
		return err
	}
	if err := n.ch.Send(&netsidecar.HelperStarted{ConnectivityHelper: helper}); err != nil {
		return fmt.Errorf("telling the network sidecar the helper runs: %w", err)
	}
	rctx, cancel := context.WithTimeout(ctx, readinessTimeout)
	rd, err := netsidecar.Expect[*netsidecar.Ready](rctx, n.ch)
	cancel()
	if err != nil {
		return fmt.Errorf("proving network readiness: %w", err)
	}
	att, err := netpolicy.DecodeAttestation(rd.Attestation)
	if err != nil {
		return fmt.Errorf("decoding the readiness attestation: %w", err)
	}
	probe, err := netpolicy.DecodeProbe(rd.Probe)
	if err != nil {
		return fmt.Errorf("decoding the reachability probe: %w", err)
	}
	ev, err := netpolicy.Bind(&netpolicy.Expected{
		DomainID: s.domain, GenerationID: s.id, ConfigurationFingerprint: s.fingerprint,
		NetworkSidecarID: s.sidecarID, DerivedPolicyDigest: n.digest, EnforcementNamespace: enf,
		RuntimeSupervisor: s.self, ConnectivityHelper: helper, Targets: n.targets,
	}, att, probe)
	if err != nil {
		return err
	}
	// The store keeps the evidence record's four schema fields; the
	// attestation and probe it was bound from are logged.
	stored := domainstore.NewReadinessEvidence(ev.DomainID, ev.GenerationID, ev.NetworkSidecarID, ev.ReadinessFingerprint)
	if err := s.update(domainstore.RoleNetwork, domainstore.RoleNetwork.ActiveState(), func(o *domainstore.ParticipantOwnership) {
		o.Network.ReadinessFingerprint = ptr(ev.ReadinessFingerprint)
		o.Network.ReadinessEvidence = &stored
	}); err != nil {
		return err
	}
	if err := control.WriteNetworkPolicy(s.paths.Dir, n.encoded); err != nil {
		return fmt.Errorf("recording the enforced network policy for status: %w", err)
	}
	if creds := s.broker.record(); creds != nil {
		if err := control.WriteBrokeredCredentials(s.paths.Dir, creds); err != nil {
			return fmt.Errorf("recording the brokered credentials for status: %w", err)
		}
	}
	n.netns = inst.SandboxNetNSPath
	s.log.Info("network ready", "policy_digest", n.digest.String(), "enforcement_namespace", enf,
		"sandbox_netns", n.netns, "readiness_fingerprint", ev.ReadinessFingerprint.String(),
		"denied", len(ev.Probe.Denied), "permitted", len(ev.Probe.Permitted), "dns", len(ev.Probe.DNS))
	go n.watch()
	return nil
}

// startHelper records the Helper participant, starts slirp4netns in the
// sidecar's user and network namespaces, and commits it.
func (n *sidecarNetwork) startHelper(ctx context.Context, sidecarPid int) (hostid.PidfsProcessIdentityV1, error) {
	s := n.s
	const role = domainstore.RoleHelper
	if err := s.intent(role); err != nil {
		return hostid.PidfsProcessIdentityV1{}, err
	}
	if err := s.update(role, domainstore.StateIntent, func(o *domainstore.ParticipantOwnership) {
		o.Helper.NetworkSidecarID = ptr(s.sidecarID)
		o.Helper.RuntimeSupervisor = committed(s.self)
	}); err != nil {
		return hostid.PidfsProcessIdentityV1{}, err
	}
	cfg, err := n.slirpConfig(sidecarPid)
	if err != nil {
		return hostid.PidfsProcessIdentityV1{}, err
	}
	sctx, cancel := context.WithTimeout(ctx, slirpTimeout)
	slirp, err := netpath.StartSlirp(sctx, cfg, n.stderr)
	cancel()
	if err != nil {
		return hostid.PidfsProcessIdentityV1{}, fmt.Errorf("starting the connectivity helper: %w", err)
	}
	n.helper = slirp
	id := slirp.Identity()
	if err := s.update(role, domainstore.StateIntent, func(o *domainstore.ParticipantOwnership) {
		o.Helper.ConnectivityHelper = hostid.StagedOwnership(id)
	}); err != nil {
		return hostid.PidfsProcessIdentityV1{}, err
	}
	if err := s.update(role, role.ActiveState(), func(o *domainstore.ParticipantOwnership) {
		o.Helper.ConnectivityHelper = committed(id)
	}); err != nil {
		return hostid.PidfsProcessIdentityV1{}, err
	}
	s.log.Info("connectivity helper started", "binary", n.slirp, "pid", id.HostPID)
	return id, nil
}

// slirpConfig says how slirp4netns gets into the user namespace of the
// sidecar (the State Anchor's), whose network namespaces it serves. Root
// lets it join by --userns-path and sandbox itself. An unprivileged
// slirp4netns cannot sandbox itself after joining that way, so it is
// started through nsenter as root of the namespace instead, which needs
// setgroups allowed there (a newuidmap map). With the single-ID map,
// where setgroups is denied, it joins by flag without its own sandbox;
// the log says so.
func (n *sidecarNetwork) slirpConfig(sidecarPid int) (netpath.SlirpConfig, error) {
	cfg := netpath.SlirpConfig{Binary: n.slirp, PID: sidecarPid, JoinUserNS: true}
	if os.Geteuid() == 0 {
		return cfg, nil
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/setgroups", sidecarPid))
	if err != nil {
		return cfg, fmt.Errorf("reading the sidecar's setgroups state: %w", err)
	}
	if strings.TrimSpace(string(b)) == "allow" {
		cfg.JoinUserNS = false
		cfg.Enter = []string{n.nsenter, fmt.Sprintf("--user=/proc/%d/ns/user", sidecarPid), "--"}
		return cfg, nil
	}
	cfg.NoSandbox = true
	n.s.log.Warn("the connectivity helper runs without its own sandbox: setgroups is denied in the state anchor's user namespace (no subordinate ID range for this user)")
	return cfg, nil
}

// checkNamespacePath opens path and checks it is the namespace want.
func checkNamespacePath(path string, want hostid.NamespaceIdentity) error {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("opening the sandbox network namespace %q: %w", path, err)
	}
	defer unix.Close(fd)
	got, err := hostid.NamespaceOf(fd)
	if err != nil {
		return fmt.Errorf("identifying the sandbox network namespace %q: %w", path, err)
	}
	if got != want {
		return fmt.Errorf("the sandbox network namespace %q is %v, the network sidecar reported %v", path, got, want)
	}
	return nil
}

// watch closes lost when the sidecar or the helper ends: the sandbox is
// then without a way out, and the generation fails.
func (n *sidecarNetwork) watch() {
	select {
	case <-n.exited:
		n.s.log.Error("network sidecar ended", "err", fmt.Sprint(n.waitErr))
	case <-n.helper.Done():
		n.s.log.Error("connectivity helper ended", "err", fmt.Sprint(n.helper.Err()))
	}
	close(n.lost)
}

// Release stops the helper, then closes the sidecar's channel (it
// releases its namespaces and exits), each recorded Clean once reaped.
func (n *sidecarNetwork) Release(ctx context.Context) error {
	s := n.s
	if _, ok := s.current(domainstore.RoleHelper); ok {
		if err := s.releaseIntent(domainstore.RoleHelper, nil); err != nil {
			return err
		}
		method := "connectivity helper never started"
		if n.helper != nil {
			n.helper.Stop()
			method = "connectivity helper stopped and reaped"
		}
		if err := s.clean(domainstore.RoleHelper, method); err != nil {
			return err
		}
	}
	if err := s.releaseIntent(domainstore.RoleNetwork, nil); err != nil {
		return err
	}
	// The published host ports close with the sidecar, below.
	n.closePorts()
	for _, name := range []string{control.NetworkPolicyName, control.NameLogName, control.PublishedPortsName, control.BrokeredCredentialsName} {
		if err := os.Remove(filepath.Join(s.paths.Dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			s.log.Warn("removing the network policy's file", "file", name, "err", err.Error())
		}
	}
	method := "network sidecar never started"
	if n.ch != nil {
		n.ch.Close()
	}
	if n.cmd != nil {
		select {
		case <-n.exited:
		case <-time.After(sidecarExitGrace):
			_ = n.cmd.Process.Kill()
			<-n.exited
		case <-ctx.Done():
			_ = n.cmd.Process.Kill()
			<-n.exited
		}
		method = "network sidecar exited and was reaped; its namespaces ended with it"
	}
	return s.clean(domainstore.RoleNetwork, method)
}

// recoverHelper kills the recorded connectivity helper.
func recoverHelper(s *scope, o *domainstore.ParticipantOwnership) (string, error) {
	h, err := killRecorded(s.log, "connectivity helper", o.Helper.ConnectivityHelper)
	if err != nil {
		return "", err
	}
	return "connectivity helper " + h, nil
}

// recoverNetwork proves that no process is left in the recorded
// enforcement namespace and removes the policy file status reads.
func recoverNetwork(s *scope, o *domainstore.ParticipantOwnership) (string, error) {
	if o.Network.Namespace != nil {
		if pid, ok := processInNamespace("net", *o.Network.Namespace); ok {
			return "", fmt.Errorf("process %d is still in the recorded enforcement namespace %v, and no record identifies it; stop it, then run recovery again", pid, *o.Network.Namespace)
		}
	}
	// The published host ports were held only by the sidecar, and went
	// with it; their record goes too.
	for _, name := range []string{control.NetworkPolicyName, control.NameLogName, control.PublishedPortsName, control.BrokeredCredentialsName} {
		if err := os.Remove(filepath.Join(s.paths.Dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("removing %s: %w", name, err)
		}
	}
	return "no process is in the recorded enforcement namespace (the network sidecar exits when its coordinator's channel ends)", nil
}

// processInNamespace returns a process in the namespace want, if any.
func processInNamespace(kind string, want hostid.NamespaceIdentity) (int, bool) {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		pid, err := strconv.Atoi(filepath.Base(d))
		if err != nil {
			continue
		}
		if ns, err := hostid.NamespaceOfProcess(pid, kind); err == nil && ns == want {
			return pid, true
		}
	}
	return 0, false
}
