package supervise

import (
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"lazaret.dev/pkg/hostid"
	"lazaret.dev/pkg/ids"
	"lazaret.dev/pkg/postcard"
)

// MaxMessageSize bounds one encoded message, and so one packet. The largest
// message (an Error with a full message text) stays well below it.
const MaxMessageSize = 2048

// MaxErrorMessage bounds the text of an Error report in bytes.
const MaxErrorMessage = 1024

// MaxGrace bounds the grace period of a Stop.
const MaxGrace = time.Hour

// Errors of message decoding and validation; test with errors.Is.
var (
	ErrMessageTooLarge = errors.New("message exceeds the size limit")
	ErrEmptyMessage    = errors.New("empty message")
	ErrUnknownProtocol = errors.New("unknown supervisor protocol version")
	ErrInvalidHello    = errors.New("invalid hello")
)

// Version is the supervisor protocol version carried by Hello. The zero
// value is invalid; V1 is Postcard variant 0.
type Version uint8

// V1 is the only protocol version.
const V1 Version = 1

func (v Version) String() string {
	if v == V1 {
		return "V1"
	}
	return fmt.Sprintf("unknown(%d)", uint8(v))
}

// Command is a message from the Host Coordinator to the supervisor: one of
// *Hello, *Start, *CommitAck, *Signal, *Stop.
type Command interface {
	postcard.Marshaler
	commandIndex() uint32
}

// Report is a message from the supervisor to the Host Coordinator: one of
// *Armed, *Staged, *Running, *Exited, *Error.
type Report interface {
	postcard.Marshaler
	reportIndex() uint32
}

// Hello opens the channel: it binds the supervisor to one Domain,
// generation and Session Coordinator, names the slot the supervisor itself
// is owned through and the slot of its child. ChildSlot must equal the
// supervisor's --slot flag.
type Hello struct {
	Version        Version
	DomainID       ids.DomainID
	GenerationID   ids.GenerationID
	CoordinatorID  ids.CoordinatorID
	SupervisorSlot hostid.Slot
	ChildSlot      hostid.Slot
}

// Start commits the supervisor's own ownership and tells it to launch the
// child. Supervisor echoes the supervisor's staged ownership.
type Start struct {
	Supervisor hostid.ProcessOwnershipCommitAck
}

// CommitAck commits the child's ownership and releases its gate.
type CommitAck struct {
	Ack hostid.ProcessOwnershipCommitAck
}

// Signal forwards one signal of a closed set to the running child.
type Signal struct {
	Kind SignalKind
}

// Stop ends the child: SIGTERM, then SIGKILL once Grace has passed. The
// wire carries whole milliseconds.
type Stop struct {
	Grace time.Duration
}

// Armed reports that the causal edge is armed (the supervisor is a child
// subreaper with a locked launcher thread) and carries the supervisor's own
// pidfs identity.
type Armed struct {
	Supervisor hostid.PidfsProcessIdentityV1
}

// Staged reports the child's staged ownership: the child exists, is held at
// its gate and has not run its program.
type Staged struct {
	Staged hostid.StagedProcessOwnership
}

// Running reports that the gate is open and the child has executed its
// program.
type Running struct{}

// Exited reports how the child ended. It is the supervisor's last report.
type Exited struct {
	Status ExitStatus
}

// Error reports a failure the supervisor detected.
type Error struct {
	Kind    ErrorKind
	Message string
}

// SignalKind is the closed set of signals the coordinator may forward.
type SignalKind uint8

// The forwardable signals, in wire order.
const (
	SignalHangup SignalKind = iota
	SignalInterrupt
	SignalQuit
	SignalTerminate
	SignalKill
	SignalUser1
	SignalUser2
	SignalWindowChange
	SignalContinue
	signalKinds
)

var signalNumbers = [...]unix.Signal{
	unix.SIGHUP, unix.SIGINT, unix.SIGQUIT, unix.SIGTERM, unix.SIGKILL,
	unix.SIGUSR1, unix.SIGUSR2, unix.SIGWINCH, unix.SIGCONT,
}

// Number returns the Linux signal number of k.
func (k SignalKind) Number() (unix.Signal, error) {
	if k >= signalKinds {
		return 0, fmt.Errorf("signal kind %d: %w", uint8(k), postcard.ErrUnknownEnum)
	}
	return signalNumbers[k], nil
}

func (k SignalKind) String() string {
	if n, err := k.Number(); err == nil {
		return unix.SignalName(n)
	}
	return fmt.Sprintf("unknown(%d)", uint8(k))
}

