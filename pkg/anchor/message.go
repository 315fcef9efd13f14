package anchor

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"unicode/utf8"

	"lazaret.dev/pkg/hostid"
	"lazaret.dev/pkg/postcard"
)

// ProtocolVersion is the control-channel version carried by Setup.
const ProtocolVersion uint32 = 1

// MaxMessageSize bounds one datagram on the control channel. A longer
// datagram is a protocol error on both sides.
const MaxMessageSize = 16 << 10

// Limits on the text fields of a message.
const (
	maxPathLen   = 4096
	maxStepLen   = 64
	maxDetailLen = 1024
)

// ErrProtocol means a control-channel datagram is malformed, of the wrong
// kind for the moment, or breaks a field rule. The wrapping error names the
// message and the field.
var ErrProtocol = errors.New("anchor control protocol violation")

// Kind is the variant index of a Message.
type Kind uint32

// The message kinds, in variant order.
const (
	KindIDMapWritten Kind = iota
	KindSetup
	KindReady
	KindRelease
	KindReleased
	KindFailure
	kindCount
)

var kindNames = [...]string{"IDMapWritten", "Setup", "Ready", "Release", "Released", "Failure"}

func (k Kind) String() string {
	if k < kindCount {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", uint32(k))
}

// Message is one datagram of the control channel.
type Message interface {
	Kind() Kind
	marshal(e *postcard.Encoder)
	unmarshal(d *postcard.Decoder)
	validate() error
}

// IDMapWritten tells an anchor started without an ID map that newuidmap
// and newgidmap have written it. The anchor then re-executes itself so that
// it holds the capabilities of the namespace's root.
type IDMapWritten struct{}

// PathCheck names a directory and the device and inode the Host
// Coordinator found there; the anchor refuses a path that no longer resolves
// to that object.
type PathCheck struct {
	Path   string
	Device uint64
	Inode  uint64
}

// Setup asks the anchor to assemble the overlay.
type Setup struct {
	Version uint32
	Lower   PathCheck
	Upper   PathCheck
	Work    PathCheck
	Merged  PathCheck
}

// Ready reports the anchor's identities once the overlay is mounted.
// Mount identifies the overlay's root as seen in the anchor's mount
// namespace.
type Ready struct {
	Daemon         hostid.PidfsProcessIdentityV1
	UserNamespace  hostid.NamespaceIdentity
	MountNamespace hostid.NamespaceIdentity
	Mount          hostid.MountIdentity
}

// Release asks the anchor to unmount, report, and exit.
type Release struct{}

// ReleaseEvidence is the State Anchor release evidence of the schema
// (StateAnchorReleaseEvidence): the daemon that held the overlay, its user
// and mount namespaces, and the overlay mount it removed.
type ReleaseEvidence struct {
	Daemon         hostid.PidfsProcessIdentityV1
	UserNamespace  hostid.NamespaceIdentity
	MountNamespace hostid.NamespaceIdentity
	Mount          hostid.MountIdentity
}

// Released reports that the overlay is unmounted.
type Released struct {
	Evidence ReleaseEvidence
}

// Failure reports the step that failed, the path it worked on, and the
// errno (0 when the failure is not a system call's).
type Failure struct {
	Step   string
	Path   string
	Errno  uint32
	Detail string
}

func (IDMapWritten) Kind() Kind { return KindIDMapWritten }
func (Setup) Kind() Kind        { return KindSetup }
func (Ready) Kind() Kind        { return KindReady }
func (Release) Kind() Kind      { return KindRelease }
func (Released) Kind() Kind     { return KindReleased }
func (Failure) Kind() Kind      { return KindFailure }

// Encode returns the Postcard encoding of m after checking its field rules.
func Encode(m Message) ([]byte, error) {
	if err := m.validate(); err != nil {
		return nil, err
	}
	e := postcard.NewEncoder(128)
	e.Variant(uint32(m.Kind()))
	m.marshal(e)
	if e.Len() > MaxMessageSize {
		return nil, fmt.Errorf("%v message of %d bytes exceeds %d: %w", m.Kind(), e.Len(), MaxMessageSize, ErrProtocol)
	}
	return e.Bytes(), nil
}

// Decode parses one datagram strictly: minimal Postcard, a known variant, no
// trailing bytes, and every field rule of the variant.
func Decode(b []byte) (Message, error) {
	if len(b) > MaxMessageSize {
		return nil, fmt.Errorf("datagram of %d bytes exceeds %d: %w", len(b), MaxMessageSize, ErrProtocol)
	}
	d := postcard.NewDecoder(b)
	k := Kind(d.Variant(uint32(kindCount)))
	if err := d.Err(); err != nil {
		return nil, fmt.Errorf("decoding message kind: %w: %w", ErrProtocol, err)
	}
	var m Message
	switch k {
	case KindIDMapWritten:
		m = &IDMapWritten{}
	case KindSetup:
		m = &Setup{}
	case KindReady:
		m = &Ready{}
	case KindRelease:
		m = &Release{}
	case KindReleased:
		m = &Released{}
	case KindFailure:
		m = &Failure{}
	}
	m.unmarshal(d)
	if err := d.Finish(); err != nil {
		return nil, fmt.Errorf("decoding %v message: %w: %w", k, ErrProtocol, err)
	}
	if err := m.validate(); err != nil {
		return nil, err
	}
	return m, nil
}

func (*IDMapWritten) marshal(*postcard.Encoder)   {}
func (*IDMapWritten) unmarshal(*postcard.Decoder) {}
func (*IDMapWritten) validate() error             { return nil }
func (*Release) marshal(*postcard.Encoder)        {}
func (*Release) unmarshal(*postcard.Decoder)      {}
func (*Release) validate() error                  { return nil }

func (p *PathCheck) marshal(e *postcard.Encoder) {
	e.String(p.Path)
	e.U64(p.Device)
	e.U64(p.Inode)
}

func (p *PathCheck) unmarshal(d *postcard.Decoder) {
	p.Path = d.String()
	p.Device = d.U64()
	p.Inode = d.U64()
}

func (s *Setup) marshal(e *postcard.Encoder) {
	e.U32(s.Version)
	for _, p := range s.paths() {
		p.check.marshal(e)
	}
}

func (s *Setup) unmarshal(d *postcard.Decoder) {
	s.Version = d.U32()
	for _, p := range s.paths() {
		p.check.unmarshal(d)
	}
}

type namedPath struct {
	field string
	check *PathCheck
}

func (s *Setup) paths() []namedPath {
	return []namedPath{{"lower", &s.Lower}, {"upper", &s.Upper}, {"work", &s.Work}, {"merged", &s.Merged}}
}

func (s *Setup) validate() error {
	if s.Version != ProtocolVersion {
		return fmt.Errorf("Setup.version %d: want %d: %w", s.Version, ProtocolVersion, ErrProtocol)
	}
	seen := map[string]string{}
	for _, p := range s.paths() {
		if err := checkPath(p.check.Path); err != nil {
			return fmt.Errorf("Setup.%s %q: %w: %w", p.field, p.check.Path, err, ErrProtocol)
		}
		if other, dup := seen[p.check.Path]; dup {
			return fmt.Errorf("Setup.%s %q: same path as Setup.%s: %w", p.field, p.check.Path, other, ErrProtocol)
		}
		seen[p.check.Path] = p.field
	}
	return nil
}

// checkPath enforces the path rule shared by Setup and Spec: absolute, in
// clean form, not the root, no NUL, at most 4096 bytes.
func checkPath(p string) error {
	switch {
	case p == "":
		return errors.New("path is empty")
	case len(p) > maxPathLen:
		return fmt.Errorf("path is longer than %d bytes", maxPathLen)
	case strings.IndexByte(p, 0) >= 0:
		return errors.New("path contains a NUL byte")
	case !filepath.IsAbs(p):
		return errors.New("path is not absolute")
	case filepath.Clean(p) != p:
		return errors.New("path is not in clean form (no //, ., .. or trailing /)")
	case p == "/":
		return errors.New("path is the root directory")
	}
	return nil
}

func (r *Ready) marshal(e *postcard.Encoder) {
	r.Daemon.MarshalPostcard(e)
	r.UserNamespace.MarshalPostcard(e)
	r.MountNamespace.MarshalPostcard(e)
	r.Mount.MarshalPostcard(e)
}

func (r *Ready) unmarshal(d *postcard.Decoder) {
	r.Daemon.UnmarshalPostcard(d)
	r.UserNamespace.UnmarshalPostcard(d)
	r.MountNamespace.UnmarshalPostcard(d)
	r.Mount.UnmarshalPostcard(d)
}

func (r *Ready) validate() error {
	return validateIdentities("Ready", r.Daemon, r.UserNamespace, r.MountNamespace, r.Mount)
}

func validateIdentities(msg string, daemon hostid.PidfsProcessIdentityV1, user, mnt hostid.NamespaceIdentity, mount hostid.MountIdentity) error {
	switch {
	case daemon.HostPID == 0:
		return fmt.Errorf("%s.daemon.host_pid is 0: %w", msg, ErrProtocol)
	case daemon.Authority.PidfsInode == 0:
		return fmt.Errorf("%s.daemon.pidfs_st_ino is 0: %w", msg, ErrProtocol)
	case user.Inode == 0:
		return fmt.Errorf("%s.user_namespace.inode is 0: %w", msg, ErrProtocol)
	case mnt.Inode == 0:
		return fmt.Errorf("%s.mount_namespace.inode is 0: %w", msg, ErrProtocol)
	case user == mnt:
		return fmt.Errorf("%s: user and mount namespace identities are equal: %w", msg, ErrProtocol)
	case mount.MountID == 0 || mount.Inode == 0:
		return fmt.Errorf("%s.mount has a zero mount ID or inode: %w", msg, ErrProtocol)
	}
	return nil
}

func (r *Released) marshal(e *postcard.Encoder) {
	r.Evidence.Daemon.MarshalPostcard(e)
	r.Evidence.UserNamespace.MarshalPostcard(e)
	r.Evidence.MountNamespace.MarshalPostcard(e)
	r.Evidence.Mount.MarshalPostcard(e)
}

func (r *Released) unmarshal(d *postcard.Decoder) {
	r.Evidence.Daemon.UnmarshalPostcard(d)
	r.Evidence.UserNamespace.UnmarshalPostcard(d)
	r.Evidence.MountNamespace.UnmarshalPostcard(d)
	r.Evidence.Mount.UnmarshalPostcard(d)
}

func (r *Released) validate() error {
	v := r.Evidence
	return validateIdentities("Released", v.Daemon, v.UserNamespace, v.MountNamespace, v.Mount)
}

func (f *Failure) marshal(e *postcard.Encoder) {
	e.String(f.Step)
	e.String(f.Path)
	e.U32(f.Errno)
	e.String(f.Detail)
}

func (f *Failure) unmarshal(d *postcard.Decoder) {
	f.Step = d.String()
	f.Path = d.String()
	f.Errno = d.U32()
	f.Detail = d.String()
}

func (f *Failure) validate() error {
	switch {
	case f.Step == "" || len(f.Step) > maxStepLen:
		return fmt.Errorf("Failure.step has %d bytes: want 1 to %d: %w", len(f.Step), maxStepLen, ErrProtocol)
	case len(f.Path) > maxPathLen:
		return fmt.Errorf("Failure.path has %d bytes: want at most %d: %w", len(f.Path), maxPathLen, ErrProtocol)
	case len(f.Detail) > maxDetailLen:
		return fmt.Errorf("Failure.detail has %d bytes: want at most %d: %w", len(f.Detail), maxDetailLen, ErrProtocol)
	case f.Errno == 0 && f.Detail == "":
		return fmt.Errorf("Failure has neither errno nor detail: %w", ErrProtocol)
	}
	for _, s := range []string{f.Step, f.Path, f.Detail} {
		if strings.ContainsFunc(s, isControl) {
			return fmt.Errorf("Failure text %q contains a control character: %w", s, ErrProtocol)
		}
	}
	return nil
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

// NewFailure builds the Failure for err at step on path: the errno when err
// wraps a syscall.Errno, and the error text with control characters
// replaced and cut to the detail limit.
func NewFailure(step, path string, err error) *Failure {
	f := &Failure{Step: clip(step, maxStepLen), Path: clip(path, maxPathLen)}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		f.Errno = uint32(errno)
	}
	if err != nil {
		f.Detail = clip(err.Error(), maxDetailLen)
	}
	if f.Step == "" {
		f.Step = "unknown step"
	}
	if f.Errno == 0 && f.Detail == "" {
		f.Detail = "failed"
	}
	return f
}

func clip(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.Map(func(r rune) rune {
		if isControl(r) {
			return ' '
		}
		return r
	}, s)
	for len(s) > n {
		_, size := utf8.DecodeLastRuneInString(s)
		s = s[:len(s)-size]
	}
	return s
}

// Error makes a Failure the error that the Host Coordinator returns: the
// step, the path, and what the anchor saw.
func (f *Failure) Error() string {
	var sb strings.Builder
	sb.WriteString("state anchor failed at ")
	sb.WriteString(f.Step)
	if f.Path != "" {
		fmt.Fprintf(&sb, " of %q", f.Path)
	}
	if f.Detail != "" {
		sb.WriteString(": ")
		sb.WriteString(f.Detail)
	} else {
		sb.WriteString(": ")
		sb.WriteString(syscall.Errno(f.Errno).Error())
	}
	return sb.String()
}

// Unwrap returns the errno, so errors.Is(err, syscall.EACCES) works on a
// reported failure.
func (f *Failure) Unwrap() error {
	if f.Errno == 0 {
		return nil
	}
	return syscall.Errno(f.Errno)
}
