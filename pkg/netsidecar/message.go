package netsidecar

import (
	"errors"
	"fmt"
	"net/netip"

	"lazaret.dev/pkg/hostid"
	"lazaret.dev/pkg/ids"
	"lazaret.dev/pkg/netpolicy"
	"lazaret.dev/pkg/postcard"
)

// Errors of the control channel; test with errors.Is.
var (
	ErrUnexpected     = errors.New("unexpected message")
	ErrFailed         = errors.New("network sidecar failed")
	ErrTooLarge       = errors.New("message exceeds the channel limit")
	ErrNotIPv4        = errors.New("address is not IPv4")
	ErrDigest         = errors.New("policy digest does not match the sealed policy")
	ErrNotSealed      = errors.New("policy memfd is not sealed against writing, growing, shrinking and resealing")
	ErrPolicyTooLarge = errors.New("sealed policy exceeds the size limit")
	ErrBrokerTooLarge = errors.New("sealed broker configuration exceeds the size limit")
)

// MaxMessage bounds one control message.
const MaxMessage = 256 << 10

// Message variants on the wire.
const (
	kindStart uint32 = iota
	kindInstalled
	kindHelperStarted
	kindReady
	kindFailed
	kindPublish
	kindPublished
	numKinds
)

// Message is one of Start, Installed, HelperStarted, Ready, Failed,
// Publish, Published.
type Message interface {
	postcard.Marshaler
	postcard.Unmarshaler
	kind() uint32
}

// Start opens the exchange. The policy itself travels in the sealed memfd;
// PolicyDigest is the digest the parent derived, which the sidecar checks.
type Start struct {
	DomainID                 ids.DomainID
	GenerationID             ids.GenerationID
	ConfigurationFingerprint ids.Digest
	NetworkSidecarID         ids.SidecarID
	PolicyDigest             ids.Digest
	// HostAddresses are the host's own IPv4 addresses, always dropped.
	HostAddresses []netip.Addr
	// UpstreamInterface is the helper's interface in the enforcement
	// namespace ("tap0" for slirp4netns).
	UpstreamInterface string
	Targets           netpolicy.Targets
	RuntimeSupervisor hostid.PidfsProcessIdentityV1
	// ConnectTimeoutMillis bounds each TCP probe; 0 means the default
	// (netpath.DefaultProbeConfig, 800 ms). A denied target's probe is
	// answered by its probe rule at once; the bound is how long a
	// permitted target may take to answer.
	ConnectTimeoutMillis uint32
}

// Installed reports the installed enforcement path.
type Installed struct {
	PolicyDigest         ids.Digest
	EnforcementNamespace hostid.NamespaceIdentity
	SandboxNamespace     hostid.NamespaceIdentity
	// SandboxNetNSPath is the path runsc's OCI spec names for the
	// sandbox's network namespace: a descriptor of the sidecar under
	// /proc. The opener checks SandboxNamespace against what it opened.
	SandboxNetNSPath string
	ObservedRoutes   []netip.Prefix
	// Operations is the number of nftables operations in the batch.
	Operations uint32
}

// HelperStarted tells the sidecar that the connectivity helper runs.
type HelperStarted struct {
	ConnectivityHelper hostid.PidfsProcessIdentityV1
}

// Ready carries the encoded attestation and probe, for netpolicy.Bind.
type Ready struct {
	Attestation []byte
	Probe       []byte
}

// Failed ends the exchange with one sentence.
type Failed struct {
	Message string
}

// Publish, after Ready, hands the sidecar a listening TCP socket bound on
// the host (passed with the packet, SCM_RIGHTS): the sidecar relays every
// connection accepted on it to SandboxPort of the sandbox, from the
// enforcement namespace. HostPort is the socket's port, for the log.
type Publish struct {
	HostPort    uint16
	SandboxPort uint16
}

// Published answers Publish once the relay accepts connections.
type Published struct {
	HostPort    uint16
	SandboxPort uint16
}