// ErrorKind classifies an Error report.
type ErrorKind uint8

// The error kinds, in wire order.
const (
	// ErrorProtocol: a message that did not decode, or that is not
	// allowed in the supervisor's current state.
	ErrorProtocol ErrorKind = iota
	// ErrorHello: the Hello was not acceptable.
	ErrorHello
	// ErrorAck: an acknowledgment was rejected by a launch barrier.
	ErrorAck
	// ErrorLaunch: arming the edge or starting the child failed.
	ErrorLaunch
	// ErrorExec: the child could not execute its program.
	ErrorExec
	// ErrorIdentity: a pidfs identity could not be read.
	ErrorIdentity
	// ErrorSignal: a signal could not be delivered to the child.
	ErrorSignal
	errorKinds
)

var errorKindNames = [...]string{"protocol", "hello", "ack", "launch", "exec", "identity", "signal"}

func (k ErrorKind) String() string {
	if k < errorKinds {
		return errorKindNames[k]
	}
	return fmt.Sprintf("unknown(%d)", uint8(k))
}

// ExitStatus is how a process ended: an exit code, or the signal that
// killed it (Signal non-zero, Code zero).
type ExitStatus struct {
	Code   int
	Signal unix.Signal
}

// ExitStatusOf converts a wait status of an exited or killed process.
func ExitStatusOf(ws unix.WaitStatus) ExitStatus {
	if ws.Signaled() {
		return ExitStatus{Signal: ws.Signal()}
	}
	return ExitStatus{Code: ws.ExitStatus()}
}

// Signaled reports whether a signal ended the process.
func (s ExitStatus) Signaled() bool { return s.Signal != 0 }

// ShellCode is the exit code a shell would show: Code, or 128 plus the
// signal number.
func (s ExitStatus) ShellCode() int {
	if s.Signaled() {
		return 128 + int(s.Signal)
	}
	return s.Code
}

func (s ExitStatus) String() string {
	if s.Signaled() {
		return "killed by " + unix.SignalName(s.Signal)
	}
	return fmt.Sprintf("exit code %d", s.Code)
}

func (Hello) commandIndex() uint32     { return 0 }
func (Start) commandIndex() uint32     { return 1 }
func (CommitAck) commandIndex() uint32 { return 2 }
func (Signal) commandIndex() uint32    { return 3 }
func (Stop) commandIndex() uint32      { return 4 }
func (Armed) reportIndex() uint32      { return 0 }
func (Staged) reportIndex() uint32     { return 1 }
func (Running) reportIndex() uint32    { return 2 }
func (Exited) reportIndex() uint32     { return 3 }
func (Error) reportIndex() uint32      { return 4 }

const (
	commandVariants = 5
	reportVariants  = 5
)

// EncodeCommand returns the packet for c: its variant index, then its
// fields.
func EncodeCommand(c Command) []byte {
	e := postcard.NewEncoder(64)
	e.Variant(c.commandIndex())
	c.MarshalPostcard(e)
	return e.Bytes()
}

// EncodeReport returns the packet for r.
func EncodeReport(r Report) []byte {
	e := postcard.NewEncoder(64)
	e.Variant(r.reportIndex())
	r.MarshalPostcard(e)
	return e.Bytes()
}

// DecodeCommand decodes one packet strictly: one known variant, minimal
// encoding, no trailing bytes, every field within its rules.
func DecodeCommand(b []byte) (Command, error) {
	if err := checkSize(b); err != nil {
		return nil, err
	}
	d := postcard.NewDecoder(b)
	var c Command
	switch d.Variant(commandVariants) {
	case 0:
		c = decodeInto(d, &Hello{})
	case 1:
		c = decodeInto(d, &Start{})
	case 2:
		c = decodeInto(d, &CommitAck{})
	case 3:
		c = decodeInto(d, &Signal{})
	case 4:
		c = decodeInto(d, &Stop{})
	}
	if err := d.Finish(); err != nil {
		return nil, fmt.Errorf("decoding command: %w", err)
	}
	return c, nil
}

