package netpolicy

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// BrokeredDestination is a host name and TCP port whose TLS connections the
// credential broker terminates (docs/NETWORK.md, "Credential broker"): the
// pinning resolver answers the name with the broker's address, and the
// input chain admits TCP from the sandbox to that address on the port.
type BrokeredDestination struct {
	Host string
	Port uint16
}

func (b BrokeredDestination) String() string { return fmt.Sprintf("%s:%d", b.Host, b.Port) }

// Errors of brokered destinations.
var (
	ErrBrokeredInV1    = errors.New("only a v2 policy has brokered destinations")
	ErrBrokeredHost    = errors.New("a brokered host must be a strict DNS name that the name rules allow")
	ErrBrokeredPort    = errors.New("a brokered port must be 1 to 65535")
	ErrBrokeredTooMany = errors.New("at most 64 brokered destinations")
	ErrBrokeredEmpty   = errors.New("an empty brokered section is not canonical: the encoding leaves it out")
)

// MaxBrokered bounds the brokered destinations of one policy.
const MaxBrokered = 64

// minBrokeredSize is the smallest encoding of one brokered destination.
const minBrokeredSize = 1 + 1 + 1

// BrokeredPorts returns the distinct ports of the brokered destinations,
// sorted.
func (p *DerivedNetworkPolicy) BrokeredPorts() []uint16 {
	var ports []uint16
	for _, b := range p.Brokered {
		ports = append(ports, b.Port)
	}
	slices.Sort(ports)
	return slices.Compact(ports)
}

// IsBrokered reports whether the pinning resolver answers name with the
// broker's address: some brokered destination has that host.
func (p *DerivedNetworkPolicy) IsBrokered(name string) bool {
	for _, b := range p.Brokered {
		if b.Host == name {
			return true
		}
	}
	return false
}

// WithBrokered returns a copy of a v2 policy that also brokers dests (in
// any order; they are sorted and checked).
func (p *DerivedNetworkPolicy) WithBrokered(dests []BrokeredDestination) (*DerivedNetworkPolicy, error) {
	q := *p
	q.Brokered = slices.Clone(dests)
	slices.SortFunc(q.Brokered, compareBrokered)
	if err := q.Validate(); err != nil {
		return nil, fmt.Errorf("deriving network policy: %w", err)
	}
	return &q, nil
}

func compareBrokered(a, b BrokeredDestination) int {
	return cmp.Or(strings.Compare(a.Host, b.Host), cmp.Compare(a.Port, b.Port))
}

// validateBrokered checks the canonical form of the brokered section:
// v2 only, at most MaxBrokered, sorted by (host, port) without duplicates,
// each host a strict name the name rules allow, each port non-zero.
func (p *DerivedNetworkPolicy) validateBrokered() error {
	if len(p.Brokered) == 0 {
		return nil
	}
	if p.SchemaID != PolicySchemaIDV2 {
		return fieldErr("brokered", nil, ErrBrokeredInV1)
	}
	if len(p.Brokered) > MaxBrokered {
		return fieldErr("brokered", len(p.Brokered), ErrBrokeredTooMany)
	}
	for i, b := range p.Brokered {
		if CheckHostName(b.Host) != nil || !p.DecideName(b.Host).Allowed {
			return fieldErr(at("brokered", i), b.Host, ErrBrokeredHost)
		}
		if b.Port == 0 {
			return fieldErr(at("brokered", i), b.Port, ErrBrokeredPort)
		}
		if i > 0 {
			switch c := compareBrokered(p.Brokered[i-1], b); {
			case c == 0:
				return fieldErr(at("brokered", i), b, ErrDuplicate)
			case c > 0:
				return fieldErr(at("brokered", i), b, ErrUnsorted)
			}
		}
	}
	return nil
}
