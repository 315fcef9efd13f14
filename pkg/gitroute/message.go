package gitroute

import (
	"errors"
	"fmt"
	"unicode/utf8"

	"lazaret.dev/pkg/hostid"
	"lazaret.dev/pkg/postcard"
)

// MaxMessageSize bounds one control packet.
const MaxMessageSize = 4096

// maxDetail bounds the human-readable detail of a Failed report.
const maxDetail = 2048

// Version is the control protocol version carried in Ready.
const Version uint8 = 1

// ErrMessageTooLarge means an encoded message exceeds MaxMessageSize.
var ErrMessageTooLarge = errors.New("control message larger than 4096 bytes")

// FileIdentity is the device and inode of a directory the daemon opened.
type FileIdentity struct {
	Device uint64
	Inode  uint64
}

// Report is a message from the daemon to the coordinator: *Ready,
// *Released or *Failed.
type Report interface {
	postcard.Marshaler
	report()
}

// Command is a message from the coordinator to the daemon: *Release.
type Command interface {
	postcard.Marshaler
	command()
}

// Ready says the view is mounted and served. Mount identifies the mount
// (its root); HostRoot and IsolatedRoot identify the directories the daemon
// retained, so the coordinator can check that it opened what was asked.
type Ready struct {
	Version      uint8
	Mount        hostid.MountIdentity
	HostRoot     FileIdentity
	IsolatedRoot FileIdentity
	// IgnoreFiles and TrackedPaths count what the frozen classification
	// holds, for the record and the log.
	IgnoreFiles  uint32
	TrackedPaths uint32
}

// Released says the view was unmounted on request; the daemon exits next.
type Released struct{}

// FailureStage says which step of the daemon failed.
type FailureStage uint8

// Failure stages; the numbering is part of the wire format.
const (
	StageSetup    FailureStage = iota // arguments, roots, channel
	StageClassify                     // reading ignore rules, index, config
	StageMount                        // mounting the view
	StageServe                        // serving ended without a Release
	StageUnmount                      // unmounting on Release
	stageCount
)

var stageNames = [...]string{"setup", "classify", "mount", "serve", "unmount"}

func (s FailureStage) String() string {
	if s < stageCount {
		return stageNames[s]
	}
	return fmt.Sprintf("stage(%d)", uint8(s))
}

// Failed says the daemon could not start, or lost its view; it exits next.
type Failed struct {
	Stage  FailureStage
	Detail string
}

// Release asks the daemon to unmount the view and exit.
type Release struct{}

func (*Ready) report()    {}
func (*Released) report() {}
func (*Failed) report()   {}
func (*Release) command() {}

// Wire variant indices.
const (
	reportReady uint32 = iota
	reportReleased
	reportFailed
	reportCount
)

const (
	commandRelease uint32 = iota
	commandCount
)

func (f *FileIdentity) marshal(e *postcard.Encoder) { e.U64(f.Device); e.U64(f.Inode) }

func (f *FileIdentity) unmarshal(d *postcard.Decoder) { f.Device = d.U64(); f.Inode = d.U64() }

// MarshalPostcard writes the Ready variant.
func (m *Ready) MarshalPostcard(e *postcard.Encoder) {
	e.Variant(reportReady)
	e.U8(m.Version)
	m.Mount.MarshalPostcard(e)
	m.HostRoot.marshal(e)
	m.IsolatedRoot.marshal(e)
	e.U32(m.IgnoreFiles)
	e.U32(m.TrackedPaths)
}

// MarshalPostcard writes the Released variant.
func (m *Released) MarshalPostcard(e *postcard.Encoder) { e.Variant(reportReleased) }

// MarshalPostcard writes the Failed variant.
func (m *Failed) MarshalPostcard(e *postcard.Encoder) {
	e.Variant(reportFailed)
	e.U8(uint8(m.Stage))
	d := m.Detail
	if len(d) > maxDetail {
		d = d[:maxDetail]
		for !utf8.ValidString(d) {
			d = d[:len(d)-1]
		}
	}
	e.String(d)
}

// MarshalPostcard writes the Release variant.
func (m *Release) MarshalPostcard(e *postcard.Encoder) { e.Variant(commandRelease) }

// EncodeReport returns the wire bytes of r.
func EncodeReport(r Report) []byte { return postcard.Marshal(r) }

// EncodeCommand returns the wire bytes of c.
func EncodeCommand(c Command) []byte { return postcard.Marshal(c) }

type reportBox struct{ r Report }

func (b *reportBox) UnmarshalPostcard(d *postcard.Decoder) {
	switch d.Variant(reportCount) {
	case reportReady:
		m := &Ready{}
		m.Version = d.U8()
		if d.Err() == nil && m.Version != Version {
			d.Fail("Ready.version", fmt.Errorf("version %d, want %d: %w", m.Version, Version, postcard.ErrInvalidValue))
		}
		m.Mount.UnmarshalPostcard(d)
		m.HostRoot.unmarshal(d)
		m.IsolatedRoot.unmarshal(d)
		m.IgnoreFiles = d.U32()
		m.TrackedPaths = d.U32()
		b.r = m
	case reportReleased:
		b.r = &Released{}
	case reportFailed:
		m := &Failed{}
		m.Stage = FailureStage(d.U8())
		if d.Err() == nil && m.Stage >= stageCount {
			d.Fail("Failed.stage", fmt.Errorf("stage %d: %w", m.Stage, postcard.ErrUnknownEnum))
		}
		m.Detail = d.String()
		if d.Err() == nil && len(m.Detail) > maxDetail {
			d.Fail("Failed.detail", fmt.Errorf("%d bytes, limit %d: %w", len(m.Detail), maxDetail, postcard.ErrInvalidValue))
		}
		b.r = m
	}
}

type commandBox struct{ c Command }

func (b *commandBox) UnmarshalPostcard(d *postcard.Decoder) {
	switch d.Variant(commandCount) {
	case commandRelease:
		b.c = &Release{}
	}
}

// DecodeReport decodes exactly one report; anything else (unknown variant,
// non-minimal encoding, trailing bytes, oversize) is an error.
func DecodeReport(b []byte) (Report, error) {
	if len(b) > MaxMessageSize {
		return nil, ErrMessageTooLarge
	}
	var box reportBox
	if err := postcard.Unmarshal(b, &box); err != nil {
		return nil, fmt.Errorf("decoding gitroute report: %w", err)
	}
	return box.r, nil
}

// DecodeCommand decodes exactly one command, as strictly as DecodeReport.
func DecodeCommand(b []byte) (Command, error) {
	if len(b) > MaxMessageSize {
		return nil, ErrMessageTooLarge
	}
	var box commandBox
	if err := postcard.Unmarshal(b, &box); err != nil {
		return nil, fmt.Errorf("decoding gitroute command: %w", err)
	}
	return box.c, nil
}