// DecodeReport decodes one report packet strictly.
func DecodeReport(b []byte) (Report, error) {
	if err := checkSize(b); err != nil {
		return nil, err
	}
	d := postcard.NewDecoder(b)
	var r Report
	switch d.Variant(reportVariants) {
	case 0:
		r = decodeInto(d, &Armed{})
	case 1:
		r = decodeInto(d, &Staged{})
	case 2:
		r = decodeInto(d, &Running{})
	case 3:
		r = decodeInto(d, &Exited{})
	case 4:
		r = decodeInto(d, &Error{})
	}
	if err := d.Finish(); err != nil {
		return nil, fmt.Errorf("decoding report: %w", err)
	}
	return r, nil
}

// decodeInto decodes v's fields and returns v.
func decodeInto[P postcard.Unmarshaler](d *postcard.Decoder, v P) P {
	if d.Err() == nil {
		v.UnmarshalPostcard(d)
	}
	return v
}

func checkSize(b []byte) error {
	switch {
	case len(b) == 0:
		return ErrEmptyMessage
	case len(b) > MaxMessageSize:
		return fmt.Errorf("%d bytes, limit %d: %w", len(b), MaxMessageSize, ErrMessageTooLarge)
	}
	return nil
}

// Validate checks what decoding cannot: non-zero IDs and two distinct
// valid slots.
func (h *Hello) Validate() error {
	switch {
	case h.Version != V1:
		return fmt.Errorf("version %v: %w", h.Version, ErrUnknownProtocol)
	case h.DomainID == (ids.DomainID{}):
		return fmt.Errorf("domain_id is zero: %w", ErrInvalidHello)
	case h.GenerationID == (ids.GenerationID{}):
		return fmt.Errorf("generation_id is zero: %w", ErrInvalidHello)
	case h.CoordinatorID == (ids.CoordinatorID{}):
		return fmt.Errorf("coordinator_id is zero: %w", ErrInvalidHello)
	case !h.SupervisorSlot.Valid():
		return fmt.Errorf("supervisor_slot %v: %w", h.SupervisorSlot, ErrInvalidHello)
	case !h.ChildSlot.Valid():
		return fmt.Errorf("child_slot %v: %w", h.ChildSlot, ErrInvalidHello)
	case h.SupervisorSlot == h.ChildSlot:
		return fmt.Errorf("supervisor_slot and child_slot are both %v: %w", h.ChildSlot, ErrInvalidHello)
	}
	return nil
}

// StagedFor returns the StagedProcessOwnership of a process in slot with
// identity id, bound to the Hello's Domain, generation and coordinator.
func (h *Hello) StagedFor(slot hostid.Slot, id hostid.PidfsProcessIdentityV1) hostid.StagedProcessOwnership {
	return hostid.StagedProcessOwnership{
		Version:       hostid.V1,
		DomainID:      h.DomainID,
		GenerationID:  h.GenerationID,
		CoordinatorID: h.CoordinatorID,
		Slot:          slot,
		Identity:      id,
	}
}

// slotCount is the number of valid hostid slots.
var slotCount = func() uint32 {
	n := uint32(0)
	for hostid.Slot(n + 1).Valid() {
		n++
	}
	return n
}()

func encodeSlot(e *postcard.Encoder, s hostid.Slot) { e.Variant(uint32(s) - 1) }

func decodeSlot(d *postcard.Decoder) hostid.Slot {
	v := d.Variant(slotCount)
	if d.Err() != nil {
		return 0
	}
	return hostid.Slot(v + 1)
}

// MarshalPostcard writes version, domain_id, generation_id,
// coordinator_id, supervisor_slot, child_slot.
func (h *Hello) MarshalPostcard(e *postcard.Encoder) {
	e.Variant(uint32(h.Version) - 1)
	e.Fixed(h.DomainID[:])
	e.Fixed(h.GenerationID[:])
	e.Fixed(h.CoordinatorID[:])
	encodeSlot(e, h.SupervisorSlot)
	encodeSlot(e, h.ChildSlot)
}

// UnmarshalPostcard reads what MarshalPostcard writes; an unknown version
// fails with ErrUnknownProtocol.
func (h *Hello) UnmarshalPostcard(d *postcard.Decoder) {
	if v := d.U32(); d.Err() == nil && v != 0 {
		d.Fail("version", ErrUnknownProtocol)
	}
	h.Version = V1
	d.Fixed(h.DomainID[:])
	d.Fixed(h.GenerationID[:])
	d.Fixed(h.CoordinatorID[:])
	h.SupervisorSlot = decodeSlot(d)
	h.ChildSlot = decodeSlot(d)
}

// MarshalPostcard writes the supervisor acknowledgment.
func (s *Start) MarshalPostcard(e *postcard.Encoder) { s.Supervisor.MarshalPostcard(e) }

