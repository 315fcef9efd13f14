package control

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

func FuzzDecodeEnvelope(f *testing.F) {
	for _, fr := range []Frame{
		{Type: FrameRequest, Body: []byte{1, 2, 3}},
		{Type: FrameError, Code: CodeBusy, Message: "busy"},
		{Type: FrameBatch, Body: bytes.Repeat([]byte{7}, 300)},
	} {
		b, err := AppendFrame(nil, fr)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b[frameHeaderBytes:])
	}
	f.Add([]byte{0xa3, 0x01, 0x01, 0x02, 0x41, 0x00, 0x05, 0x00})
	f.Fuzz(func(t *testing.T, b []byte) {
		fr, err := DecodeEnvelope(b)
		if err != nil {
			if !errors.Is(err, ErrFrame) && !errors.Is(err, ErrFrameSize) {
				t.Fatalf("error %v is neither ErrFrame nor ErrFrameSize", err)
			}
			return
		}
		// What decodes re-encodes to the same bytes.
		again, err := AppendFrame(nil, fr)
		if err != nil {
			t.Fatalf("re-encoding %+v: %v", fr, err)
		}
		if !bytes.Equal(again[frameHeaderBytes:], b) {
			t.Fatalf("re-encoding differs:\n%x\n%x", again[frameHeaderBytes:], b)
		}
	})
}

func FuzzReadFrame(f *testing.F) {
	b, _ := AppendFrame(nil, Frame{Type: FrameEvent, Body: []byte{2}})
	f.Add(b)
	f.Add(append(b, b...))
	f.Add(binary.BigEndian.AppendUint32(nil, MaxFrameBytes+1))
	f.Fuzz(func(t *testing.T, b []byte) {
		r := bytes.NewReader(b)
		for range 4 {
			if _, err := ReadFrame(r); err != nil {
				return
			}
		}
	})
}

func FuzzDecodeIdentityFile(f *testing.F) {
	g := newGeneration(f)
	content, err := EncodeIdentityFile(&g.pub, &g.manifest)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(content)
	f.Add(content[:40])
	f.Fuzz(func(t *testing.T, b []byte) {
		pub, manifest, err := DecodeIdentityFile(b)
		if err != nil {
			return
		}
		again, err := EncodeIdentityFile(&pub, &manifest)
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("accepted identity file does not re-encode: %v", err)
		}
	})
}
