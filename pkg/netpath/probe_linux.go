package netpath

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"lazaret.dev/pkg/netpolicy"
	"lazaret.dev/pkg/nftplan"
	"lazaret.dev/pkg/readyprobe"
)

// ProbeConfig bounds the readiness probes. None of the bounds is part of a
// proof: a denied target is proven by its probe rule's counter, a
// permitted one by its handshake or reset, a DNS target by its answer. The
// bounds only decide how long a target that does not behave may take to
// fail the start.
type ProbeConfig struct {
	// ConnectTimeout is how long a TCP connect may take. A permitted
	// target must complete its handshake, or be refused by a host behind
	// the path, within it. A denied target's connect is answered at once
	// by its probe rule; the bound only ends one whose reset was lost.
	ConnectTimeout time.Duration
	// DNSTimeout is how long one DNS attempt waits for its answer.
	DNSTimeout time.Duration
	// DNSAttempts is how many times the query is sent (the same query,
	// so a late answer to an earlier send still counts) before a DNS
	// target counts as unresolved.
	DNSAttempts int
}

// DefaultProbeConfig keeps every failure under a second: a permitted
// target that does not answer fails after 800 ms, and a DNS query is sent
// at 0 and 400 ms and given up at 800 ms. A handshake through the
// connectivity helper costs one round trip to the target (slirp4netns
// completes the host's connect before it answers the SYN), so any target
// within a few hundred milliseconds passes; one that needs a retransmitted
// SYN (Linux retransmits after 1 s) does not, and names itself. The
// coordinator may pass another ConnectTimeout (netsidecar.Start).
var DefaultProbeConfig = ProbeConfig{ConnectTimeout: 800 * time.Millisecond, DNSTimeout: 400 * time.Millisecond, DNSAttempts: 2}

// DeniedProbePortBase is the source port of the first denied target's
// probe; the i-th binds DeniedProbePortBase+i. The ports lie below the
// sandbox namespace's ephemeral range (32768 and up), so no permitted or
// DNS probe socket can hold one, and nothing else runs in the namespace
// before readiness.
const DeniedProbePortBase = 20000

// maxDeniedProbes keeps the probe ports below the ephemeral range.
const maxDeniedProbes = 32768 - DeniedProbePortBase

// Outcome is what a TCP connect attempt from the sandbox side showed
// (readyprobe.Outcome, shared with the in-pod prober).
type Outcome = readyprobe.Outcome

// The outcomes of a connect attempt.
const (
	Connected = readyprobe.Connected
	Refused   = readyprobe.Refused
	TimedOut  = readyprobe.TimedOut
	NoRoute   = readyprobe.NoRoute
)

// Connect attempts one TCP connection to dst from inside the network
// namespace ns and classifies the result. Errors other than the four
// outcomes are returned.
func Connect(ctx context.Context, ns *os.File, dst netip.AddrPort, timeout time.Duration) (Outcome, error) {
	return connect(ctx, ns, netip.AddrPort{}, dst, timeout)
}

// connect is Connect from the source address and port src when src is
// valid (bound before the SYN is sent), from any otherwise.
func connect(ctx context.Context, ns *os.File, src, dst netip.AddrPort, timeout time.Duration) (Outcome, error) {
	var out Outcome
	err := InNetNS(ns, func() error {
		d := net.Dialer{Timeout: timeout}
		if src.IsValid() {
			d.LocalAddr = net.TCPAddrFromAddrPort(src)
		}
		c, err := d.DialContext(ctx, "tcp4", dst.String())
		if err == nil {
			c.Close()
			out = Connected
			return nil
		}
		out, err = readyprobe.Classify(ctx, err)
		if err != nil {
			return fmt.Errorf("connecting to %v: %w", dst, err)
		}
		return nil
	})
	return out, err
}

// Resolve sends a DNS query for the A records of name to resolver:53 over
// UDP from inside ns and returns the IPv4 addresses of the answer, sorted
// and distinct. Only a response with the query's ID and question counts.
// No answer within the attempts gives an empty result and no error; a
// malformed answer is an error.
func Resolve(ctx context.Context, ns *os.File, resolver netip.Addr, name string, cfg ProbeConfig) ([]netip.Addr, error) {
	addrs, _, err := resolve(ctx, ns, resolver, name, cfg)
	return addrs, err
}

