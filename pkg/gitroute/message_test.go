package gitroute

import (
	"bytes"
	"encoding/hex"
	"errors"
	"testing"

	"lazaret.dev/pkg/hostid"
	"lazaret.dev/pkg/postcard"
)

func TestGoldenBytes(t *testing.T) {
	cases := []struct {
		name string
		enc  []byte
		hex  string
	}{
		{"ready", EncodeReport(&Ready{Version: 1, Mount: hostid.MountIdentity{MountID: 300, Device: 2, Inode: 3}, HostRoot: FileIdentity{4, 5}, IsolatedRoot: FileIdentity{6, 7}, IgnoreFiles: 8, TrackedPaths: 9}), "0001ac020203040506070809"},
		{"released", EncodeReport(&Released{}), "01"},
		{"failed", EncodeReport(&Failed{Stage: StageMount, Detail: "no"}), "0202026e6f"},
		{"release", EncodeCommand(&Release{}), "00"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := hex.EncodeToString(tc.enc); got != tc.hex {
				t.Fatalf("encoding = %s, want %s", got, tc.hex)
			}
		})
	}
}

func TestDecodeStrict(t *testing.T) {
	good, _ := hex.DecodeString("0001ac020203040506070809")
	if r, err := DecodeReport(good); err != nil {
		t.Fatal(err)
	} else if m := r.(*Ready); m.Mount.MountID != 300 || m.TrackedPaths != 9 {
		t.Fatalf("decoded %+v", m)
	}
	cases := []struct {
		name string
		hex  string
		want error
	}{
		{"unknown variant", "03", postcard.ErrUnknownEnum},
		{"trailing", "0100", postcard.ErrTrailing},
		{"bad version", "0002ac020203040506070809", postcard.ErrInvalidValue},
		{"overlong", "0001ac820003040506070809", postcard.ErrOverlong},
		{"truncated", "0001ac02", postcard.ErrTruncated},
		{"bad stage", "02090000", postcard.ErrUnknownEnum},
		{"bad utf8", "020201ff", postcard.ErrInvalidUTF8},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, _ := hex.DecodeString(tc.hex)
			if _, err := DecodeReport(b); !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
	if _, err := DecodeCommand([]byte{1}); !errors.Is(err, postcard.ErrUnknownEnum) {
		t.Fatalf("unknown command: %v", err)
	}
	if _, err := DecodeReport(make([]byte, MaxMessageSize+1)); !errors.Is(err, ErrMessageTooLarge) {
		t.Fatalf("oversize: %v", err)
	}
}

func TestConnRoundTrip(t *testing.T) {
	a, bf, err := Pair()
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := NewConn(bf)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.SendReport(&Failed{Stage: StageClassify, Detail: "x"}); err != nil {
		t.Fatal(err)
	}
	r, err := a.RecvReport()
	if err != nil {
		t.Fatal(err)
	}
	if f, ok := r.(*Failed); !ok || f.Stage != StageClassify || f.Detail != "x" {
		t.Fatalf("got %#v", r)
	}
	if err := a.SendCommand(&Release{}); err != nil {
		t.Fatal(err)
	}
	if c, err := b.RecvCommand(); err != nil || c == nil {
		t.Fatalf("RecvCommand: %v %v", c, err)
	}
	// A report where a command belongs is not one strict command.
	if err := a.SendReport(&Failed{Stage: StageClassify, Detail: "x"}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.RecvCommand(); !errors.Is(err, ErrMalformed) {
		t.Fatalf("malformed packet: %v", err)
	}
}

// FuzzDecodeReport: whatever decodes re-encodes to the same bytes.
func FuzzDecodeReport(f *testing.F) {
	for _, h := range []string{"0001ac020203040506070809", "01", "0202026e6f"} {
		b, _ := hex.DecodeString(h)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeReport(b)
		if err != nil {
			return
		}
		if got := EncodeReport(r); !bytes.Equal(got, b) {
			t.Fatalf("re-encoding %x gives %x", b, got)
		}
	})
}

// FuzzDecodeCommand: whatever decodes re-encodes to the same bytes.
func FuzzDecodeCommand(f *testing.F) {
	f.Add([]byte{0})
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := DecodeCommand(b)
		if err != nil {
			return
		}
		if got := EncodeCommand(c); !bytes.Equal(got, b) {
			t.Fatalf("re-encoding %x gives %x", b, got)
		}
	})
}
