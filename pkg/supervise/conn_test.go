package supervise

import (
	"context"
	"errors"
	"io"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"lazaret.dev/pkg/hostid"
	"lazaret.dev/pkg/ids"
)

// pair returns a Conn and the raw descriptor of its peer.
func pair(t *testing.T) (*Conn, int) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewConn(os.NewFile(uintptr(fds[0]), "a"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); unix.Close(fds[1]) })
	return c, fds[1]
}

func TestConnRoundTrip(t *testing.T) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	a, err := NewConn(os.NewFile(uintptr(fds[0]), "a"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewConn(os.NewFile(uintptr(fds[1]), "b"))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := a.SendCommand(&Stop{Grace: time.Second}); err != nil {
		t.Fatal(err)
	}
	c, err := b.RecvCommand()
	if err != nil {
		t.Fatal(err)
	}
	if s, ok := c.(*Stop); !ok || s.Grace != time.Second {
		t.Fatalf("received %#v", c)
	}
	if err := b.SendReport(&Running{}); err != nil {
		t.Fatal(err)
	}
	if r, err := a.RecvReport(); err != nil || r == nil {
		t.Fatalf("RecvReport = %v, %v", r, err)
	}
	a.Close()
	if _, err := b.RecvReport(); !errors.Is(err, io.EOF) {
		t.Fatalf("after close: %v, want io.EOF", err)
	}
}

func TestConnRejectsPackets(t *testing.T) {
	cases := []struct {
		name string
		send func(t *testing.T, fd int)
		want error
	}{
		{"oversized", func(t *testing.T, fd int) {
			if _, err := unix.Write(fd, make([]byte, MaxMessageSize+1)); err != nil {
				t.Fatal(err)
			}
		}, ErrTruncated},
		{"descriptor", func(t *testing.T, fd int) {
			if err := unix.Sendmsg(fd, EncodeReport(&Running{}), unix.UnixRights(0), nil, 0); err != nil {
				t.Fatal(err)
			}
		}, ErrAncillary},
		{"undecodable", func(t *testing.T, fd int) {
			if _, err := unix.Write(fd, []byte{0x09}); err != nil {
				t.Fatal(err)
			}
		}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, peer := pair(t)
			tc.send(t, peer)
			_, err := c.RecvReport()
			var me *MalformedError
			if !errors.As(err, &me) || (tc.want != nil && !errors.Is(err, tc.want)) {
				t.Fatalf("error = %v, want a MalformedError matching %v", err, tc.want)
			}
			// The channel stays usable.
			if _, err := unix.Write(peer, EncodeReport(&Running{})); err != nil {
				t.Fatal(err)
			}
			if r, err := c.RecvReport(); err != nil {
				t.Fatalf("next packet: %v, %v", r, err)
			}
		})
	}
}

func TestConnDeadline(t *testing.T) {
	c, _ := pair(t)
	c.SetDeadline(time.Now().Add(20 * time.Millisecond))
	if _, err := c.RecvReport(); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("error = %v, want a deadline error", err)
	}
}

func TestNewConnRejects(t *testing.T) {
	t.Run("stream socket", func(t *testing.T) {
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(fds[1])
		if _, err := NewConn(os.NewFile(uintptr(fds[0]), "s")); !errors.Is(err, ErrNotSeqpacket) {
			t.Fatalf("error = %v", err)
		}
	})
	t.Run("pipe", func(t *testing.T) {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		if _, err := NewConn(r); !errors.Is(err, ErrNotSeqpacket) {
			t.Fatalf("error = %v", err)
		}
	})
}

type nopHooks struct{}

func (nopHooks) StageSupervisor(context.Context, hostid.StagedProcessOwnership) error  { return nil }
func (nopHooks) CommitSupervisor(context.Context, hostid.StagedProcessOwnership) error { return nil }
func (nopHooks) StageChild(context.Context, hostid.StagedProcessOwnership) error       { return nil }
func (nopHooks) CommitChild(context.Context, hostid.StagedProcessOwnership) error      { return nil }

func TestLaunchSpecValidate(t *testing.T) {
	good := func() LaunchSpec {
		return LaunchSpec{
			SupervisorPath: "/usr/libexec/lazaret/lazaret-supervisor",
			SupervisorSlot: hostid.SlotSandboxRuntimeSupervisor,
			Slot:           hostid.SlotSandboxAttachedRunsc,
			Argv:           []string{"/usr/bin/runsc", "run"},
			Domain:         ids.DomainID{1},
			Generation:     ids.GenerationID{2},
			Coordinator:    ids.CoordinatorID{3},
		}
	}
	cases := []struct {
		name   string
		mutate func(*LaunchSpec)
		field  string
	}{
		{"ok", func(*LaunchSpec) {}, ""},
		{"relative supervisor", func(s *LaunchSpec) { s.SupervisorPath = "lazaret-supervisor" }, "SupervisorPath"},
		{"supervisor slot", func(s *LaunchSpec) { s.SupervisorSlot = 0 }, "SupervisorSlot"},
		{"slot", func(s *LaunchSpec) { s.Slot = 12 }, "Slot"},
		{"same slots", func(s *LaunchSpec) { s.Slot = s.SupervisorSlot }, "Slot and SupervisorSlot"},
		{"no argv", func(s *LaunchSpec) { s.Argv = nil }, "Argv"},
		{"relative program", func(s *LaunchSpec) { s.Argv = []string{"runsc"} }, "Argv[0]"},
		{"domain", func(s *LaunchSpec) { s.Domain = ids.DomainID{} }, "Domain"},
		{"generation", func(s *LaunchSpec) { s.Generation = ids.GenerationID{} }, "Generation"},
		{"coordinator", func(s *LaunchSpec) { s.Coordinator = ids.CoordinatorID{} }, "Coordinator"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := good()
			tc.mutate(&s)
			err := s.Validate()
			if tc.field == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidSpec) || len(err.Error()) < len(tc.field) || err.Error()[:len(tc.field)] != tc.field {
				t.Fatalf("error = %v, want ErrInvalidSpec naming %s", err, tc.field)
			}
			_, lerr := Launch(context.Background(), s, nopHooks{})
			var se *StepError
			if !errors.As(lerr, &se) || se.Step != "validating the launch spec" || !errors.Is(lerr, ErrInvalidSpec) {
				t.Fatalf("Launch error = %v", lerr)
			}
		})
	}
}
