package control

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
)

var (
	lo   = netip.MustParseAddr("127.0.0.1")
	fwdA = PortForward{HostAddr: lo, HostPort: 8080, SandboxPort: 80}
	fwdB = PortForward{HostAddr: lo, HostPort: 5173, SandboxPort: 5173}
)

func TestPortsGolden(t *testing.T) {
	fs := []PortForward{fwdB, fwdA}
	SortPorts(fs)
	b, err := EncodePorts(fs)
	if err != nil {
		t.Fatal(err)
	}
	// 2 forwards; 127.0.0.1, 5173 (varint b5 28), 5173; 127.0.0.1, 8080
	// (90 3f), 80 (50).
	want := []byte{0x02, 127, 0, 0, 1, 0xb5, 0x28, 0xb5, 0x28, 127, 0, 0, 1, 0x90, 0x3f, 0x50}
	if !bytes.Equal(b, want) {
		t.Fatalf("EncodePorts = % x, want % x", b, want)
	}
	got, err := DecodePorts(b)
	if err != nil || !slices.Equal(got, fs) {
		t.Fatalf("DecodePorts = %v, %v", got, err)
	}
	if b, err := EncodePorts(nil); err != nil || !bytes.Equal(b, []byte{0}) {
		t.Fatalf("EncodePorts(nil) = % x, %v", b, err)
	}
}

func TestPortsRefusals(t *testing.T) {
	v6 := PortForward{HostAddr: netip.MustParseAddr("::1"), HostPort: 1, SandboxPort: 1}
	for _, tc := range []struct {
		name string
		fs   []PortForward
	}{
		{"unsorted", []PortForward{fwdA, fwdB}},
		{"host end twice", []PortForward{fwdB, {HostAddr: lo, HostPort: 5173, SandboxPort: 1}}},
		{"IPv6", []PortForward{v6}},
		{"host port 0", []PortForward{{HostAddr: lo, SandboxPort: 1}}},
		{"sandbox port 0", []PortForward{{HostAddr: lo, HostPort: 1}}},
		{"too many", make([]PortForward, MaxPortForwards+1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := CheckPorts(tc.fs); !errors.Is(err, ErrPorts) {
				t.Fatalf("CheckPorts = %v", err)
			}
			if _, err := EncodePorts(tc.fs); err == nil {
				t.Fatal("encoded")
			}
		})
	}
	unsorted := []byte{0x02, 127, 0, 0, 1, 0x90, 0x3f, 0x50, 127, 0, 0, 1, 0xb5, 0x28, 0xb5, 0x28}
	if _, err := DecodePorts(unsorted); !errors.Is(err, ErrPorts) {
		t.Fatalf("DecodePorts of unsorted = %v", err)
	}
	if _, err := DecodePorts([]byte{0x01, 127, 0, 0, 1, 0x50}); err == nil {
		t.Fatal("truncated forward decoded")
	}
}

func FuzzDecodePorts(f *testing.F) {
	b, _ := EncodePorts([]PortForward{fwdB, fwdA})
	f.Add(b)
	f.Add([]byte{0})
	f.Fuzz(func(t *testing.T, b []byte) {
		fs, err := DecodePorts(b)
		if err != nil {
			return
		}
		again, err := EncodePorts(fs)
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("decoded %v does not encode back: % x, %v", fs, again, err)
		}
	})
}

func TestPublishedPortsFile(t *testing.T) {
	dir := t.TempDir()
	if fs, err := ReadPublishedPorts(dir); err != nil || fs != nil {
		t.Fatalf("no record = %v, %v", fs, err)
	}
	if err := WritePublishedPorts(dir, []PortForward{fwdB, fwdA}); err != nil {
		t.Fatal(err)
	}
	fs, err := ReadPublishedPorts(dir)
	if err != nil || !slices.Equal(fs, []PortForward{fwdB, fwdA}) {
		t.Fatalf("record = %v, %v", fs, err)
	}
}

// fakePorts publishes anything but host port 1, which is "in use".
type fakePorts struct {
	mu  sync.Mutex
	all []PortForward
}

func (p *fakePorts) Publish(fs []PortForward) ([]PortForward, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, f := range fs {
		if f.HostPort == 1 {
			return nil, fmt.Errorf("host port 1 on %v is already in use", f.HostAddr)
		}
	}
	for _, f := range fs {
		if !slices.Contains(p.all, f) {
			p.all = append(p.all, f)
		}
	}
	SortPorts(p.all)
	return slices.Clone(p.all), nil
}

func TestPublishExchange(t *testing.T) {
	g := newGeneration(t)
	cfg := g.config(t, &fakeSessions{})
	cfg.Ports = &fakePorts{}
	h := startServer(t, g, cfg)
	ctx := context.Background()

	anon := h.dial(t)
	if _, err := anon.Publish(ctx, []PortForward{fwdA}); !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("anonymous publish = %v, want unauthorized", err)
	}

	c, b := h.enrolled(t)
	all, err := c.Publish(ctx, []PortForward{fwdA})
	if err != nil || !slices.Equal(all, []PortForward{fwdA}) {
		t.Fatalf("Publish = %v, %v", all, err)
	}
	all, err = c.Publish(ctx, []PortForward{fwdA, fwdB})
	if err != nil || !slices.Equal(all, []PortForward{fwdB, fwdA}) {
		t.Fatalf("second Publish = %v, %v", all, err)
	}
	// The connection still serves requests after a publish.
	if _, err := c.Execute(ctx, b.SessionID, []string{"true"}, nil, nil); err != nil {
		t.Fatalf("execute after publish: %v", err)
	}
	_, err = c.Publish(ctx, []PortForward{{HostAddr: lo, HostPort: 1, SandboxPort: 80}})
	if !errors.Is(err, ErrPortRefused) || !strings.Contains(err.Error(), "host port 1 on 127.0.0.1 is already in use") {
		t.Fatalf("refused publish = %v", err)
	}

	none := newGeneration(t)
	h2 := startServer(t, none, none.config(t, &fakeSessions{}))
	c2, _ := h2.enrolled(t)
	if _, err := c2.Publish(ctx, []PortForward{fwdA}); !errors.Is(err, ErrPortRefused) {
		t.Fatalf("publish without Ports = %v", err)
	}
}
