package supervise

import (
	"bytes"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"lazaret.dev/pkg/hostid"
	"lazaret.dev/pkg/ids"
	"lazaret.dev/pkg/postcard"
)

func fill16(b byte) (v [16]byte) {
	copy(v[:], bytes.Repeat([]byte{b}, 16))
	return v
}

func testIdentity() hostid.PidfsProcessIdentityV1 {
	return hostid.PidfsProcessIdentityV1{
		Authority:      hostid.PidfsProcessAuthorityV1{BootID: hostid.BootID(fill16(0xb0)), PidfsDev: 5, PidfsInode: 300},
		HostPID:        4242,
		StartTimeTicks: 1000,
	}
}

func testHello() Hello {
	return Hello{
		Version:        V1,
		DomainID:       ids.DomainID(bytes.Repeat([]byte{0xd0}, 32)),
		GenerationID:   ids.GenerationID(fill16(0x6e)),
		CoordinatorID:  ids.CoordinatorID(fill16(0xc0)),
		SupervisorSlot: hostid.SlotSandboxRuntimeSupervisor,
		ChildSlot:      hostid.SlotSandboxAttachedRunsc,
	}
}

func testAck() hostid.ProcessOwnershipCommitAck {
	h := testHello()
	return hostid.ProcessOwnershipCommitAck{Version: hostid.V1, Committed: h.StagedFor(hostid.SlotSandboxAttachedRunsc, testIdentity())}
}

const (
	hexDomain = "d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0d0"
	hexGen    = "6e6e6e6e6e6e6e6e6e6e6e6e6e6e6e6e"
	hexCoord  = "c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0c0"
	// identity: boot ID, dev 5, ino 300 (ac02), pid 4242 (92 21), start 1000 (e8 07)
	hexIdentity = "b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0" + "05" + "ac02" + "9221" + "e807"
	// staged: version V1, IDs, slot SandboxAttachedRunsc (variant 2), identity
	hexStaged = "00" + hexDomain + hexGen + hexCoord + "02" + hexIdentity
)

func TestCommandGolden(t *testing.T) {
	hello := testHello()
	cases := []struct {
		name string
		cmd  Command
		hex  string
	}{
		{"hello", &hello, "00" + "00" + hexDomain + hexGen + hexCoord + "01" + "02"},
		{"start", &Start{Supervisor: testAck()}, "01" + "00" + hexStaged},
		{"commit", &CommitAck{Ack: testAck()}, "02" + "00" + hexStaged},
		{"signal", &Signal{Kind: SignalWindowChange}, "03" + "07"},
		{"stop", &Stop{Grace: 1500 * time.Millisecond}, "04" + "dc0b"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := EncodeCommand(tc.cmd)
			if hex.EncodeToString(got) != tc.hex {
				t.Fatalf("encoding\n got %x\nwant %s", got, tc.hex)
			}
			back, err := DecodeCommand(got)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(EncodeCommand(back), got) {
				t.Fatal("decode/encode does not round-trip")
			}
		})
	}
}

func TestReportGolden(t *testing.T) {
	h := testHello()
	cases := []struct {
		name string
		rep  Report
		hex  string
	}{
		{"armed", &Armed{Supervisor: testIdentity()}, "00" + hexIdentity},
		{"staged", &Staged{Staged: h.StagedFor(hostid.SlotSandboxAttachedRunsc, testIdentity())}, "01" + hexStaged},
		{"running", &Running{}, "02"},
		{"exit code", &Exited{Status: ExitStatus{Code: 7}}, "03" + "00" + "07"},
		{"signal", &Exited{Status: ExitStatus{Signal: unix.SIGKILL}}, "03" + "01" + "09"},
		{"error", &Error{Kind: ErrorAck, Message: "no"}, "04" + "02" + "02" + "6e6f"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := EncodeReport(tc.rep)
			if hex.EncodeToString(got) != tc.hex {
				t.Fatalf("encoding\n got %x\nwant %s", got, tc.hex)
			}
			back, err := DecodeReport(got)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(EncodeReport(back), got) {
				t.Fatal("decode/encode does not round-trip")
			}
		})
	}
}