// UnmarshalPostcard reads what MarshalPostcard writes.
func (s *Start) UnmarshalPostcard(d *postcard.Decoder) { s.Supervisor.UnmarshalPostcard(d) }

// MarshalPostcard writes the child acknowledgment.
func (c *CommitAck) MarshalPostcard(e *postcard.Encoder) { c.Ack.MarshalPostcard(e) }

// UnmarshalPostcard reads what MarshalPostcard writes.
func (c *CommitAck) UnmarshalPostcard(d *postcard.Decoder) { c.Ack.UnmarshalPostcard(d) }

// MarshalPostcard writes the signal kind as a variant.
func (s *Signal) MarshalPostcard(e *postcard.Encoder) { e.Variant(uint32(s.Kind)) }

// UnmarshalPostcard reads what MarshalPostcard writes.
func (s *Signal) UnmarshalPostcard(d *postcard.Decoder) {
	s.Kind = SignalKind(d.Variant(uint32(signalKinds)))
}

// MarshalPostcard writes the grace period in whole milliseconds.
func (s *Stop) MarshalPostcard(e *postcard.Encoder) { e.U64(uint64(s.Grace / time.Millisecond)) }

// UnmarshalPostcard reads what MarshalPostcard writes; a grace above
// MaxGrace is invalid.
func (s *Stop) UnmarshalPostcard(d *postcard.Decoder) {
	ms := d.U64()
	if d.Err() == nil && ms > uint64(MaxGrace/time.Millisecond) {
		d.Fail("grace", postcard.ErrInvalidValue)
		return
	}
	s.Grace = time.Duration(ms) * time.Millisecond
}

// MarshalPostcard writes the supervisor identity.
func (a *Armed) MarshalPostcard(e *postcard.Encoder) { a.Supervisor.MarshalPostcard(e) }

// UnmarshalPostcard reads what MarshalPostcard writes.
func (a *Armed) UnmarshalPostcard(d *postcard.Decoder) { a.Supervisor.UnmarshalPostcard(d) }

// MarshalPostcard writes the staged ownership.
func (s *Staged) MarshalPostcard(e *postcard.Encoder) { s.Staged.MarshalPostcard(e) }

// UnmarshalPostcard reads what MarshalPostcard writes.
func (s *Staged) UnmarshalPostcard(d *postcard.Decoder) { s.Staged.UnmarshalPostcard(d) }

// MarshalPostcard writes nothing: Running is a unit variant.
func (*Running) MarshalPostcard(*postcard.Encoder) {}

// UnmarshalPostcard reads nothing.
func (*Running) UnmarshalPostcard(*postcard.Decoder) {}

// MarshalPostcard writes the status as a union: variant 0 Code(u8),
// variant 1 Signal(u8).
func (x *Exited) MarshalPostcard(e *postcard.Encoder) {
	if x.Status.Signaled() {
		e.Variant(1)
		e.U8(uint8(x.Status.Signal))
		return
	}
	e.Variant(0)
	e.U8(uint8(x.Status.Code))
}

// UnmarshalPostcard reads what MarshalPostcard writes; a signal outside
// 1..64 is invalid.
func (x *Exited) UnmarshalPostcard(d *postcard.Decoder) {
	x.Status = ExitStatus{}
	switch d.Variant(2) {
	case 0:
		x.Status.Code = int(d.U8())
	case 1:
		n := d.U8()
		if d.Err() == nil && (n == 0 || n > 64) {
			d.Fail("signal", postcard.ErrInvalidValue)
			return
		}
		x.Status.Signal = unix.Signal(n)
	}
}

// MarshalPostcard writes kind and message; invalid UTF-8 in the message is
// replaced and a message longer than MaxErrorMessage is cut at a rune
// boundary.
func (x *Error) MarshalPostcard(e *postcard.Encoder) {
	e.Variant(uint32(x.Kind))
	e.String(truncateUTF8(strings.ToValidUTF8(x.Message, "\uFFFD"), MaxErrorMessage))
}

// UnmarshalPostcard reads what MarshalPostcard writes.
func (x *Error) UnmarshalPostcard(d *postcard.Decoder) {
	x.Kind = ErrorKind(d.Variant(uint32(errorKinds)))
	x.Message = d.String()
	if d.Err() == nil && len(x.Message) > MaxErrorMessage {
		d.Fail("message", postcard.ErrInvalidValue)
	}
}

func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
