package control

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"lazaret.dev/pkg/ids"
	"lazaret.dev/pkg/protocol"
)

func TestEnrollRegisterExecute(t *testing.T) {
	g := newGeneration(t)
	h := startServer(t, g, g.config(t, &fakeSessions{}))
	ctx := context.Background()
	c := h.dial(t)
	cli := ids.CLIID(ids.New())
	cred, err := c.Enroll(ctx, cli)
	if err != nil {
		t.Fatal(err)
	}
	if cred.CLIID() != cli {
		t.Fatalf("credential names %v, want %v", cred.CLIID(), cli)
	}
	if s := cred.String(); strings.Contains(strings.ToLower(s), "private") {
		t.Fatalf("credential prints %q", s)
	}
	b := g.binding(cli)
	capability, err := c.Register(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	if err := protocol.VerifyCapability(&capability, &g.coordinator, &g.sandbox); err != nil {
		t.Fatalf("capability: %v", err)
	}
	if got, ok := h.server.Lookup(b.SessionID); !ok || got != b {
		t.Fatalf("Lookup = %v, %v", got, ok)
	}
	again, err := c.Register(ctx, b)
	if err != nil || again != capability {
		t.Fatalf("repeated registration = %v, %v; want the same capability", again, err)
	}

	tests := []struct {
		name           string
		argv           []string
		stdout, stderr string
		code           uint8
	}{
		{name: "separate streams", argv: []string{"print", "to stdout\n", "to stderr\n", "3"}, stdout: "to stdout\n", stderr: "to stderr\n", code: 3},
		{name: "true", argv: []string{"true"}},
		{name: "large output", argv: []string{"repeat", "a", "204800"}, stdout: strings.Repeat("a", 200<<10)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			exit, err := c.Execute(ctx, b.SessionID, tt.argv, &out, &errb)
			if err != nil {
				t.Fatal(err)
			}
			if exit.Outcome != protocol.ExitExited || exit.ExitCode == nil || *exit.ExitCode != tt.code || exit.SessionID != b.SessionID {
				t.Fatalf("exit = %+v, want Exited %d", exit, tt.code)
			}
			if out.String() != tt.stdout || errb.String() != tt.stderr {
				t.Fatalf("stdout %d bytes, stderr %q; want %d bytes, %q", out.Len(), errb.String(), len(tt.stdout), tt.stderr)
			}
		})
	}

	t.Run("sandbox failure", func(t *testing.T) {
		_, err := c.Execute(ctx, b.SessionID, []string{"missing"}, &bytes.Buffer{}, &bytes.Buffer{})
		if !errors.Is(err, ErrSessionFailed) {
			t.Fatalf("err = %v, want ErrSessionFailed", err)
		}
		var ce *Error
		if !errors.As(err, &ce) || ce.Socket != h.paths.Socket || ce.Step != "execution" {
			t.Fatalf("err = %#v, want a step error naming the socket", err)
		}
		// The client redials after the server closed the connection.
		if _, err := c.Execute(ctx, b.SessionID, []string{"true"}, &bytes.Buffer{}, &bytes.Buffer{}); err != nil {
			t.Fatalf("after a refusal: %v", err)
		}
	})
}