func TestDecodeRejects(t *testing.T) {
	hello := testHello()
	helloHex := hex.EncodeToString(EncodeCommand(&hello))
	cases := []struct {
		name    string
		command bool
		hex     string
		want    error
	}{
		{"empty", true, "", ErrEmptyMessage},
		{"unknown command", true, "05", postcard.ErrUnknownEnum},
		{"unknown report", false, "05", postcard.ErrUnknownEnum},
		{"trailing", true, helloHex + "00", postcard.ErrTrailing},
		{"truncated hello", true, helloHex[:20], postcard.ErrTruncated},
		{"hello version 2", true, "0001" + helloHex[4:], ErrUnknownProtocol},
		{"slot 12", true, helloHex[:len(helloHex)-2] + "0b", postcard.ErrUnknownEnum},
		{"ack version 2", true, "0201" + hexStaged, hostid.ErrUnknownVersion},
		{"staged version 2", true, "0200" + "01" + hexStaged[2:], hostid.ErrUnknownVersion},
		{"signal 9", true, "0309", postcard.ErrUnknownEnum},
		{"stop overlong", true, "048000", postcard.ErrOverlong},
		{"grace above limit", true, "04" + "81dddb01", postcard.ErrInvalidValue},
		{"signal 0", false, "030100", postcard.ErrInvalidValue},
		{"signal 65", false, "030141", postcard.ErrInvalidValue},
		{"exit variant", false, "030200", postcard.ErrUnknownEnum},
		{"error kind", false, "040700", postcard.ErrUnknownEnum},
		{"error utf8", false, "040001ff", postcard.ErrInvalidUTF8},
		{"running payload", false, "0200", postcard.ErrTrailing},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, err := hex.DecodeString(tc.hex)
			if err != nil {
				t.Fatal(err)
			}
			if tc.command {
				_, err = DecodeCommand(b)
			} else {
				_, err = DecodeReport(b)
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("error = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestSizeLimit(t *testing.T) {
	if _, err := DecodeCommand(make([]byte, MaxMessageSize+1)); !errors.Is(err, ErrMessageTooLarge) {
		t.Fatalf("oversized command: %v", err)
	}
	long := &Error{Kind: ErrorLaunch, Message: strings.Repeat("é", MaxErrorMessage)}
	b := EncodeReport(long)
	if len(b) > MaxMessageSize {
		t.Fatalf("longest Error encodes to %d bytes, above the limit", len(b))
	}
	r, err := DecodeReport(b)
	if err != nil {
		t.Fatal(err)
	}
	if m := r.(*Error).Message; len(m) > MaxErrorMessage || !strings.HasPrefix(long.Message, m) {
		t.Fatalf("message not cut at a rune boundary within the limit (%d bytes)", len(m))
	}
	over := append([]byte{0x04, 0x00, 0x81, 0x08}, bytes.Repeat([]byte("a"), MaxErrorMessage+1)...)
	if _, err := DecodeReport(over); !errors.Is(err, postcard.ErrInvalidValue) {
		t.Fatalf("over-long error message: %v", err)
	}
}

func TestHelloValidate(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*Hello)
		want   error
	}{
		{"ok", func(*Hello) {}, nil},
		{"version", func(h *Hello) { h.Version = 0 }, ErrUnknownProtocol},
		{"domain", func(h *Hello) { h.DomainID = ids.DomainID{} }, ErrInvalidHello},
		{"generation", func(h *Hello) { h.GenerationID = ids.GenerationID{} }, ErrInvalidHello},
		{"coordinator", func(h *Hello) { h.CoordinatorID = ids.CoordinatorID{} }, ErrInvalidHello},
		{"supervisor slot", func(h *Hello) { h.SupervisorSlot = 0 }, ErrInvalidHello},
		{"child slot", func(h *Hello) { h.ChildSlot = 99 }, ErrInvalidHello},
		{"same slot", func(h *Hello) { h.ChildSlot = h.SupervisorSlot }, ErrInvalidHello},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := testHello()
			tc.mutate(&h)
			if err := h.Validate(); !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("Validate = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestSignalKinds(t *testing.T) {
	for k := SignalKind(0); k < signalKinds; k++ {
		if _, err := k.Number(); err != nil {
			t.Errorf("%d: %v", k, err)
		}
	}
	if _, err := signalKinds.Number(); err == nil {
		t.Error("kind past the end has a number")
	}
	if n, _ := SignalTerminate.Number(); n != unix.SIGTERM {
		t.Errorf("SignalTerminate = %v", n)
	}
}

func FuzzDecodeCommand(f *testing.F) {
	hello := testHello()
	for _, c := range []Command{&hello, &Start{Supervisor: testAck()}, &CommitAck{Ack: testAck()}, &Signal{Kind: SignalKill}, &Stop{Grace: time.Second}} {
		f.Add(EncodeCommand(c))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := DecodeCommand(b)
		if err != nil {
			return
		}
		if !bytes.Equal(EncodeCommand(c), b) {
			t.Fatalf("accepted %x re-encodes as %x", b, EncodeCommand(c))
		}
	})
}

func FuzzDecodeReport(f *testing.F) {
	h := testHello()
	for _, r := range []Report{&Armed{Supervisor: testIdentity()}, &Staged{Staged: h.StagedFor(hostid.SlotSandboxAttachedRunsc, testIdentity())}, &Running{}, &Exited{Status: ExitStatus{Signal: unix.SIGTERM}}, &Error{Kind: ErrorExec, Message: "x"}} {
		f.Add(EncodeReport(r))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeReport(b)
		if err != nil {
			return
		}
		if !bytes.Equal(EncodeReport(r), b) {
			t.Fatalf("accepted %x re-encodes as %x", b, EncodeReport(r))
		}
	})
}
