package control

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"unicode/utf8"

	"github.com/fxamacker/cbor/v2"
)

// Frame limits.
const (
	// MaxFrameBytes bounds the CBOR envelope of one frame (the length prefix
	// not included). Readers refuse a larger length before allocating.
	MaxFrameBytes = 1 << 20
	// MaxErrorMessageBytes bounds the message of an error frame.
	MaxErrorMessageBytes = 1024
	// frameHeaderBytes is the u32 big-endian length prefix.
	frameHeaderBytes = 4
)

// FrameType says what an envelope carries. The values are part of the wire
// format (docs/CONTROL.md).
type FrameType uint8

// Frame types.
const (
	// FrameRequest: client to server, a protocol.ControlRequest.
	FrameRequest FrameType = iota + 1
	// FrameResponse: server to client, a protocol.ControlResponse.
	FrameResponse
	// FrameOutput: server to client, a protocol.NonInteractiveSessionMessage.
	FrameOutput
	// FrameEvent: client to server, a protocol.InteractiveSessionEvent.
	FrameEvent
	// FrameBatch: server to client, a protocol.InteractiveSessionBatch.
	FrameBatch
	// FrameError: server to client, a refusal with a code and a message;
	// the server closes the connection after it.
	FrameError
	// FramePublish: client to server, port forwards to add (EncodePorts).
	FramePublish
	// FramePublished: server to client, every forward now published
	// (EncodePorts).
	FramePublished
	numFrameTypes
)

var frameNames = [...]string{
	FrameRequest:   "request",
	FrameResponse:  "response",
	FrameOutput:    "output",
	FrameEvent:     "event",
	FrameBatch:     "batch",
	FrameError:     "error",
	FramePublish:   "publish",
	FramePublished: "published",
}

func (t FrameType) String() string {
	if t >= FrameRequest && t < numFrameTypes {
		return frameNames[t]
	}
	return fmt.Sprintf("frame type %d", uint8(t))
}

// Frame is one decoded envelope. Body is the Postcard record for every type
// but FrameError; Code and Message are set for FrameError only.
type Frame struct {
	Type    FrameType
	Body    []byte
	Code    Code
	Message string
}

// envelope is the CBOR form of a Frame: a map with unsigned integer keys,
// absent fields omitted.
type envelope struct {
	Type    uint64 `cbor:"1,keyasint"`
	Body    []byte `cbor:"2,keyasint,omitempty"`
	Code    uint64 `cbor:"3,keyasint,omitempty"`
	Message string `cbor:"4,keyasint,omitempty"`
}

var (
	encMode cbor.EncMode
	decMode cbor.DecMode
)

func init() {
	var err error
	if encMode, err = cbor.CoreDetEncOptions().EncMode(); err != nil {
		panic(fmt.Sprintf("building CBOR encoding mode: %v", err))
	}
	do := cbor.DecOptions{
		DupMapKey:          cbor.DupMapKeyEnforcedAPF,
		IndefLength:        cbor.IndefLengthForbidden,
		TagsMd:             cbor.TagsForbidden,
		ExtraReturnErrors:  cbor.ExtraDecErrorUnknownField,
		FieldNameMatching:  cbor.FieldNameMatchingCaseSensitive,
		ByteStringToString: cbor.ByteStringToStringForbidden,
		UTF8:               cbor.UTF8RejectInvalid,
		MaxNestedLevels:    4,
		MaxArrayElements:   16,
		MaxMapPairs:        16,
	}
	if decMode, err = do.DecMode(); err != nil {
		panic(fmt.Sprintf("building CBOR decoding mode: %v", err))
	}
}

func frameError(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrFrame, fmt.Sprintf(format, args...))
}

// check enforces the per-type field rules of an envelope.
func (f *Frame) check() error {
	switch {
	case f.Type < FrameRequest || f.Type >= numFrameTypes:
		return frameError("field 1 (type): unknown frame type %d", f.Type)
	case f.Type == FrameError:
		if len(f.Body) != 0 {
			return frameError("field 2 (body): an error frame has no body")
		}
		if !f.Code.Valid() {
			return frameError("field 3 (code): unknown error code %d", f.Code)
		}
		if f.Message == "" || len(f.Message) > MaxErrorMessageBytes || !utf8.ValidString(f.Message) {
			return frameError("field 4 (message): must be 1 to %d bytes of UTF-8", MaxErrorMessageBytes)
		}
	default:
		if len(f.Body) == 0 {
			return frameError("field 2 (body): a %v frame needs a body", f.Type)
		}
		if f.Code != 0 || f.Message != "" {
			return frameError("fields 3 and 4 (code, message) belong to error frames only")
		}
	}
	return nil
}

// AppendFrame appends the length-prefixed encoding of f to dst.
func AppendFrame(dst []byte, f Frame) ([]byte, error) {
	if err := f.check(); err != nil {
		return dst, err
	}
	env := envelope{Type: uint64(f.Type), Body: f.Body, Code: uint64(f.Code), Message: f.Message}
	b, err := encMode.Marshal(&env)
	if err != nil {
		return dst, fmt.Errorf("encoding control frame: %w", err)
	}
	if len(b) > MaxFrameBytes {
		return dst, fmt.Errorf("%w: %v frame of %d bytes exceeds %d", ErrFrameSize, f.Type, len(b), MaxFrameBytes)
	}
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(b)))
	return append(dst, b...), nil
}

// DecodeEnvelope decodes one CBOR envelope (without its length prefix). It
// accepts only the deterministic encoding of a valid frame: unknown or
// duplicate keys, indefinite lengths, tags, non-minimal integers, unsorted
// keys, empty fields written out, and trailing bytes are refused.
func DecodeEnvelope(b []byte) (Frame, error) {
	if len(b) == 0 || len(b) > MaxFrameBytes {
		return Frame{}, fmt.Errorf("%w: envelope of %d bytes", ErrFrameSize, len(b))
	}
	var env envelope
	if err := decMode.Unmarshal(b, &env); err != nil {
		return Frame{}, frameError("%v", err)
	}
	if env.Type > 0xff || env.Code > 0xffffffff {
		return Frame{}, frameError("type %d or code %d out of range", env.Type, env.Code)
	}
	f := Frame{Type: FrameType(env.Type), Body: env.Body, Code: Code(env.Code), Message: env.Message}
	if err := f.check(); err != nil {
		return Frame{}, err
	}
	again, err := encMode.Marshal(&env)
	if err != nil || !bytes.Equal(again, b) {
		return Frame{}, frameError("envelope is not in deterministic encoding")
	}
	return f, nil
}

// ReadFrame reads one length-prefixed frame from r. A length of zero or
// above MaxFrameBytes is refused with ErrFrameSize before any allocation;
// io.EOF means the peer closed cleanly between frames.
func ReadFrame(r io.Reader) (Frame, error) {
	var hdr [frameHeaderBytes]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		if err == io.ErrUnexpectedEOF {
			return Frame{}, frameError("truncated length prefix")
		}
		return Frame{}, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n == 0 || n > MaxFrameBytes {
		return Frame{}, fmt.Errorf("%w: length prefix %d, want 1 to %d", ErrFrameSize, n, MaxFrameBytes)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return Frame{}, frameError("truncated envelope: %d bytes announced", n)
		}
		return Frame{}, err
	}
	return DecodeEnvelope(b)
}
