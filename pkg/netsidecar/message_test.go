package netsidecar

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/netip"
	"os"
	"reflect"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"lazaret.dev/pkg/hostid"
	"lazaret.dev/pkg/netpolicy"
)

func sampleMessages() []Message {
	a := netip.MustParseAddr
	return []Message{
		&Start{
			DomainID: [32]byte{1}, GenerationID: [16]byte{2}, ConfigurationFingerprint: [32]byte{3},
			NetworkSidecarID: [16]byte{4}, PolicyDigest: [32]byte{5},
			HostAddresses:     []netip.Addr{a("198.18.0.1")},
			UpstreamInterface: "tap0",
			Targets: netpolicy.Targets{
				Denied:    []netpolicy.Destination{{Address: a("10.9.9.9"), Port: 80}},
				Permitted: []netpolicy.Destination{{Address: a("198.51.100.10"), Port: 443}},
				DNS:       []netpolicy.DNSTarget{{Resolver: a("192.0.2.53"), Query: "svc.lab.test"}},
				Hosts:     []netpolicy.HostTarget{{Name: "api.lab.test", Port: 443}},
			},
			RuntimeSupervisor:    hostid.PidfsProcessIdentityV1{HostPID: 7, StartTimeTicks: 9},
			ConnectTimeoutMillis: 1000,
		},
		&Installed{PolicyDigest: [32]byte{5}, EnforcementNamespace: hostid.NamespaceIdentity{Device: 4, Inode: 99},
			SandboxNamespace: hostid.NamespaceIdentity{Device: 4, Inode: 100}, SandboxNetNSPath: "/proc/1/fd/7",
			ObservedRoutes: []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("10.255.255.0/30")}, Operations: 27},
		&HelperStarted{ConnectivityHelper: hostid.PidfsProcessIdentityV1{HostPID: 8}},
		&Ready{Attestation: []byte{1, 2}, Probe: []byte{3}},
		&Failed{Message: "readiness permitted target 198.51.100.10:443: unreachable"},
		&Publish{HostPort: 8080, SandboxPort: 5173},
		&Published{HostPort: 8080, SandboxPort: 5173},
	}
}

func TestMessageRoundTrip(t *testing.T) {
	for _, m := range sampleMessages() {
		t.Run(reflect.TypeOf(m).Elem().Name(), func(t *testing.T) {
			b, err := Encode(m)
			if err != nil {
				t.Fatal(err)
			}
			got, err := Decode(b)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, m) {
				t.Fatalf("round trip:\n got %+v\nwant %+v", got, m)
			}
			if _, err := Decode(append(b, 0)); err == nil {
				t.Fatal("trailing byte accepted")
			}
			if _, err := Decode(b[:len(b)-1]); err == nil {
				t.Fatal("truncated message accepted")
			}
		})
	}
}

func TestMessageGolden(t *testing.T) {
	b, err := Encode(&Installed{SandboxNetNSPath: "/p", ObservedRoutes: []netip.Prefix{netip.MustParsePrefix("10.255.255.0/30")}, Operations: 3})
	if err != nil {
		t.Fatal(err)
	}
	want := append([]byte{1}, make([]byte, 32)...)           // variant, policy digest
	want = append(want, 0, 0, 0, 0)                          // two namespace identities
	want = append(want, 2, '/', 'p', 1, 10, 255, 255, 0, 30) // path, one route
	want = append(want, 3)                                   // operations
	if !bytes.Equal(b, want) {
		t.Fatalf("encoding\n got %x\nwant %x", b, want)
	}
	if _, err := Decode([]byte{5}); err == nil {
		t.Fatal("unknown variant accepted")
	}
}

