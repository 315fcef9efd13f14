package control

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"path/filepath"
	"slices"

	"lazaret.dev/pkg/postcard"
)

// PortForward is one published port: a TCP connection to HostAddr:HostPort
// on the host reaches SandboxPort in the sandbox (docs/NETWORK.md, "Port
// publishing").
type PortForward struct {
	HostAddr    netip.Addr // IPv4
	HostPort    uint16
	SandboxPort uint16
}

// Host is the host end, ADDR:PORT.
func (f PortForward) Host() string { return netip.AddrPortFrom(f.HostAddr, f.HostPort).String() }

func (f PortForward) String() string {
	return fmt.Sprintf("%s -> sandbox port %d", f.Host(), f.SandboxPort)
}

// MaxPortForwards bounds the forwards of one generation.
const MaxPortForwards = 64

// ErrPorts means a list of forwards is not in canonical form.
var ErrPorts = errors.New("invalid port forwards")

func comparePorts(a, b PortForward) int {
	if c := a.HostAddr.Compare(b.HostAddr); c != 0 {
		return c
	}
	return cmp.Compare(a.HostPort, b.HostPort)
}

// SortPorts sorts forwards into their canonical order: by host address,
// then host port.
func SortPorts(fs []PortForward) { slices.SortFunc(fs, comparePorts) }

// CheckPorts checks that fs is canonical: at most MaxPortForwards, each
// with an IPv4 host address and nonzero ports, sorted by host end, and no
// host end twice. Several host ends may lead to one sandbox port.
func CheckPorts(fs []PortForward) error {
	if len(fs) > MaxPortForwards {
		return fmt.Errorf("%w: %d forwards, at most %d", ErrPorts, len(fs), MaxPortForwards)
	}
	for i, f := range fs {
		switch {
		case !f.HostAddr.Is4():
			return fmt.Errorf("%w: forward %d: host address %v is not IPv4", ErrPorts, i, f.HostAddr)
		case f.HostPort == 0 || f.SandboxPort == 0:
			return fmt.Errorf("%w: forward %d (%v): port 0", ErrPorts, i, f)
		case i > 0 && comparePorts(fs[i-1], f) == 0:
			return fmt.Errorf("%w: host end %s twice", ErrPorts, f.Host())
		case i > 0 && comparePorts(fs[i-1], f) > 0:
			return fmt.Errorf("%w: forward %d (%v) out of order", ErrPorts, i, f)
		}
	}
	return nil
}

// EncodePorts is the Postcard encoding of canonical forwards:
//
//	seq<(host_addr:[4]u8  host_port:u16  sandbox_port:u16)>
func EncodePorts(fs []PortForward) ([]byte, error) {
	if err := CheckPorts(fs); err != nil {
		return nil, err
	}
	e := postcard.NewEncoder(1 + 9*len(fs))
	e.SeqLen(len(fs))
	for _, f := range fs {
		a := f.HostAddr.As4()
		e.Fixed(a[:])
		e.U16(f.HostPort)
		e.U16(f.SandboxPort)
	}
	return e.Bytes(), nil
}

// DecodePorts decodes EncodePorts's bytes and refuses anything not
// canonical.
func DecodePorts(b []byte) ([]PortForward, error) {
	d := postcard.NewDecoder(b)
	n := d.SeqLen(6)
	if d.Err() == nil && n > MaxPortForwards {
		return nil, fmt.Errorf("%w: %d forwards, at most %d", ErrPorts, n, MaxPortForwards)
	}
	var fs []PortForward
	for i := 0; i < n && d.Err() == nil; i++ {
		var a [4]byte
		d.Fixed(a[:])
		f := PortForward{HostAddr: netip.AddrFrom4(a), HostPort: d.U16()}
		f.SandboxPort = d.U16()
		fs = append(fs, f)
	}
	if err := d.Finish(); err != nil {
		return nil, fmt.Errorf("decoding port forwards: %w", err)
	}
	if err := CheckPorts(fs); err != nil {
		return nil, err
	}
	return fs, nil
}

// PublishedPortsName is the file in a Domain's runtime directory that
// records the running generation's published ports (EncodePorts),
// replaced atomically by the coordinator on every change and removed when
// its network is released or recovered. `lazaret-cli status` shows it.
const PublishedPortsName = "published-ports"

// WritePublishedPorts records fs in dir.
func WritePublishedPorts(dir string, fs []PortForward) error {
	b, err := EncodePorts(fs)
	if err != nil {
		return err
	}
	return writeDomainFile(dir, PublishedPortsName, b)
}

// ReadPublishedPorts reads dir's record; no record is no forward.
func ReadPublishedPorts(dir string) ([]PortForward, error) {
	b, err := readDomainFile(dir, PublishedPortsName, 16<<10)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	out, err := DecodePorts(b)
	if err != nil {
		return nil, fmt.Errorf("%q: %w", filepath.Join(dir, PublishedPortsName), err)
	}
	return out, nil
}

// Ports is the coordinator's side of port publishing.
type Ports interface {
	// Publish adds forwards and returns every forward now published. A
	// forward already published is no error; a host end that cannot be
	// bound refuses the whole request, naming the port.
	Publish(fs []PortForward) ([]PortForward, error)
}
