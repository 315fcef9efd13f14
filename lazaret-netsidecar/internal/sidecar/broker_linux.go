package sidecar

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"time"

	"lazaret.dev/pkg/broker"
	brokerproxy "lazaret.dev/pkg/broker/proxy"
	"lazaret.dev/pkg/netpath"
	"lazaret.dev/pkg/netpolicy"
	"lazaret.dev/pkg/netsidecar"
	"lazaret.dev/pkg/pinresolver"
)

// brokerDialTimeout bounds the broker's upstream resolution and connect.
const brokerDialTimeout = 10 * time.Second

// brokerService is the credential broker: a TLS-terminating proxy on the
// enforcement end, one listener per brokered port, which the input chain
// admits from the sandbox and the pinning resolver sends brokered names
// to (docs/NETWORK.md, "Credential broker").
type brokerService struct {
	proxy     *brokerproxy.Proxy
	listeners []net.Listener
}

// startBroker decodes the broker's configuration and, when it brokers
// anything, listens on every brokered port of the policy. The
// configuration's destinations must be exactly the policy's brokered
// destinations: the policy is what the readiness evidence binds, so the
// broker serves nothing it does not name. Returns nil for nothing to
// broker.
func startBroker(log *slog.Logger, path *netpath.Path, policy *netpolicy.DerivedNetworkPolicy, decider *netpolicy.Decider, names *netsidecar.NameLog, encoded []byte) (*brokerService, error) {
	if len(encoded) == 0 {
		if len(policy.Brokered) > 0 {
			return nil, fmt.Errorf("the policy brokers %v but no broker configuration came: %w", policy.Brokered, netsidecar.ErrUnexpected)
		}
		return nil, nil
	}
	cfg, err := broker.DecodeConfig(encoded)
	if err != nil {
		return nil, fmt.Errorf("credential broker configuration: %w", err)
	}
	var want []netpolicy.BrokeredDestination
	for _, d := range cfg.Destinations() {
		want = append(want, netpolicy.BrokeredDestination{Host: d.Host, Port: d.Port})
	}
	if !slices.Equal(want, policy.Brokered) {
		return nil, fmt.Errorf("the broker configuration names destinations %v, the policy brokers %v: %w", want, policy.Brokered, netsidecar.ErrUnexpected)
	}
	proxy, err := brokerproxy.NewProxy(cfg, brokerproxy.Options{
		Dial: upstreamDialer(log, policy, decider),
		Log: func(ev brokerproxy.Event) {
			kind, level := netsidecar.BrokerBrokered, slog.LevelInfo
			if ev.Kind != brokerproxy.KindBrokered {
				kind, level = netsidecar.BrokerRefused, slog.LevelWarn
			}
			log.Log(context.Background(), level, "credential broker", "kind", ev.Kind, "host", pinresolver.EscapeName(ev.Host),
				"port", ev.Port, "credentials", ev.Credentials, "method", strconv.QuoteToASCII(ev.Method), "status", ev.Status, "reason", ev.Reason)
			if err := names.Write(netsidecar.NameLogRecord{
				Time: ev.Time, Kind: kind, Name: ev.Host, Port: ev.Port, Credentials: ev.Credentials,
				Method: ev.Method, Status: ev.Status, Reason: ev.Reason,
			}); err != nil {
				log.Warn("writing the name log", "error", err)
			}
		},
	})
	if err != nil {
		return nil, fmt.Errorf("starting the credential broker: %w", err)
	}
	b := &brokerService{proxy: proxy}
	for _, port := range policy.BrokeredPorts() {
		at := netip.AddrPortFrom(path.Config.Gateway(), port).String()
		l, err := net.Listen("tcp4", at)
		if err != nil {
			b.Close()
			return nil, fmt.Errorf("starting the credential broker on %s: %w", at, err)
		}
		b.listeners = append(b.listeners, l)
		go func() {
			if err := proxy.Serve(l, port); err != nil && !errors.Is(err, net.ErrClosed) {
				log.Error("credential broker stopped serving", "address", at, "error", err)
			}
		}()
	}
	log.Info("credential broker serving", "address", path.Config.Gateway(), "destinations", policy.Brokered)
	return b, nil
}

// Close stops the listeners and the open connections.
func (b *brokerService) Close() {
	if b == nil {
		return
	}
	for _, l := range b.listeners {
		l.Close()
	}
	b.proxy.Close()
}

// upstreamDialer connects the broker to a brokered host the way the
// pinning resolver would let the sandbox: the name resolved by the
// policy's upstream resolver from the enforcement namespace, every
// address admitted by the policy as a learned address (no private,
// structural, host or denied address), the first that connects used.
func upstreamDialer(log *slog.Logger, policy *netpolicy.DerivedNetworkPolicy, decider *netpolicy.Decider) func(ctx context.Context, host string, port uint16) (net.Conn, error) {
	var d net.Dialer
	upstream := net.JoinHostPort(policy.NameUpstream.String(), strconv.Itoa(netpolicy.DNSPort))
	res := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return d.DialContext(ctx, network, upstream)
	}}
	dial := func(ctx context.Context, host string, port uint16) (net.Conn, error) {
		if !policy.IsBrokered(host) || !policy.DecideName(host).Allowed {
			return nil, fmt.Errorf("%s is not a brokered host the policy allows", host)
		}
		ctx, cancel := context.WithTimeout(ctx, brokerDialTimeout)
		defer cancel()
		addrs, err := res.LookupNetIP(ctx, "ip4", host)
		if err != nil {
			return nil, fmt.Errorf("resolving %s through %s: %w", host, upstream, err)
		}
		var errs []error
		for _, a := range addrs {
			a = a.Unmap()
			if dec, ok := decider.AdmitLearned(a); !ok {
				errs = append(errs, fmt.Errorf("%v: %v", a, dec))
				continue
			}
			c, err := d.DialContext(ctx, "tcp4", netip.AddrPortFrom(a, port).String())
			if err == nil {
				return c, nil
			}
			errs = append(errs, err)
		}
		if len(errs) == 0 {
			return nil, fmt.Errorf("%s has no IPv4 address", host)
		}
		return nil, fmt.Errorf("connecting to %s:%d: %w", host, port, errors.Join(errs...))
	}
	// The proxy answers the sandbox with a plain 502; why is logged here.
	return func(ctx context.Context, host string, port uint16) (net.Conn, error) {
		c, err := dial(ctx, host, port)
		if err != nil {
			log.Warn("credential broker could not reach a destination", "host", pinresolver.EscapeName(host), "port", port, "error", err)
		}
		return c, err
	}
}
