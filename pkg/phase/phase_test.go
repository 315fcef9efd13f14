package phase

import (
	"encoding/hex"
	"errors"
	"testing"

	"lazaret.dev/pkg/store/codec"
)

// The names are what the Domain Store persists: changing one breaks every
// existing store.
func TestDomainNames(t *testing.T) {
	want := []string{"Absent", "Starting", "Ready", "Stopping", "Failed", "Recovering"}
	got := Domains()
	if len(got) != NumDomain || len(want) != NumDomain {
		t.Fatalf("Domains() has %d phases, want %d", len(got), NumDomain)
	}
	for i, d := range got {
		t.Run(want[i], func(t *testing.T) {
			b, err := d.MarshalText()
			if err != nil || string(b) != want[i] || d.String() != want[i] {
				t.Fatalf("phase %d: text %q, %v; String %q; want %q", uint8(d), b, err, d.String(), want[i])
			}
			var back Domain
			if err := back.UnmarshalText(b); err != nil || back != d {
				t.Fatalf("UnmarshalText(%q) = %v, %v; want %v", b, back, err, d)
			}
			if d.Index() != i || DomainAt(i) != d {
				t.Fatalf("Index = %d, DomainAt(%d) = %v; want %d and %v", d.Index(), i, DomainAt(i), i, d)
			}
		})
	}
}

func TestSessionNames(t *testing.T) {
	want := []string{"New", "Waiting", "Registering", "Attached", "Prompting", "HostExecuting", "Closed", "Failed"}
	got := Sessions()
	if len(got) != NumSession || len(want) != NumSession {
		t.Fatalf("Sessions() has %d phases, want %d", len(got), NumSession)
	}
	for i, s := range got {
		t.Run(want[i], func(t *testing.T) {
			b, err := s.MarshalText()
			if err != nil || string(b) != want[i] || s.String() != want[i] {
				t.Fatalf("phase %d: text %q, %v; String %q; want %q", uint8(s), b, err, s.String(), want[i])
			}
			var back Session
			if err := back.UnmarshalText(b); err != nil || back != s {
				t.Fatalf("UnmarshalText(%q) = %v, %v; want %v", b, back, err, s)
			}
			if s.Index() != i || SessionAt(i) != s {
				t.Fatalf("Index = %d, SessionAt(%d) = %v; want %d and %v", s.Index(), i, SessionAt(i), i, s)
			}
		})
	}
}

func TestInvalid(t *testing.T) {
	for _, d := range []Domain{0, NumDomain + 1, 255} {
		if d.Valid() || d.Index() != -1 {
			t.Errorf("Domain %d: Valid %v, Index %d", uint8(d), d.Valid(), d.Index())
		}
		if _, err := d.MarshalText(); !errors.Is(err, codec.ErrUnknownVariant) {
			t.Errorf("Domain %d: MarshalText error %v, want ErrUnknownVariant", uint8(d), err)
		}
	}
	for _, s := range []Session{0, NumSession + 1, 255} {
		if s.Valid() || s.Index() != -1 {
			t.Errorf("Session %d: Valid %v, Index %d", uint8(s), s.Valid(), s.Index())
		}
		if _, err := s.MarshalText(); !errors.Is(err, codec.ErrUnknownVariant) {
			t.Errorf("Session %d: MarshalText error %v, want ErrUnknownVariant", uint8(s), err)
		}
	}
	for _, i := range []int{-1, NumDomain, 1 << 20} {
		if DomainAt(i) != 0 {
			t.Errorf("DomainAt(%d) = %v, want the zero Domain", i, DomainAt(i))
		}
	}
	for _, i := range []int{-1, NumSession, 1 << 20} {
		if SessionAt(i) != 0 {
			t.Errorf("SessionAt(%d) = %v, want the zero Session", i, SessionAt(i))
		}
	}
	for _, name := range []string{"", "ready", "Unused", "invalid(0)", " Ready"} {
		var d Domain
		if err := d.UnmarshalText([]byte(name)); !errors.Is(err, codec.ErrUnknownVariant) {
			t.Errorf("Domain.UnmarshalText(%q) = %v, want ErrUnknownVariant", name, err)
		}
		var s Session
		if err := s.UnmarshalText([]byte(name)); !errors.Is(err, codec.ErrUnknownVariant) {
			t.Errorf("Session.UnmarshalText(%q) = %v, want ErrUnknownVariant", name, err)
		}
	}
}

// TestCBOR pins the stored bytes: a phase is a CBOR text string of its name.
func TestCBOR(t *testing.T) {
	for _, tc := range []struct {
		v    any
		want string
	}{
		{DomainReady, "655265616479"},
		{DomainRecovering, "6a5265636f766572696e67"},
		{SessionHostExecuting, "6d486f7374457865637574696e67"},
		{SessionNew, "634e6577"},
	} {
		b, err := codec.Marshal(tc.v)
		if err != nil || hex.EncodeToString(b) != tc.want {
			t.Errorf("Marshal(%v) = %x, %v; want %s", tc.v, b, err, tc.want)
		}
	}
}

func FuzzUnmarshalText(f *testing.F) {
	for _, s := range []string{"Ready", "HostExecuting", "", "invalid(3)"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var d Domain
		if d.UnmarshalText(b) == nil {
			if out, err := d.MarshalText(); err != nil || string(out) != string(b) {
				t.Fatalf("Domain %q decodes to %v and encodes to %q, %v", b, d, out, err)
			}
		}
		var s Session
		if s.UnmarshalText(b) == nil {
			if out, err := s.MarshalText(); err != nil || string(out) != string(b) {
				t.Fatalf("Session %q decodes to %v and encodes to %q, %v", b, s, out, err)
			}
		}
	})
}