// resolve is Resolve that also returns the answer's RCODE; answered is
// false when no matching answer arrived.
func resolve(ctx context.Context, ns *os.File, resolver netip.Addr, name string, cfg ProbeConfig) (_ []netip.Addr, rcode Answer, _ error) {
	var conn *net.UDPConn
	err := InNetNS(ns, func() error {
		c, err := net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(resolver, netpolicy.DNSPort)))
		conn = c
		return err
	})
	if err != nil {
		return nil, NoAnswer, fmt.Errorf("opening DNS socket to %v: %w", resolver, err)
	}
	defer conn.Close()
	return readyprobe.Exchange(ctx, conn, name, cfg.DNSTimeout, cfg.DNSAttempts)
}

// Answer is how a DNS query was answered (readyprobe.Answer).
type Answer = readyprobe.Answer

// The ways a DNS query can be answered.
const (
	NoAnswer      = readyprobe.NoAnswer
	AnswerSuccess = readyprobe.AnswerSuccess
	AnswerRefused = readyprobe.AnswerRefused
	AnswerOther   = readyprobe.AnswerOther
)

// EncodeQuery builds a recursive query for the A records of name with a
// random ID (readyprobe.EncodeQuery).
func EncodeQuery(name string) (uint16, []byte, error) { return readyprobe.EncodeQuery(name) }

// DecodeAnswer parses a DNS response (readyprobe.DecodeAnswer).
func DecodeAnswer(msg []byte, id uint16, name string) (addrs []netip.Addr, match bool, err error) {
	addrs, _, match, err = readyprobe.DecodeAnswer(msg, id, name)
	return addrs, match, err
}

// DeniedEvidence is what the probe of one denied target observed.
type DeniedEvidence struct {
	// Probe is the probe's four-tuple, which its probe rule matched.
	Probe nftplan.DeniedProbe
	// Outcome is what the connect showed.
	Outcome Outcome
	// Refusals is how many of the probe's SYNs the probe rule counted,
	// read back from the kernel before the rule was deleted.
	Refusals uint64
}

// Unreachable is the denied probe's proof: the handshake did not complete
// and the probe rule, which only a packet the policy denies can reach,
// counted the probe's SYN. The connect's error is not evidence: a reset
// from the probe rule and one from a host behind the path look alike to
// the socket, and only the counter tells them apart.
func (e DeniedEvidence) Unreachable() bool { return e.Outcome != Connected && e.Refusals > 0 }

// failure explains why the evidence is not a proof: a detail for the
// message and the sentinel error; nil when it is one.
func (e DeniedEvidence) failure() (string, error) {
	switch {
	case e.Outcome == Connected:
		return "TCP handshake completed", ErrReachable
	case e.Refusals > 0:
		return "", nil
	case e.Outcome == Refused:
		return "TCP connect refused by a host behind the enforcement path; its deny rule counted no SYN", ErrReachable
	}
	return "TCP connect " + e.Outcome.String() + "; its deny rule counted no SYN", ErrNotRefused
}

// Observations are the results of probing every readiness target, in the
// order the reachability probe requires.
type Observations struct {
	Denied    []netpolicy.DeniedDestinationObservation
	Permitted []netpolicy.PermittedDestinationObservation
	DNS       []netpolicy.DNSObservation
	// Outcomes holds the connect outcome of every destination target, for
	// error messages and logs.
	Outcomes map[netpolicy.Destination]Outcome
	// Evidence holds what the probe of each denied target observed.
	Evidence map[netpolicy.Destination]DeniedEvidence
	// Names holds the proofs of egress by name when the targets name
	// hosts: each resolved through the pinning resolver and reached, and
	// a name outside the allowlist refused.
	Names *netpolicy.NameObservations
}