func TestSealedPolicy(t *testing.T) {
	f, err := SealPolicy([]byte("policy bytes"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got, err := ReadSealedPolicy(f)
	if err != nil || string(got) != "policy bytes" {
		t.Fatalf("ReadSealedPolicy = %q, %v", got, err)
	}
	if _, err := f.WriteAt([]byte("x"), 0); err == nil {
		t.Fatal("write to a sealed memfd succeeded")
	}

	partial, err := unix.MemfdCreate("partial", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		t.Fatal(err)
	}
	pf := os.NewFile(uintptr(partial), "partial")
	defer pf.Close()
	if _, err := unix.FcntlInt(pf.Fd(), unix.F_ADD_SEALS, unix.F_SEAL_WRITE|unix.F_SEAL_GROW|unix.F_SEAL_SHRINK); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadSealedPolicy(pf); !errors.Is(err, ErrNotSealed) {
		t.Fatalf("memfd without F_SEAL_SEAL: %v, want ErrNotSealed", err)
	}
	plain, err := os.CreateTemp(t.TempDir(), "policy")
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if _, err := ReadSealedPolicy(plain); !errors.Is(err, ErrNotSealed) {
		t.Fatalf("regular file: %v, want ErrNotSealed", err)
	}
}

func TestChannel(t *testing.T) {
	parent, childFile, err := ChannelPair()
	if err != nil {
		t.Fatal(err)
	}
	child, err := NewChannel(childFile)
	if err != nil {
		t.Fatal(err)
	}
	defer parent.Close()
	for _, m := range sampleMessages() {
		if err := parent.Send(m); err != nil {
			t.Fatal(err)
		}
		got, err := child.Receive(context.Background())
		if err != nil || !reflect.DeepEqual(got, m) {
			t.Fatalf("Receive = %+v, %v", got, err)
		}
	}
	if err := parent.Send(&Failed{Message: "no"}); err != nil {
		t.Fatal(err)
	}
	if _, err := Expect[*Installed](context.Background(), child); !errors.Is(err, ErrFailed) {
		t.Fatalf("Expect on Failed = %v", err)
	}
	if err := parent.Send(&Ready{}); err != nil {
		t.Fatal(err)
	}
	if _, err := Expect[*Installed](context.Background(), child); !errors.Is(err, ErrUnexpected) {
		t.Fatalf("Expect on Ready = %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := child.Receive(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Receive past deadline = %v", err)
	}
	parent.Close()
	if _, err := child.Receive(context.Background()); !errors.Is(err, io.EOF) {
		t.Fatalf("Receive after close = %v, want EOF", err)
	}
}

// TestChannelFile: a published socket travels with its message; a
// packet with a descriptor is refused by Receive, which closes it.
func TestChannelFile(t *testing.T) {
	parent, childFile, err := ChannelPair()
	if err != nil {
		t.Fatal(err)
	}
	defer parent.Close()
	child, err := NewChannel(childFile)
	if err != nil {
		t.Fatal(err)
	}
	defer child.Close()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if err := parent.SendFile(&Publish{HostPort: 1, SandboxPort: 2}, w); err != nil {
		t.Fatal(err)
	}
	m, f, err := child.ReceiveFile(context.Background())
	if err != nil || f == nil || !reflect.DeepEqual(m, &Publish{HostPort: 1, SandboxPort: 2}) {
		t.Fatalf("ReceiveFile = %+v, %v, %v", m, f, err)
	}
	if _, err := f.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	f.Close()
	b := make([]byte, 1)
	if _, err := r.Read(b); err != nil || b[0] != 'x' {
		t.Fatalf("the passed descriptor is not the pipe: %q, %v", b, err)
	}
	if err := parent.SendFile(&Publish{HostPort: 1, SandboxPort: 2}, w); err != nil {
		t.Fatal(err)
	}
	if _, err := child.Receive(context.Background()); err == nil {
		t.Fatal("Receive accepted a packet with a descriptor")
	}
	if err := parent.Send(&Published{HostPort: 1, SandboxPort: 2}); err != nil {
		t.Fatal(err)
	}
	if m, f, err := child.ReceiveFile(context.Background()); err != nil || f != nil || m == nil {
		t.Fatalf("ReceiveFile without a descriptor = %+v, %v, %v", m, f, err)
	}
}

func FuzzDecode(f *testing.F) {
	for _, m := range sampleMessages() {
		b, _ := Encode(m)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Decode(b)
		if err != nil {
			return
		}
		out, err := Encode(m)
		if err != nil {
			t.Fatal(err)
		}
		m2, err := Decode(out)
		if err != nil || !reflect.DeepEqual(m, m2) {
			t.Fatalf("re-decode differs: %v", err)
		}
	})
}