func (*Publish) kind() uint32   { return kindPublish }
func (*Published) kind() uint32 { return kindPublished }

func (m *Publish) MarshalPostcard(e *postcard.Encoder) { e.U16(m.HostPort); e.U16(m.SandboxPort) }
func (m *Publish) UnmarshalPostcard(d *postcard.Decoder) {
	m.HostPort = d.U16()
	m.SandboxPort = d.U16()
}
func (m *Published) MarshalPostcard(e *postcard.Encoder) { e.U16(m.HostPort); e.U16(m.SandboxPort) }
func (m *Published) UnmarshalPostcard(d *postcard.Decoder) {
	m.HostPort = d.U16()
	m.SandboxPort = d.U16()
}

func (*Start) kind() uint32         { return kindStart }
func (*Installed) kind() uint32     { return kindInstalled }
func (*HelperStarted) kind() uint32 { return kindHelperStarted }
func (*Ready) kind() uint32         { return kindReady }
func (*Failed) kind() uint32        { return kindFailed }

func writeAddr(e *postcard.Encoder, a netip.Addr) {
	b := a.As4()
	e.Fixed(b[:])
}

func readAddr(d *postcard.Decoder) netip.Addr {
	var b [4]byte
	d.Fixed(b[:])
	return netip.AddrFrom4(b)
}

func writeDst(e *postcard.Encoder, dst netpolicy.Destination) {
	writeAddr(e, dst.Address)
	e.U16(dst.Port)
}

func readDst(d *postcard.Decoder) netpolicy.Destination {
	a := readAddr(d)
	return netpolicy.Destination{Address: a, Port: d.U16()}
}

// MarshalPostcard writes the fields in declaration order; addresses are
// four bytes, targets three sequences; the readiness hosts (name, port)
// come last.
func (m *Start) MarshalPostcard(e *postcard.Encoder) {
	e.Fixed(m.DomainID[:])
	e.Fixed(m.GenerationID[:])
	e.Fixed(m.ConfigurationFingerprint[:])
	e.Fixed(m.NetworkSidecarID[:])
	e.Fixed(m.PolicyDigest[:])
	e.SeqLen(len(m.HostAddresses))
	for _, a := range m.HostAddresses {
		writeAddr(e, a)
	}
	e.String(m.UpstreamInterface)
	e.SeqLen(len(m.Targets.Denied))
	for _, d := range m.Targets.Denied {
		writeDst(e, d)
	}
	e.SeqLen(len(m.Targets.Permitted))
	for _, d := range m.Targets.Permitted {
		writeDst(e, d)
	}
	e.SeqLen(len(m.Targets.DNS))
	for _, q := range m.Targets.DNS {
		writeAddr(e, q.Resolver)
		e.String(q.Query)
	}
	m.RuntimeSupervisor.MarshalPostcard(e)
	e.U32(m.ConnectTimeoutMillis)
	e.SeqLen(len(m.Targets.Hosts))
	for _, h := range m.Targets.Hosts {
		e.String(h.Name)
		e.U16(h.Port)
	}
}

// UnmarshalPostcard reads what MarshalPostcard writes.
func (m *Start) UnmarshalPostcard(d *postcard.Decoder) {
	d.Fixed(m.DomainID[:])
	d.Fixed(m.GenerationID[:])
	d.Fixed(m.ConfigurationFingerprint[:])
	d.Fixed(m.NetworkSidecarID[:])
	d.Fixed(m.PolicyDigest[:])
	n := d.SeqLen(4)
	m.HostAddresses = nil
	for range n {
		m.HostAddresses = append(m.HostAddresses, readAddr(d))
	}
	m.UpstreamInterface = d.String()
	m.Targets = netpolicy.Targets{}
	for range d.SeqLen(5) {
		m.Targets.Denied = append(m.Targets.Denied, readDst(d))
	}
	for range d.SeqLen(5) {
		m.Targets.Permitted = append(m.Targets.Permitted, readDst(d))
	}
	for range d.SeqLen(5) {
		a := readAddr(d)
		m.Targets.DNS = append(m.Targets.DNS, netpolicy.DNSTarget{Resolver: a, Query: d.String()})
	}
	m.RuntimeSupervisor.UnmarshalPostcard(d)
	m.ConnectTimeoutMillis = d.U32()
	for range d.SeqLen(2) {
		name := d.String()
		m.Targets.Hosts = append(m.Targets.Hosts, netpolicy.HostTarget{Name: name, Port: d.U16()})
	}
}