// TestRegisterExecutePipelined sends Register and Execute in one write:
// the server answers them in order, and a refused registration stops
// there, running nothing.
func TestRegisterExecutePipelined(t *testing.T) {
	g := newGeneration(t)
	h := startServer(t, g, g.config(t, &fakeSessions{}))
	ctx := context.Background()
	c := h.dial(t)
	cred, err := c.Enroll(ctx, ids.CLIID(ids.New()))
	if err != nil {
		t.Fatal(err)
	}
	b := g.binding(cred.CLIID())
	var out, errb bytes.Buffer
	capability, exit, err := c.RegisterExecute(ctx, b, []string{"print", "out\n", "err\n", "7"}, &out, &errb)
	if err != nil {
		t.Fatal(err)
	}
	if err := protocol.VerifyCapability(&capability, &g.coordinator, &g.sandbox); err != nil || capability.SessionBinding != b {
		t.Fatalf("capability %+v: %v", capability, err)
	}
	if exit.Outcome != protocol.ExitExited || exit.ExitCode == nil || *exit.ExitCode != 7 || out.String() != "out\n" || errb.String() != "err\n" {
		t.Fatalf("exit %+v, stdout %q, stderr %q", exit, out.String(), errb.String())
	}
	// The connection takes the next request.
	if _, err := c.Execute(ctx, b.SessionID, []string{"true"}, &bytes.Buffer{}, &bytes.Buffer{}); err != nil {
		t.Fatalf("Execute after RegisterExecute: %v", err)
	}

	// A binding for another CLI is refused: the Execute behind it is
	// never read, and the error names the registration.
	other := g.binding(ids.CLIID(ids.New()))
	_, _, err = c.RegisterExecute(ctx, other, []string{"print", "ran\n", "", "0"}, &out, &errb)
	var ce *Error
	if !errors.Is(err, ErrUnauthorized) || !errors.As(err, &ce) || ce.Step != "session registration" {
		t.Fatalf("RegisterExecute of a foreign binding = %v, want an unauthorized session registration", err)
	}
	if _, ok := h.server.Lookup(other.SessionID); ok {
		t.Fatal("the foreign binding was registered")
	}
}

func TestRefusals(t *testing.T) {
	g := newGeneration(t)
	h := startServer(t, g, g.config(t, &fakeSessions{}))
	ctx := context.Background()
	owner, ownerBinding := h.enrolled(t)
	other, _ := h.enrolled(t)
	anon := h.dial(t)
	_ = owner

	foreignGen := newGeneration(t).gen
	tests := []struct {
		name string
		run  func() error
		want error
	}{
		{"unenrolled execute", func() error {
			_, err := anon.Execute(ctx, ownerBinding.SessionID, []string{"true"}, &bytes.Buffer{}, &bytes.Buffer{})
			return err
		}, ErrUnauthorized},
		{"unenrolled register", func() error {
			_, err := anon.Register(ctx, g.binding(ids.CLIID(ids.New())))
			return err
		}, ErrUnauthorized},
		{"session of another CLI", func() error {
			_, err := other.Execute(ctx, ownerBinding.SessionID, []string{"true"}, &bytes.Buffer{}, &bytes.Buffer{})
			return err
		}, ErrForeignSession},
		{"interactive in a session of another CLI", func() error {
			_, err := other.Interactive(ctx, protocol.InteractiveSessionRequest{SessionID: ownerBinding.SessionID, Argv: []string{"sh"},
				InitialSize: protocol.TerminalResize{SessionID: ownerBinding.SessionID, Rows: 24, Columns: 80}})
			return err
		}, ErrForeignSession},
		{"unknown session", func() error {
			_, err := other.Execute(ctx, ids.SessionID(ids.New()), []string{"true"}, &bytes.Buffer{}, &bytes.Buffer{})
			return err
		}, ErrUnknownSession},
		{"binding of another CLI", func() error {
			_, err := other.Register(ctx, g.binding(ids.CLIID(ids.New())))
			return err
		}, ErrUnauthorized},
		{"binding of another generation", func() error {
			b := g.binding(other.cred.CLIID())
			b.GenerationIdentity = foreignGen
			_, err := other.Register(ctx, b)
			return err
		}, ErrGeneration},
		{"session ID taken with another binding", func() error {
			b := ownerBinding
			b.CLIID = other.cred.CLIID()
			_, err := other.Register(ctx, b)
			return err
		}, ErrConflict},
		{"CLI ID enrolled twice", func() error {
			_, err := h.dial(t).Enroll(ctx, owner.cred.CLIID())
			return err
		}, ErrConflict},
		{"enrollment for another generation", func() error {
			c := h.dial(t)
			c.pub.GenerationIdentity = foreignGen
			_, err := c.Enroll(ctx, ids.CLIID(ids.New()))
			return err
		}, ErrGeneration},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.run()
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			var ce *Error
			if !errors.As(err, &ce) || ce.Socket != h.paths.Socket {
				t.Fatalf("err = %v does not name the socket", err)
			}
		})
	}
}

// rawConn is an anonymous TLS connection for writing arbitrary bytes.
func rawConn(t *testing.T, h *harness) net.Conn {
	t.Helper()
	c := h.dial(t)
	return c.conn.tc
}

