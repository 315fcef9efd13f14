// Package sidecar is lazaret-netsidecar's work: receive the policy and the
// start message, build the enforcement path, report it, wait for the
// connectivity helper, prove readiness, then hold the namespaces until the
// parent goes away.
package sidecar

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"lazaret.dev/pkg/netpath"
	"lazaret.dev/pkg/netpolicy"
	"lazaret.dev/pkg/netsidecar"
	"lazaret.dev/pkg/nftplan"
)

// Timeouts of the exchange.
const (
	startTimeout    = 10 * time.Second
	helperTimeout   = 30 * time.Second
	upstreamTimeout = 10 * time.Second
)

// Run serves one generation. It takes ownership of channel and policy. It
// returns when the parent closes the channel or ctx ends; an error before
// readiness has also been sent to the parent as Failed. settle, when not
// nil, is called once readiness is sent: what installing the policy and
// proving readiness allocated is garbage then, and main returns it to the
// operating system (helpermain.Settle).
func Run(ctx context.Context, log *slog.Logger, channel *netsidecar.Channel, policy, names, broker *os.File, settle func()) error {
	defer channel.Close()
	defer names.Close()
	path, svc, brk, err := serve(ctx, log, channel, policy, names, broker)
	if err != nil {
		channel.Send(&netsidecar.Failed{Message: err.Error()})
		return err
	}
	defer path.Close()
	defer svc.Close()
	defer brk.Close()
	if settle != nil {
		settle()
	}
	// Hold the namespaces until the parent goes away, and relay the
	// ports it publishes.
	rel := newRelays(log)
	defer rel.Close()
	for {
		m, f, err := channel.ReceiveFile(ctx)
		if errors.Is(err, io.EOF) || ctx.Err() != nil {
			log.Info("control channel closed; releasing the enforcement path")
			return nil
		}
		if err != nil {
			return fmt.Errorf("holding enforcement path: %w", err)
		}
		pub, ok := m.(*netsidecar.Publish)
		if !ok {
			if f != nil {
				f.Close()
			}
			return fmt.Errorf("holding enforcement path: control message %T: %w", m, netsidecar.ErrUnexpected)
		}
		if err := rel.add(pub, f); err != nil {
			if err := channel.Send(&netsidecar.Failed{Message: fmt.Sprintf("publishing host port %d to sandbox port %d: %v", pub.HostPort, pub.SandboxPort, err)}); err != nil {
				return err
			}
			continue
		}
		if err := channel.Send(&netsidecar.Published{HostPort: pub.HostPort, SandboxPort: pub.SandboxPort}); err != nil {
			return err
		}
	}
}

func serve(ctx context.Context, log *slog.Logger, channel *netsidecar.Channel, policyFile, namesFile, brokerFile *os.File) (*netpath.Path, *nameService, *brokerService, error) {
	path, svc, brk, err := serveNetwork(ctx, log, channel, policyFile, namesFile, brokerFile)
	if err != nil {
		svc.Close()
		brk.Close()
		if path != nil {
			path.Close()
		}
		return nil, nil, nil, err
	}
	return path, svc, brk, nil
}