// MarshalPostcard writes the fields in declaration order; a route is four
// address bytes and a u8 length.
func (m *Installed) MarshalPostcard(e *postcard.Encoder) {
	e.Fixed(m.PolicyDigest[:])
	m.EnforcementNamespace.MarshalPostcard(e)
	m.SandboxNamespace.MarshalPostcard(e)
	e.String(m.SandboxNetNSPath)
	e.SeqLen(len(m.ObservedRoutes))
	for _, r := range m.ObservedRoutes {
		writeAddr(e, r.Addr())
		e.U8(uint8(r.Bits()))
	}
	e.U32(m.Operations)
}

// UnmarshalPostcard reads what MarshalPostcard writes.
func (m *Installed) UnmarshalPostcard(d *postcard.Decoder) {
	d.Fixed(m.PolicyDigest[:])
	m.EnforcementNamespace.UnmarshalPostcard(d)
	m.SandboxNamespace.UnmarshalPostcard(d)
	m.SandboxNetNSPath = d.String()
	m.ObservedRoutes = nil
	for range d.SeqLen(5) {
		a := readAddr(d)
		bits := d.U8()
		if bits > 32 {
			d.Fail("observed_routes", fmt.Errorf("prefix length %d exceeds 32", bits))
			return
		}
		m.ObservedRoutes = append(m.ObservedRoutes, netip.PrefixFrom(a, int(bits)))
	}
	m.Operations = d.U32()
}

func (m *HelperStarted) MarshalPostcard(e *postcard.Encoder) { m.ConnectivityHelper.MarshalPostcard(e) }
func (m *HelperStarted) UnmarshalPostcard(d *postcard.Decoder) {
	m.ConnectivityHelper.UnmarshalPostcard(d)
}

func (m *Ready) MarshalPostcard(e *postcard.Encoder) {
	e.ByteString(m.Attestation)
	e.ByteString(m.Probe)
}

func (m *Ready) UnmarshalPostcard(d *postcard.Decoder) {
	m.Attestation = d.ByteString()
	m.Probe = d.ByteString()
}

func (m *Failed) MarshalPostcard(e *postcard.Encoder)   { e.String(m.Message) }
func (m *Failed) UnmarshalPostcard(d *postcard.Decoder) { m.Message = d.String() }

// Encode writes a message as its variant index then its fields.
func Encode(m Message) ([]byte, error) {
	e := postcard.NewEncoder(256)
	e.Variant(m.kind())
	m.MarshalPostcard(e)
	if e.Len() > MaxMessage {
		return nil, fmt.Errorf("encoding control message: %d bytes: %w", e.Len(), ErrTooLarge)
	}
	return e.Bytes(), nil
}

// Decode reads one whole message; trailing bytes are an error.
func Decode(b []byte) (Message, error) {
	d := postcard.NewDecoder(b)
	var m Message
	switch d.Variant(numKinds) {
	case kindStart:
		m = &Start{}
	case kindInstalled:
		m = &Installed{}
	case kindHelperStarted:
		m = &HelperStarted{}
	case kindReady:
		m = &Ready{}
	case kindFailed:
		m = &Failed{}
	case kindPublish:
		m = &Publish{}
	case kindPublished:
		m = &Published{}
	}
	if err := d.Err(); err != nil {
		return nil, fmt.Errorf("decoding control message: %w", err)
	}
	m.UnmarshalPostcard(d)
	if err := d.Finish(); err != nil {
		return nil, fmt.Errorf("decoding control message: %w", err)
	}
	return m, nil
}
