package anchor

import (
	"bytes"
	"encoding/hex"
	"errors"
	"strings"
	"syscall"
	"testing"

	"lazaret.dev/pkg/hostid"
	"lazaret.dev/pkg/postcard"
)

func sampleReady() *Ready {
	return &Ready{
		Daemon: hostid.PidfsProcessIdentityV1{
			Authority:      hostid.PidfsProcessAuthorityV1{BootID: hostid.BootID{0: 0xaa, 15: 0xbb}, PidfsDev: 14, PidfsInode: 300},
			HostPID:        4242,
			StartTimeTicks: 128,
		},
		UserNamespace:  hostid.NamespaceIdentity{Device: 4, Inode: 4026532001},
		MountNamespace: hostid.NamespaceIdentity{Device: 4, Inode: 4026532002},
		Mount:          hostid.MountIdentity{MountID: 0x2000000000000a, Device: 39, Inode: 1},
	}
}

// Golden bytes: the variant index, then the fields in declared order;
// strings length-prefixed, integers as LEB128 varints.
func TestMessageGolden(t *testing.T) {
	tests := []struct {
		name string
		msg  Message
		hex  string
	}{
		{"IDMapWritten", &IDMapWritten{}, "00"},
		{"Setup", &Setup{Version: 1,
			Lower: PathCheck{"/l", 1, 2}, Upper: PathCheck{"/u", 3, 4},
			Work: PathCheck{"/w", 5, 6}, Merged: PathCheck{"/m", 7, 300}},
			"01" + "01" + "022f6c0102" + "022f750304" + "022f770506" + "022f6d07ac02"},
		{"Release", &Release{}, "03"},
		{"Failure", &Failure{Step: "s", Errno: 13}, "05" + "0173" + "00" + "0d" + "00"},
		{"Ready", sampleReady(),
			"02" + "aa" + strings.Repeat("00", 14) + "bb" + "0e" + "ac02" + "9221" + "8001" +
				"04" + "a18180800f" + "04" + "a28180800f" +
				"8a80808080808010" + "27" + "01"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Encode(tt.msg)
			if err != nil {
				t.Fatal(err)
			}
			if h := hex.EncodeToString(got); h != tt.hex {
				t.Fatalf("encoding\n got %s\nwant %s", h, tt.hex)
			}
			back, err := Decode(got)
			if err != nil {
				t.Fatal(err)
			}
			again, _ := Encode(back)
			if !bytes.Equal(again, got) {
				t.Errorf("re-encoding differs: %x", again)
			}
		})
	}
}

func TestReleasedMatchesReady(t *testing.T) {
	r := sampleReady()
	rel := &Released{Evidence: ReleaseEvidence(*r)}
	b, err := Encode(rel)
	if err != nil {
		t.Fatal(err)
	}
	rb, _ := Encode(r)
	if b[0] != byte(KindReleased) || !bytes.Equal(b[1:], rb[1:]) {
		t.Errorf("Released payload %x differs from Ready payload %x", b[1:], rb[1:])
	}
}

func TestDecodeRejects(t *testing.T) {
	setup, _ := hex.DecodeString("0101022f6c0102022f750304022f770506022f6d0708")
	tests := []struct {
		name string
		b    []byte
		is   error
		has  string
	}{
		{"empty", nil, postcard.ErrTruncated, ""},
		{"unknown kind", []byte{0x06}, postcard.ErrUnknownEnum, ""},
		{"trailing", []byte{0x03, 0x00}, postcard.ErrTrailing, ""},
		{"overlong kind", []byte{0x83, 0x00}, postcard.ErrOverlong, ""},
		{"setup truncated", setup[:len(setup)-1], postcard.ErrTruncated, ""},
		{"setup version 2", append([]byte{0x01, 0x02}, setup[2:]...), ErrProtocol, "version"},
		{"relative path", bytes.Replace(setup, []byte{0x02, 0x2f, 0x6c}, []byte{0x02, 0x2e, 0x6c}, 1), ErrProtocol, "not absolute"},
		{"duplicate path", bytes.Replace(setup, []byte{0x2f, 0x75}, []byte{0x2f, 0x6c}, 1), ErrProtocol, "same path"},
		{"failure without text", []byte{0x05, 0x01, 0x73, 0x00, 0x00, 0x00}, ErrProtocol, "neither"},
		{"failure control char", []byte{0x05, 0x01, 0x1b, 0x00, 0x01, 0x00}, ErrProtocol, "control"},
		{"oversized", make([]byte, MaxMessageSize+1), ErrProtocol, "exceeds"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := Decode(tt.b)
			if err == nil {
				t.Fatalf("decoded %#v", m)
			}
			if !errors.Is(err, tt.is) || !strings.Contains(err.Error(), tt.has) {
				t.Errorf("error %q: want errors.Is %v containing %q", err, tt.is, tt.has)
			}
		})
	}
}

func TestReadyRules(t *testing.T) {
	tests := []struct {
		name string
		edit func(r *Ready)
	}{
		{"zero pid", func(r *Ready) { r.Daemon.HostPID = 0 }},
		{"zero pidfs inode", func(r *Ready) { r.Daemon.Authority.PidfsInode = 0 }},
		{"same namespaces", func(r *Ready) { r.MountNamespace = r.UserNamespace }},
		{"zero mount id", func(r *Ready) { r.Mount.MountID = 0 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := sampleReady()
			tt.edit(r)
			if _, err := Encode(r); !errors.Is(err, ErrProtocol) {
				t.Errorf("Encode: %v, want ErrProtocol", err)
			}
		})
	}
}

func TestNewFailure(t *testing.T) {
	f := NewFailure("opening the lower directory", "/x", &wrapped{syscall.EACCES})
	if f.Errno != uint32(syscall.EACCES) || !errors.Is(f, syscall.EACCES) {
		t.Errorf("errno %d, errors.Is EACCES %v", f.Errno, errors.Is(f, syscall.EACCES))
	}
	if want := `state anchor failed at opening the lower directory of "/x": wrapped: permission denied`; f.Error() != want {
		t.Errorf("Error() = %q, want %q", f.Error(), want)
	}
	long := NewFailure(strings.Repeat("s", 100), "/p", errors.New("a\nb"+strings.Repeat("é", 1000)))
	b, err := Encode(long)
	if err != nil {
		t.Fatalf("clipped failure does not encode: %v", err)
	}
	if _, err := Decode(b); err != nil {
		t.Fatal(err)
	}
}

type wrapped struct{ err error }

func (w *wrapped) Error() string { return "wrapped: " + w.err.Error() }
func (w *wrapped) Unwrap() error { return w.err }