func TestMalformedFrames(t *testing.T) {
	g := newGeneration(t)
	h := startServer(t, g, g.config(t, &fakeSessions{}))
	prefixed := func(b []byte) []byte { return append(binary.BigEndian.AppendUint32(nil, uint32(len(b))), b...) }
	tests := []struct {
		name string
		raw  []byte
	}{
		{"over the size limit", binary.BigEndian.AppendUint32(nil, MaxFrameBytes+1)},
		{"zero length", binary.BigEndian.AppendUint32(nil, 0)},
		{"garbage CBOR", prefixed([]byte{0xff, 0xfe, 0x00})},
		{"unknown envelope field", prefixed([]byte{0xa3, 0x01, 0x01, 0x02, 0x41, 0x00, 0x05, 0x00})},
		{"duplicate key", prefixed([]byte{0xa2, 0x01, 0x01, 0x01, 0x01})},
		{"garbage body", prefixed([]byte{0xa2, 0x01, 0x01, 0x02, 0x42, 0xff, 0xff})},
		{"event instead of request", prefixed([]byte{0xa2, 0x01, 0x04, 0x02, 0x41, 0x02})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := rawConn(t, h)
			if _, err := c.Write(tt.raw); err != nil {
				t.Fatal(err)
			}
			_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
			f, err := ReadFrame(c)
			if err != nil {
				t.Fatalf("reading the refusal: %v", err)
			}
			if f.Type != FrameError || (f.Code != CodeMalformed && f.Code != CodeUnexpected) {
				t.Fatalf("server answered %+v, want a malformed or unexpected error frame", f)
			}
			if _, err := ReadFrame(c); err == nil {
				t.Fatal("connection stayed open after the error frame")
			}
		})
	}
}