// neverLeaves names the destinations to which a SYN from the sandbox
// namespace never reaches the enforcement path: the namespace answers
// them itself or refuses to send. No probe rule can observe such a target
// refused, and a reset from the namespace itself must not pass for a
// permitted target's answer.
func (p *Path) neverLeaves(a netip.Addr) string {
	switch {
	case a.IsLoopback():
		return "the sandbox namespace's own loopback answers it"
	case a.IsUnspecified():
		return "it means the sandbox namespace itself"
	case a.IsMulticast(), a == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return "TCP does not connect to a multicast or broadcast address"
	case p.Config.Link.Contains(a) && a != p.Config.Gateway():
		return "it lies on the link between the sandbox and the enforcement namespace"
	}
	return ""
}

// Probe runs every readiness target from inside the sandbox namespace,
// all at once: each denied target must be refused by the enforcement
// path, each permitted target reachable (see Outcome.Reachable), each DNS
// target must resolve through its resolver. Check reports the first
// failure.
//
// A denied target is proven by observation, not by waiting. Each denied
// probe binds its own source port (DeniedProbePortBase + index); before
// any of them sends, one batch inserts, at the head of the deny chain, a
// rule per probe that matches exactly that probe's SYN, counts it and
// answers it with a TCP reset (nftplan.ProbeRules). After every probe has
// ended, the rules are read back for their counters and deleted in one
// batch, and VerifyRuleset checks that the ruleset is exactly the plan
// again; Probe fails otherwise.
func (p *Path) Probe(ctx context.Context, t netpolicy.Targets, cfg ProbeConfig) (*Observations, error) {
	if len(t.Denied) > maxDeniedProbes {
		return nil, fmt.Errorf("running readiness probes: %d denied targets, at most %d", len(t.Denied), maxDeniedProbes)
	}
	// A reset from the sandbox namespace itself would pass for a remote
	// host's (permitted) and can never be a deny rule's (denied).
	for _, dst := range t.Permitted {
		if why := p.neverLeaves(dst.Address); why != "" {
			return nil, &netpolicy.TargetError{Kind: netpolicy.TargetPermitted, Target: dst.String(), Detail: why, Err: ErrNotProbeable}
		}
	}
	probes := make([]nftplan.DeniedProbe, len(t.Denied))
	for i, dst := range t.Denied {
		if why := p.neverLeaves(dst.Address); why != "" {
			return nil, &netpolicy.TargetError{Kind: netpolicy.TargetDenied, Target: dst.String(), Detail: why, Err: ErrNotProbeable}
		}
		probes[i] = nftplan.DeniedProbe{
			Source:      netip.AddrPortFrom(p.Config.SandboxAddress(), uint16(DeniedProbePortBase+i)),
			Destination: netip.AddrPortFrom(dst.Address, dst.Port),
		}
	}
	rules, err := p.Plan.ProbeRules(probes)
	if err != nil {
		return nil, fmt.Errorf("running readiness probes: %w", err)
	}

	obs := &Observations{Outcomes: map[netpolicy.Destination]Outcome{}, Evidence: map[netpolicy.Destination]DeniedEvidence{}}
	var mu sync.Mutex
	var wg sync.WaitGroup
	var firstErr error
	fail := func(err error) {
		mu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		mu.Unlock()
	}
	connectTo := func(src netip.AddrPort, dst netpolicy.Destination) {
		defer wg.Done()
		out, err := connect(ctx, p.Sandbox, src, netip.AddrPortFrom(dst.Address, dst.Port), cfg.ConnectTimeout)
		if err != nil {
			fail(fmt.Errorf("probing %v: %w", dst, err))
			return
		}
		mu.Lock()
		obs.Outcomes[dst] = out
		mu.Unlock()
	}
	if len(t.Hosts) > 0 {
		if !p.Plan.HasNames() {
			return nil, fmt.Errorf("running readiness probes: %d host targets, but the policy has no names", len(t.Hosts))
		}
		obs.Names = &netpolicy.NameObservations{Hosts: make([]netpolicy.HostObservation, len(t.Hosts))}
		for i, h := range t.Hosts {
			wg.Add(1)
			go func() {
				defer wg.Done()
				o, err := p.probeHost(ctx, h, cfg)
				if err != nil {
					fail(fmt.Errorf("probing host %v: %w", h, err))
					return
				}
				obs.Names.Hosts[i] = o
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			addrs, rc, err := resolve(ctx, p.Sandbox, p.Config.Gateway(), netpolicy.RefusalProbeName, cfg)
			if err != nil {
				fail(fmt.Errorf("probing the refusal of %q: %w", netpolicy.RefusalProbeName, err))
				return
			}
			obs.Names.Refusal = netpolicy.RefusalObservation{Name: netpolicy.RefusalProbeName, Refused: rc == AnswerRefused && len(addrs) == 0}
		}()
	}
	// Permitted, DNS and host probes match no probe rule: they start at
	// once.
	for _, dst := range t.Permitted {
		wg.Add(1)
		go connectTo(netip.AddrPort{}, dst)
	}
	for _, q := range t.DNS {
		wg.Add(1)
		go func() {
			defer wg.Done()
			addrs, err := Resolve(ctx, p.Sandbox, q.Resolver, q.Query, cfg)
			if err != nil {
				fail(fmt.Errorf("probing %v: %w", q, err))
				return
			}
			mu.Lock()
			obs.DNS = append(obs.DNS, netpolicy.DNSObservation{Resolver: q.Resolver, QueryName: q.Query, ResolvedAddresses: addrs})
			mu.Unlock()
		}()
	}
	if err := InstallProbeRules(p.Enforcement, p.Plan, rules); err != nil {
		wg.Wait()
		return nil, fmt.Errorf("running readiness probes: %w", err)
	}
	for i, dst := range t.Denied {
		wg.Add(1)
		go connectTo(probes[i].Source, dst)
	}
	wg.Wait()

	// The probe rules go, whatever the probes showed, and the ruleset must
	// be the plan again before anything is reported.
	counted, err := RemoveProbeRules(p.Enforcement, p.Plan)
	if err != nil {
		return nil, fmt.Errorf("removing readiness probe rules: %w", err)
	}
	if err := VerifyRuleset(p.Enforcement, p.Plan); err != nil {
		return nil, fmt.Errorf("after removing readiness probe rules: %w", err)
	}
	if firstErr != nil {
		return nil, fmt.Errorf("running readiness probes: %w", firstErr)
	}
	for _, d := range probes {
		if _, ok := counted[d]; !ok {
			return nil, fmt.Errorf("removing readiness probe rules: the rule of probe %v was not found: %w", d, ErrRulesetMismatch)
		}
	}

	for i, dst := range t.Denied {
		ev := DeniedEvidence{Probe: probes[i], Outcome: obs.Outcomes[dst], Refusals: counted[probes[i]]}
		obs.Evidence[dst] = ev
		obs.Denied = append(obs.Denied, netpolicy.DeniedDestinationObservation{Destination: dst, Unreachable: ev.Unreachable()})
	}
	for _, dst := range t.Permitted {
		obs.Permitted = append(obs.Permitted, netpolicy.PermittedDestinationObservation{Destination: dst, Reachable: obs.Outcomes[dst].Reachable()})
	}
	cmpDst := func(a, b netpolicy.Destination) int {
		if c := a.Address.Compare(b.Address); c != 0 {
			return c
		}
		return int(a.Port) - int(b.Port)
	}
	slices.SortFunc(obs.Denied, func(a, b netpolicy.DeniedDestinationObservation) int { return cmpDst(a.Destination, b.Destination) })
	slices.SortFunc(obs.Permitted, func(a, b netpolicy.PermittedDestinationObservation) int {
		return cmpDst(a.Destination, b.Destination)
	})
	slices.SortFunc(obs.DNS, func(a, b netpolicy.DNSObservation) int {
		if c := a.Resolver.Compare(b.Resolver); c != 0 {
			return c
		}
		return strings.Compare(a.QueryName, b.QueryName)
	})
	if obs.Names != nil {
		slices.SortFunc(obs.Names.Hosts, func(a, b netpolicy.HostObservation) int {
			if c := strings.Compare(a.Name, b.Name); c != 0 {
				return c
			}
			return int(a.Port) - int(b.Port)
		})
	}
	return obs, nil
}

// probeHost resolves a readiness host through the pinning resolver (the
// enforcement end), which pins what it answers, then connects to every
// address at once. Reached is the lowest address whose handshake
// completed or was refused by a host behind the path: no probe rule
// matches these connects, so a reset cannot be the path's own.
func (p *Path) probeHost(ctx context.Context, h netpolicy.HostTarget, cfg ProbeConfig) (netpolicy.HostObservation, error) {
	o := netpolicy.HostObservation{Name: h.Name, Port: h.Port}
	addrs, _, err := resolve(ctx, p.Sandbox, p.Config.Gateway(), h.Name, cfg)
	if err != nil {
		return o, err
	}
	o.ResolvedAddresses = addrs
	reached := make([]bool, len(addrs))
	var wg sync.WaitGroup
	errs := make([]error, len(addrs))
	for i, a := range addrs {
		// The pinning resolver answers a brokered name with the
		// enforcement end, where the credential broker listens: reaching
		// it proves the broker serves the host's port. No other name can
		// resolve there (the resolver admits no structural address).
		if why := p.neverLeaves(a); why != "" && a != p.Config.Gateway() {
			return o, &netpolicy.TargetError{Kind: netpolicy.TargetHost, Target: h.String(), Detail: a.String() + ": " + why, Err: ErrNotProbeable}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := connect(ctx, p.Sandbox, netip.AddrPort{}, netip.AddrPortFrom(a, h.Port), cfg.ConnectTimeout)
			reached[i], errs[i] = err == nil && out.Reachable(), err
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return o, err
	}
	for i, ok := range reached {
		if ok {
			o.Reached = addrs[i]
			break
		}
	}
	return o, nil
}

// Check returns the first target whose observation contradicts the
// policy, as a *netpolicy.TargetError naming it.
func (o *Observations) Check() error {
	for _, d := range o.Denied {
		if !d.Unreachable {
			detail, err := o.Evidence[d.Destination].failure()
			if err == nil {
				detail, err = "no proof recorded", ErrReachable
			}
			return &netpolicy.TargetError{Kind: netpolicy.TargetDenied, Target: d.Destination.String(), Detail: detail, Err: err}
		}
	}
	for _, p := range o.Permitted {
		if !p.Reachable {
			return &netpolicy.TargetError{Kind: netpolicy.TargetPermitted, Target: p.Destination.String(),
				Detail: "TCP connect " + o.Outcomes[p.Destination].String(), Err: ErrUnreachable}
		}
	}
	for _, q := range o.DNS {
		if len(q.ResolvedAddresses) == 0 {
			return &netpolicy.TargetError{Kind: netpolicy.TargetDNS,
				Target: netpolicy.DNSTarget{Resolver: q.Resolver, Query: q.QueryName}.String(),
				Detail: "no A record answered", Err: ErrNotResolved}
		}
	}
	if o.Names == nil {
		return nil
	}
	for _, h := range o.Names.Hosts {
		target := netpolicy.HostTarget{Name: h.Name, Port: h.Port}.String()
		if len(h.ResolvedAddresses) == 0 {
			return &netpolicy.TargetError{Kind: netpolicy.TargetHost, Target: target,
				Detail: "the pinning resolver answered no admitted A record", Err: ErrNotResolved}
		}
		if !h.Reached.IsValid() {
			return &netpolicy.TargetError{Kind: netpolicy.TargetHost, Target: target,
				Detail: fmt.Sprintf("no TCP handshake to %v completed", h.ResolvedAddresses), Err: ErrUnreachable}
		}
	}
	if !o.Names.Refusal.Refused {
		return &netpolicy.TargetError{Kind: netpolicy.TargetRefusal, Target: o.Names.Refusal.Name,
			Detail: "the pinning resolver did not answer REFUSED", Err: netpolicy.ErrNameNotRefused}
	}
	return nil
}
