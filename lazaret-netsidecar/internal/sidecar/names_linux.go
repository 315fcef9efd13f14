package sidecar

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"time"

	"lazaret.dev/pkg/netpath"
	"lazaret.dev/pkg/netpolicy"
	"lazaret.dev/pkg/netsidecar"
	"lazaret.dev/pkg/pinresolver"
)

// nameService is the pinning resolver of a policy with names, listening
// for the sandbox on the enforcement end's port 53 (UDP and TCP), which
// the input chain admits from the sandbox and nothing else.
type nameService struct {
	udp    net.PacketConn
	tcp    net.Listener
	pinner *netpath.Pinner
}

// startNames starts the pinning resolver for policy on path's gateway.
// Its upstream is the policy's name upstream, reached from the
// enforcement namespace itself, through the connectivity helper: the
// sandbox never talks to it. Every decision is logged (the name escaped)
// and recorded in names.
// A brokered name is answered with the enforcement end's address, where
// brk listens.
func startNames(log *slog.Logger, path *netpath.Path, policy *netpolicy.DerivedNetworkPolicy, decider *netpolicy.Decider, names *netsidecar.NameLog, pinner *netpath.Pinner, brk *brokerService) (*nameService, error) {
	srv, err := pinresolver.New(pinresolver.Config{
		Names: func(name string) pinresolver.Verdict {
			d := decider.DecideName(name)
			return pinresolver.Verdict{Allowed: d.Allowed, Rule: d.Rule.Pattern}
		},
		Upstream: netip.AddrPortFrom(policy.NameUpstream, netpolicy.DNSPort),
		Local: func(name string) (netip.Addr, bool) {
			return path.Config.Gateway(), brk != nil && policy.IsBrokered(name)
		},
		Admit: func(a netip.Addr) (bool, string) {
			d, ok := decider.AdmitLearned(a)
			return ok, d.String()
		},
		// The client may cache an answer for its whole TTL from when it
		// arrives, a little after the pin began: the grace covers that.
		Pin: func(addrs []netip.Addr, ttl time.Duration) error { return pinner.Pin(addrs, ttl+netsidecar.PinGrace) },
		Event: func(ev pinresolver.Event) {
			level := slog.LevelInfo
			if ev.Kind != pinresolver.Pinned && ev.Kind != pinresolver.Unpinned {
				level = slog.LevelWarn
			}
			log.Log(context.Background(), level, "pinning resolver", "event", ev.String())
			if err := names.Write(netsidecar.NameLogRecord{
				Time: ev.Time, Kind: ev.Kind.String(), Name: ev.Name, Rule: ev.Rule,
				Addresses: ev.Addresses, TTLMillis: ev.TTL.Milliseconds(), Reason: ev.Reason,
			}); err != nil {
				log.Warn("writing the name log", "error", err)
			}
		},
	})
	if err != nil {
		return nil, fmt.Errorf("starting the pinning resolver: %w", err)
	}
	at := netip.AddrPortFrom(path.Config.Gateway(), netpolicy.DNSPort).String()
	udp, err := net.ListenPacket("udp4", at)
	if err != nil {
		return nil, fmt.Errorf("starting the pinning resolver on %s/udp: %w", at, err)
	}
	tcp, err := net.Listen("tcp4", at)
	if err != nil {
		udp.Close()
		return nil, fmt.Errorf("starting the pinning resolver on %s/tcp: %w", at, err)
	}
	s := &nameService{udp: udp, tcp: tcp, pinner: pinner}
	go func() {
		if err := srv.ServeUDP(udp); err != nil && !errors.Is(err, net.ErrClosed) {
			log.Error("pinning resolver stopped serving UDP", "error", err)
		}
	}()
	go func() {
		if err := srv.ServeTCP(tcp); err != nil && !errors.Is(err, net.ErrClosed) {
			log.Error("pinning resolver stopped serving TCP", "error", err)
		}
	}()
	log.Info("pinning resolver serving", "address", at, "upstream", policy.NameUpstream,
		"rules", nameRules(policy))
	return s, nil
}

func (s *nameService) Close() {
	if s == nil {
		return
	}
	s.udp.Close()
	s.tcp.Close()
	s.pinner.Close()
}

func nameRules(p *netpolicy.DerivedNetworkPolicy) string {
	var b strings.Builder
	for i, r := range p.NameRules {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(r.String())
	}
	return b.String()
}

// pinSnapshot lists the kernel's pins for a name log that starts over.
func pinSnapshot(log *slog.Logger, pinner *netpath.Pinner) func() []netsidecar.NamePin {
	return func() []netsidecar.NamePin {
		pins, err := pinner.Pins()
		if err != nil {
			log.Warn("reading pins for the name log", "error", err)
			return nil
		}
		out := make([]netsidecar.NamePin, len(pins))
		for i, p := range pins {
			out[i] = netsidecar.NamePin{Address: p.Address, Expires: p.Expires.Truncate(time.Millisecond)}
		}
		return out
	}
}
