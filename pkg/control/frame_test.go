package control

import (
	"bytes"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
)

func TestFrameGolden(t *testing.T) {
	tests := []struct {
		name  string
		frame Frame
		hex   string
	}{
		// a2 map(2) | 01 01 type request | 02 43 010203 body h'010203'
		{"request", Frame{Type: FrameRequest, Body: []byte{1, 2, 3}}, "00000008" + "a2" + "0101" + "0243010203"},
		// a3 map(3) | 01 06 type error | 03 06 code unknown session | 04 62 "no"
		{"error", Frame{Type: FrameError, Code: CodeUnknownSession, Message: "no"}, "00000009" + "a3" + "0106" + "0306" + "04626e6f"},
		{"batch", Frame{Type: FrameBatch, Body: []byte{0xaa}}, "00000006" + "a2" + "0105" + "0241aa"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := AppendFrame(nil, tt.frame)
			if err != nil {
				t.Fatal(err)
			}
			if h := hex.EncodeToString(got); h != tt.hex {
				t.Fatalf("encoding = %s, want %s", h, tt.hex)
			}
			back, err := ReadFrame(bytes.NewReader(got))
			if err != nil {
				t.Fatal(err)
			}
			if back.Type != tt.frame.Type || !bytes.Equal(back.Body, tt.frame.Body) || back.Code != tt.frame.Code || back.Message != tt.frame.Message {
				t.Fatalf("decoded %+v, want %+v", back, tt.frame)
			}
		})
	}
}

func TestEnvelopeRefusals(t *testing.T) {
	tests := []struct {
		name string
		hex  string
		want error
	}{
		{"empty", "", ErrFrameSize},
		{"not a map", "01", ErrFrame},
		{"garbage", "fffe00", ErrFrame},
		{"unknown field", "a3" + "0101" + "0241aa" + "0500", ErrFrame},
		{"text key", "a2" + "0101" + "6131" + "41aa", ErrFrame},
		{"duplicate key", "a2" + "0101" + "0101", ErrFrame},
		{"unsorted keys", "a2" + "0241aa" + "0101", ErrFrame},
		{"non-minimal integer", "a2" + "011801" + "0241aa", ErrFrame},
		{"indefinite map", "bf" + "0101" + "0241aa" + "ff", ErrFrame},
		{"indefinite byte string", "a2" + "0101" + "025f41aaff", ErrFrame},
		{"tag", "a2" + "0101" + "02c241aa", ErrFrame},
		{"trailing bytes", "a2" + "0101" + "0241aa" + "00", ErrFrame},
		{"unknown type", "a2" + "0109" + "0241aa", ErrFrame},
		{"type zero written out", "a2" + "0100" + "0241aa", ErrFrame},
		{"request without body", "a1" + "0101", ErrFrame},
		{"empty body written out", "a2" + "0101" + "0240", ErrFrame},
		{"request with code", "a3" + "0101" + "0241aa" + "0301", ErrFrame},
		{"error with body", "a4" + "0106" + "0241aa" + "0301" + "046178", ErrFrame},
		{"error without message", "a2" + "0106" + "0301", ErrFrame},
		{"unknown code", "a3" + "0106" + "0318ff" + "046178", ErrFrame},
		{"invalid UTF-8", "a3" + "0106" + "0301" + "0461ff", ErrFrame},
		{"negative type", "a2" + "0120" + "0241aa", ErrFrame},
		{"float type", "a2" + "01f93c00" + "0241aa", ErrFrame},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := hex.DecodeString(tt.hex)
			if err != nil {
				t.Fatal(err)
			}
			if f, err := DecodeEnvelope(b); !errors.Is(err, tt.want) {
				t.Fatalf("DecodeEnvelope = %+v, %v; want %v", f, err, tt.want)
			}
		})
	}
}

func TestReadFrameBounds(t *testing.T) {
	tests := []struct {
		name string
		raw  []byte
		want error
	}{
		{"zero length", []byte{0, 0, 0, 0}, ErrFrameSize},
		{"above the limit", []byte{0, 0x10, 0, 1}, ErrFrameSize},
		{"huge", []byte{0xff, 0xff, 0xff, 0xff}, ErrFrameSize},
		{"truncated prefix", []byte{0, 0}, ErrFrame},
		{"truncated envelope", []byte{0, 0, 0, 5, 0xa2}, ErrFrame},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := ReadFrame(bytes.NewReader(tt.raw)); !errors.Is(err, tt.want) {
				t.Fatalf("ReadFrame = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestAppendFrameRefusals(t *testing.T) {
	tests := []struct {
		name  string
		frame Frame
		want  error
	}{
		{"no type", Frame{Body: []byte{1}}, ErrFrame},
		{"no body", Frame{Type: FrameRequest}, ErrFrame},
		{"error without code", Frame{Type: FrameError, Message: "x"}, ErrFrame},
		{"long message", Frame{Type: FrameError, Code: CodeInternal, Message: strings.Repeat("x", MaxErrorMessageBytes+1)}, ErrFrame},
		{"too large", Frame{Type: FrameBatch, Body: make([]byte, MaxFrameBytes)}, ErrFrameSize},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := AppendFrame(nil, tt.frame); !errors.Is(err, tt.want) {
				t.Fatalf("AppendFrame = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestClip(t *testing.T) {
	s := strings.Repeat("é", MaxErrorMessageBytes) // two bytes each
	c := clip(s)
	if len(c) > MaxErrorMessageBytes || !strings.HasPrefix(s, c) || len(c) < MaxErrorMessageBytes-1 {
		t.Fatalf("clip kept %d bytes", len(c))
	}
	if got := toRemote(errors.New("\xff")).Message; got != "\uFFFD" {
		t.Fatalf("invalid UTF-8 became %q", got)
	}
}