// serveNetwork builds the enforcement path and proves readiness; on an
// error the caller closes what it returned.
func serveNetwork(ctx context.Context, log *slog.Logger, channel *netsidecar.Channel, policyFile, namesFile, brokerFile *os.File) (path *netpath.Path, svc *nameService, brk *brokerService, err error) {
	sctx, cancel := context.WithTimeout(ctx, startTimeout)
	start, err := netsidecar.Expect[*netsidecar.Start](sctx, channel)
	cancel()
	if err != nil {
		return nil, nil, nil, fmt.Errorf("reading start message: %w", err)
	}
	encoded, err := netsidecar.ReadSealedPolicy(policyFile)
	policyFile.Close()
	if err != nil {
		return nil, nil, nil, err
	}
	brokered, err := netsidecar.ReadSealedBroker(brokerFile)
	brokerFile.Close()
	if err != nil {
		return nil, nil, nil, err
	}
	if got := netpolicy.DigestOfEncoding(encoded); got != start.PolicyDigest {
		return nil, nil, nil, fmt.Errorf("sealed policy digest %v, start message names %v: %w", got, start.PolicyDigest, netsidecar.ErrDigest)
	}
	policy, err := netpolicy.DecodePolicy(encoded)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("sealed policy: %w", err)
	}
	decider, err := netpolicy.NewDecider(policy, start.HostAddresses)
	if err != nil {
		return nil, nil, nil, err
	}
	if err := decider.CheckTargets(start.Targets); err != nil {
		return nil, nil, nil, err
	}
	link := netpath.Config{}.WithDefaults()
	plan, err := nftplan.New(policy, nftplan.Config{
		SandboxInterface:  netpath.DefaultSandboxInterface,
		UpstreamInterface: start.UpstreamInterface,
		HostAddresses:     start.HostAddresses,
		PinningResolver:   netpath.DefaultLink.Addr().Next(),
		// Replies of the port relay's connections to the sandbox.
		RelayFrom: link.SandboxAddress(),
		RelayTo:   link.Gateway(),
	})
	if err != nil {
		return nil, nil, nil, err
	}
	enforcement, err := netpath.CurrentNetNS()
	if err != nil {
		return nil, nil, nil, err
	}
	path, err = netpath.Build(log, enforcement, plan, netpath.Config{SandboxInterface: netpath.DefaultSandboxInterface})
	if err != nil {
		enforcement.Close()
		return nil, nil, nil, err
	}
	fail := func(err error) (*netpath.Path, *nameService, *brokerService, error) { return path, svc, brk, err }
	routes, err := path.Routes()
	if err != nil {
		return fail(err)
	}
	sandboxPath := fmt.Sprintf("/proc/%d/fd/%d", os.Getpid(), path.Sandbox.Fd())
	log.Info("enforcement path installed", "policy_digest", start.PolicyDigest, "enforcement_namespace", path.EnforcementID,
		"sandbox_netns", sandboxPath, "routes", routes)
	if err := channel.Send(&netsidecar.Installed{
		PolicyDigest:         start.PolicyDigest,
		EnforcementNamespace: path.EnforcementID,
		SandboxNamespace:     path.SandboxID,
		SandboxNetNSPath:     sandboxPath,
		ObservedRoutes:       routes,
		Operations:           uint32(len(plan.Ops)),
	}); err != nil {
		return fail(err)
	}

	hctx, cancel := context.WithTimeout(ctx, helperTimeout)
	helper, err := netsidecar.Expect[*netsidecar.HelperStarted](hctx, channel)
	cancel()
	if err != nil {
		return fail(fmt.Errorf("waiting for the connectivity helper: %w", err))
	}
	uctx, cancel := context.WithTimeout(ctx, upstreamTimeout)
	err = path.WaitUpstream(uctx)
	cancel()
	if err != nil {
		return fail(err)
	}
	// The ruleset must still be the planned one after the helper attached.
	if err := netpath.VerifyRuleset(enforcement, plan); err != nil {
		return fail(err)
	}
	if policy.HasNames() {
		pinner, err := netpath.NewPinner(enforcement, plan)
		if err != nil {
			return fail(err)
		}
		names := netsidecar.NewNameLog(namesFile, 0, pinSnapshot(log, pinner))
		// The broker listens before the resolver sends anyone to it, and
		// before readiness probes a brokered host.
		if brk, err = startBroker(log, path, policy, decider, names, brokered); err != nil {
			return fail(err)
		}
		if svc, err = startNames(log, path, policy, decider, names, pinner, brk); err != nil {
			return fail(err)
		}
	} else if len(brokered) > 0 {
		return fail(fmt.Errorf("a broker configuration came with a policy without host names: %w", netsidecar.ErrUnexpected))
	}

	cfg := netpath.DefaultProbeConfig
	if start.ConnectTimeoutMillis != 0 {
		cfg.ConnectTimeout = time.Duration(start.ConnectTimeoutMillis) * time.Millisecond
	}
	began := time.Now()
	obs, err := path.Probe(ctx, start.Targets, cfg)
	if err != nil {
		return fail(err)
	}
	for _, d := range obs.Denied {
		ev := obs.Evidence[d.Destination]
		log.Info("denied target probed", "target", d.Destination.String(), "probe", ev.Probe.String(),
			"outcome", ev.Outcome.String(), "refused_by_deny_rule", ev.Refusals, "unreachable", d.Unreachable)
	}
	if err := obs.Check(); err != nil {
		return fail(err)
	}
	log.Info("readiness proven; probe rules removed and the ruleset verified", "took", time.Since(began))
	att := netpolicy.NetworkReadinessAttestation{
		SchemaID:                 netpolicy.AttestationSchemaID,
		DomainID:                 start.DomainID,
		GenerationID:             start.GenerationID,
		ConfigurationFingerprint: start.ConfigurationFingerprint,
		NetworkSidecarID:         start.NetworkSidecarID,
		DerivedPolicyDigest:      start.PolicyDigest,
		EnforcementNamespace:     path.EnforcementID,
		RuntimeSupervisor:        start.RuntimeSupervisor,
		ConnectivityHelper:       helper.ConnectivityHelper,
		Observation: netpolicy.NetworkObservation{
			PolicyDelivery: netpolicy.SealedMemfd,
			HelperReady:    true,
			ObservedRoutes: routes,
			RoutesAttested: true,
		},
	}
	probe := netpolicy.NetworkReachabilityProbe{
		DomainID:             start.DomainID,
		GenerationID:         start.GenerationID,
		EnforcementNamespace: path.EnforcementID,
		Denied:               obs.Denied,
		Permitted:            obs.Permitted,
		DNS:                  obs.DNS,
		Names:                obs.Names,
	}
	attBytes, err := att.Encode()
	if err != nil {
		return fail(fmt.Errorf("encoding readiness attestation: %w", err))
	}
	probeBytes, err := probe.Encode()
	if err != nil {
		return fail(fmt.Errorf("encoding reachability probe: %w", err))
	}
	if err := channel.Send(&netsidecar.Ready{Attestation: attBytes, Probe: probeBytes}); err != nil {
		return fail(err)
	}
	return path, svc, brk, nil
}