func TestPinnedToAnotherCoordinator(t *testing.T) {
	g := newGeneration(t)
	cfg := g.config(t, &fakeSessions{})
	// The server presents a certificate of the right CA and coordinator
	// that is not the one the identity file pins.
	key := mustKey(t)
	impostor, err := g.ca.IssueCoordinator(rand.Reader, key.Public(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if cfg.TLS, err = protocol.ServerTLSConfig(g.ca.CertificateDER(), &impostor, key); err != nil {
		t.Fatal(err)
	}
	h := startServer(t, g, cfg)
	_, err = Dial(context.Background(), h.paths.Socket, h.paths.Identity)
	var ce *Error
	if !errors.As(err, &ce) || ce.Step != "TLS handshake" || !errors.Is(err, protocol.ErrCertificate) {
		t.Fatalf("Dial = %v, want a certificate error in the TLS handshake", err)
	}
}

func TestDialErrorsNameSocketAndStep(t *testing.T) {
	dir := t.TempDir()
	_, err := Dial(context.Background(), filepath.Join(dir, SocketName), filepath.Join(dir, IdentityName))
	var ce *Error
	if !errors.As(err, &ce) || !strings.HasPrefix(ce.Step, "reading identity file") || !strings.Contains(err.Error(), dir) {
		t.Fatalf("Dial = %v", err)
	}
}

func TestInteractiveEcho(t *testing.T) {
	g := newGeneration(t)
	fs := &fakeSessions{}
	h := startServer(t, g, g.config(t, fs))
	c, b := h.enrolled(t)
	ctx := context.Background()
	req := protocol.InteractiveSessionRequest{SessionID: b.SessionID, Argv: []string{"/bin/sh"},
		InitialSize: protocol.TerminalResize{SessionID: b.SessionID, Rows: 24, Columns: 80}}
	s, err := c.Interactive(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if fs.last.Size.Rows != 24 || fs.last.Binding != b {
		t.Fatalf("session started with %+v", fs.last)
	}
	// A second command in the same session is refused while this one runs.
	if _, err := c.Execute(ctx, b.SessionID, []string{"true"}, &bytes.Buffer{}, &bytes.Buffer{}); !errors.Is(err, ErrBusy) {
		t.Fatalf("concurrent Execute = %v, want ErrBusy", err)
	}

	var screen strings.Builder
	var exit *protocol.SessionExit
	readUntil := func(want string) {
		t.Helper()
		for !strings.Contains(screen.String(), want) {
			batch, err := s.Recv()
			if err != nil {
				t.Fatalf("waiting for %q in %q: %v", want, screen.String(), err)
			}
			for _, m := range batch.Messages {
				switch {
				case m.Kind != protocol.InteractiveMessageTerminal:
					t.Fatalf("unexpected message %+v", m)
				case m.Terminal.Kind == protocol.MessageOutput:
					screen.Write(m.Terminal.Output.Bytes)
				default:
					exit = m.Terminal.Exit
				}
			}
		}
	}
	if err := s.Input([]byte("hello\n")); err != nil {
		t.Fatal(err)
	}
	readUntil("hello\n")
	if err := s.Resize(40, 120, 0, 0); err != nil {
		t.Fatal(err)
	}
	readUntil("[resize 40x120]")
	if err := s.Poll(); err != nil {
		t.Fatal(err)
	}
	if err := s.Signal(protocol.SignalQuit); err != nil {
		t.Fatal(err)
	}
	readUntil("[signal 1]")
	if err := s.Signal(protocol.SignalInterrupt); err != nil {
		t.Fatal(err)
	}
	readUntil("[signal 0]")
	for exit == nil {
		readUntil("") // drain to the exit
		batch, err := s.Recv()
		if err != nil {
			t.Fatalf("waiting for the exit: %v", err)
		}
		for _, m := range batch.Messages {
			if m.Kind == protocol.InteractiveMessageTerminal && m.Terminal.Kind == protocol.MessageExit {
				exit = m.Terminal.Exit
			}
		}
	}
	if exit.Outcome != protocol.ExitTerminated || exit.SessionID != b.SessionID {
		t.Fatalf("exit = %+v, want Terminated", exit)
	}
	if _, err := s.Recv(); err == nil {
		t.Fatal("Recv after the exit succeeded")
	}
	// The session is free again.
	if _, err := c.Execute(ctx, b.SessionID, []string{"true"}, &bytes.Buffer{}, &bytes.Buffer{}); err != nil {
		t.Fatalf("Execute after the interactive session: %v", err)
	}
}

func TestInteractiveRefusals(t *testing.T) {
	g := newGeneration(t)
	h := startServer(t, g, g.config(t, &fakeSessions{}))
	c, b := h.enrolled(t)
	ctx := context.Background()
	size := protocol.TerminalResize{SessionID: b.SessionID, Rows: 24, Columns: 80}
	if _, err := c.Interactive(ctx, protocol.InteractiveSessionRequest{SessionID: b.SessionID, Argv: []string{"broken"}, InitialSize: size}); !errors.Is(err, ErrSessionFailed) {
		t.Fatalf("broken command: %v", err)
	}
	anon := h.dial(t)
	if _, err := anon.Interactive(ctx, protocol.InteractiveSessionRequest{SessionID: b.SessionID, Argv: []string{"sh"}, InitialSize: size}); !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("unenrolled: %v", err)
	}
	s, err := c.Interactive(ctx, protocol.InteractiveSessionRequest{SessionID: b.SessionID, Argv: []string{"sh"}, InitialSize: size})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// An event for another session ends the connection with an error.
	other := ids.SessionID(ids.New())
	if err := s.Send(protocol.InteractiveSessionEvent{Kind: protocol.InteractiveTerminal, Terminal: &protocol.SessionTerminalEvent{
		Kind: protocol.EventInput, Input: &protocol.TerminalInput{SessionID: other, Bytes: []byte("x")},
	}}); err != nil {
		t.Fatal(err)
	}
	for {
		_, err := s.Recv()
		if err == nil {
			continue
		}
		if !errors.Is(err, ErrUnexpected) {
			t.Fatalf("Recv = %v, want ErrUnexpected", err)
		}
		break
	}
}

func TestInteractiveHangup(t *testing.T) {
	g := newGeneration(t)
	h := startServer(t, g, g.config(t, &fakeSessions{}))
	c, b := h.enrolled(t)
	ctx := context.Background()
	s, err := c.Interactive(ctx, protocol.InteractiveSessionRequest{SessionID: b.SessionID, Argv: []string{"sh"},
		InitialSize: protocol.TerminalResize{SessionID: b.SessionID, Rows: 24, Columns: 80}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Hangup(); err != nil {
		t.Fatal(err)
	}
	for {
		batch, err := s.Recv()
		if err != nil {
			t.Fatalf("waiting for the exit: %v", err)
		}
		if n := len(batch.Messages); n > 0 && batch.Messages[n-1].Terminal != nil && batch.Messages[n-1].Terminal.Kind == protocol.MessageExit {
			if code := batch.Messages[n-1].Terminal.Exit.ExitCode; code == nil || *code != 0 {
				t.Fatalf("exit = %+v", batch.Messages[n-1].Terminal.Exit)
			}
			break
		}
	}
	s.Close()
	// Dropping the connection mid-session frees the session too.
	s2, err := c.Interactive(ctx, protocol.InteractiveSessionRequest{SessionID: b.SessionID, Argv: []string{"sh"},
		InitialSize: protocol.TerminalResize{SessionID: b.SessionID, Rows: 24, Columns: 80}})
	if err != nil {
		t.Fatal(err)
	}
	s2.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := c.Execute(ctx, b.SessionID, []string{"true"}, &bytes.Buffer{}, &bytes.Buffer{})
		if err == nil {
			break
		}
		if !errors.Is(err, ErrBusy) || time.Now().After(deadline) {
			t.Fatalf("Execute after hang-up: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A client that stops reading makes the command block, not the server
// buffer.
func TestSlowClientBackpressure(t *testing.T) {
	g := newGeneration(t)
	fs := &fakeSessions{}
	h := startServer(t, g, g.config(t, fs))
	c, b := h.enrolled(t)
	conn := c.conn
	req := &protocol.ControlRequest{Kind: protocol.ControlExecute, Execute: &protocol.NonInteractiveSessionRequest{SessionID: b.SessionID, Argv: []string{"flood"}}}
	if err := conn.writeRecord(FrameRequest, req); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	first := fs.producedBytes()
	time.Sleep(500 * time.Millisecond)
	second := fs.producedBytes()
	const bound = 8 << 20
	if second != first || second > bound {
		t.Fatalf("flood produced %d then %d bytes while nobody read; want a standstill below %d", first, second, bound)
	}
	t.Logf("the command stalled after %d bytes", second)
	c.Close()
}

func TestServe(t *testing.T) {
	t.Run("connection limit", func(t *testing.T) {
		g := newGeneration(t)
		cfg := g.config(t, &fakeSessions{})
		cfg.Limits.Connections = 1
		h := startServer(t, g, cfg)
		h.dial(t)
		_, err := Dial(context.Background(), h.paths.Socket, h.paths.Identity)
		if err == nil {
			t.Fatal("second connection admitted beyond the limit of 1")
		}
	})
	t.Run("configuration", func(t *testing.T) {
		g := newGeneration(t)
		cfg := g.config(t, &fakeSessions{})
		cfg.TLS.ClientAuth = 0
		if _, err := NewServer(cfg); err == nil {
			t.Fatal("NewServer accepted a TLS configuration that does not verify clients")
		}
		cfg = g.config(t, &fakeSessions{})
		cfg.CoordinatorKey = mustKey(t)
		if _, err := NewServer(cfg); err == nil {
			t.Fatal("NewServer accepted a key that is not the coordinator credential's")
		}
	})
}

func TestCheckPeer(t *testing.T) {
	tests := []struct {
		peer Peer
		uid  uint32
		ok   bool
	}{
		{Peer{PID: 10, UID: 1000}, 1000, true},
		{Peer{PID: 10, UID: 0}, 1000, false},
		{Peer{PID: 11, UID: 1001}, 1000, false},
		{Peer{PID: 12, UID: 1000}, 0, false},
	}
	for _, tt := range tests {
		err := checkPeer(tt.peer, tt.uid)
		if (err == nil) != tt.ok {
			t.Errorf("checkPeer(%+v, %d) = %v", tt.peer, tt.uid, err)
		}
		if err != nil && (!errors.Is(err, ErrPeerUID) || !strings.Contains(err.Error(), "pid")) {
			t.Errorf("checkPeer error %v does not match ErrPeerUID or name the pid", err)
		}
	}
}
