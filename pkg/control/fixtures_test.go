package control

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"lazaret.dev/pkg/ids"
	"lazaret.dev/pkg/protocol"
)

// generation is one generation's protocol material.
type generation struct {
	gen            protocol.GenerationIdentity
	ca             *protocol.CA
	issuer         protocol.PrivateKey
	manifest       protocol.TrustManifest
	tlsKey         protocol.PrivateKey
	tlsCred        protocol.TLSCredential
	coordinatorKey protocol.PrivateKey
	coordinator    protocol.ProtocolCredential
	sandbox        protocol.ProtocolCredential
	pub            protocol.ProtocolPublicationIdentity
}

func mustKey(t testing.TB) protocol.PrivateKey {
	t.Helper()
	k, err := protocol.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func newGeneration(t testing.TB) *generation {
	t.Helper()
	g := &generation{gen: protocol.GenerationIdentity{
		AgentProfile:             "claude",
		DomainID:                 ids.DomainID(ids.Digest{1, 2, 3}),
		GenerationID:             ids.GenerationID(ids.New()),
		ConfigurationFingerprint: ids.Digest{4, 5, 6},
		CoordinatorID:            ids.CoordinatorID(ids.New()),
		SandboxID:                ids.SandboxID(ids.New()),
	}}
	var err error
	now := time.Now()
	if g.ca, err = protocol.NewCA(rand.Reader, g.gen, now); err != nil {
		t.Fatal(err)
	}
	g.issuer = mustKey(t)
	if g.manifest, err = protocol.NewTrustManifest(g.gen, g.ca.CertificateDER(), g.issuer); err != nil {
		t.Fatal(err)
	}
	g.tlsKey = mustKey(t)
	if g.tlsCred, err = g.ca.IssueCoordinator(rand.Reader, g.tlsKey.Public(), now); err != nil {
		t.Fatal(err)
	}
	g.coordinatorKey = mustKey(t)
	if g.coordinator, err = protocol.IssueProtocolCredential(g.issuer, g.gen, protocol.RoleSessionCoordinator, g.coordinatorKey.Public()); err != nil {
		t.Fatal(err)
	}
	if g.sandbox, err = protocol.IssueProtocolCredential(g.issuer, g.gen, protocol.RoleAgentSandbox, mustKey(t).Public()); err != nil {
		t.Fatal(err)
	}
	if g.pub, err = protocol.NewPublicationIdentity(&g.manifest, g.ca.CertificateDER(), &g.tlsCred); err != nil {
		t.Fatal(err)
	}
	return g
}

func (g *generation) config(t testing.TB, sessions Sessions) Config {
	t.Helper()
	tc, err := protocol.ServerTLSConfig(g.ca.CertificateDER(), &g.tlsCred, g.tlsKey)
	if err != nil {
		t.Fatal(err)
	}
	return Config{
		CA: g.ca, TLS: tc, CoordinatorKey: g.coordinatorKey, Coordinator: g.coordinator, Sandbox: g.sandbox,
		Sessions: sessions, Logger: testLogger(t),
	}
}

func (g *generation) binding(cli ids.CLIID) protocol.SessionBinding {
	return protocol.SessionBinding{
		GenerationIdentity: g.gen, CLIID: cli, SessionID: ids.SessionID(ids.New()), SessionAnchorPublicKey: protocol.PublicKey{9, 9, 9},
	}
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(bytes.TrimRight(p, "\n")))
	return len(p), nil
}

func testLogger(t testing.TB) *slog.Logger {
	if _, ok := t.(*testing.B); ok {
		return nil
	}
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// harness is a published, serving control socket.
type harness struct {
	g      *generation
	paths  Paths
	server *Server
	pub    Publication
}

func startServer(t testing.TB, g *generation, cfg Config) *harness {
	t.Helper()
	p := DomainPaths(t.TempDir(), g.gen.DomainID)
	staged, err := Stage(p, &g.pub, &g.manifest)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := staged.Publish()
	if err != nil {
		t.Fatal(err)
	}
	srv, err := NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, staged.Listener) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
		if err := Withdraw(pub); err != nil {
			t.Errorf("Withdraw: %v", err)
		}
	})
	return &harness{g: g, paths: p, server: srv, pub: pub}
}

func (h *harness) dial(t testing.TB) *Client {
	t.Helper()
	c, err := Dial(context.Background(), h.paths.Socket, h.paths.Identity)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// enrolled dials, enrolls a fresh CLI and registers one session.
func (h *harness) enrolled(t testing.TB) (*Client, protocol.SessionBinding) {
	t.Helper()
	c := h.dial(t)
	cred, err := c.Enroll(context.Background(), ids.CLIID(ids.New()))
	if err != nil {
		t.Fatal(err)
	}
	b := h.g.binding(cred.CLIID())
	if _, err := c.Register(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	return c, b
}

// fakeSessions runs canned commands:
//
//	true                      exit 0, no output
//	print OUT ERR CODE        OUT on stdout, ERR on stderr, exit CODE
//	repeat S N                S repeated N times on stdout, exit 0
//	flood                     endless stdout until cancelled
//	broken                    the sandbox refuses to run it
//
// and an interactive echo terminal.
type fakeSessions struct {
	mu       sync.Mutex
	produced int64 // bytes written by flood
	last     InteractiveRequest
}

func exited(code uint8) protocol.SessionExit {
	return protocol.SessionExit{Outcome: protocol.ExitExited, ExitCode: &code}
}

func (f *fakeSessions) Execute(ctx context.Context, req ExecRequest, stdout, stderr io.Writer) (protocol.SessionExit, error) {
	switch req.Argv[0] {
	case "true":
		return exited(0), nil
	case "print":
		var code uint8
		fmt.Sscan(req.Argv[3], &code)
		if _, err := io.WriteString(stdout, req.Argv[1]); err != nil {
			return protocol.SessionExit{}, err
		}
		if _, err := io.WriteString(stderr, req.Argv[2]); err != nil {
			return protocol.SessionExit{}, err
		}
		return exited(code), nil
	case "repeat":
		var n int
		fmt.Sscan(req.Argv[2], &n)
		if _, err := io.WriteString(stdout, strings.Repeat(req.Argv[1], n)); err != nil {
			return protocol.SessionExit{}, err
		}
		return exited(0), nil
	case "flood":
		buf := bytes.Repeat([]byte("x"), 16<<10)
		for ctx.Err() == nil {
			n, err := stdout.Write(buf)
			f.mu.Lock()
			f.produced += int64(n)
			f.mu.Unlock()
			if err != nil {
				return protocol.SessionExit{}, err
			}
		}
		return protocol.SessionExit{Outcome: protocol.ExitTerminated}, nil
	}
	return protocol.SessionExit{}, fmt.Errorf("no command %q in the sandbox", req.Argv[0])
}

func (f *fakeSessions) producedBytes() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.produced
}

func (f *fakeSessions) Interactive(ctx context.Context, req InteractiveRequest) (InteractiveSession, error) {
	if req.Argv[0] == "broken" {
		return nil, fmt.Errorf("no command %q in the sandbox", req.Argv[0])
	}
	f.mu.Lock()
	f.last = req
	f.mu.Unlock()
	r, w := io.Pipe()
	s := &echoSession{r: r, w: w, done: make(chan struct{}), prompts: make(chan protocol.TerminalPrompt, 1)}
	return s, nil
}

// echoSession echoes input and reports resizes and signals as output.
// Interrupt ends it as Terminated; hang-up ends it as Exited 0.
type echoSession struct {
	r       *io.PipeReader
	w       *io.PipeWriter
	once    sync.Once
	exit    protocol.SessionExit
	done    chan struct{}
	prompts chan protocol.TerminalPrompt
}

func (s *echoSession) end(exit protocol.SessionExit) {
	s.once.Do(func() {
		s.exit = exit
		s.w.Close()
		close(s.done)
	})
}

func (s *echoSession) Read(p []byte) (int, error) { return s.r.Read(p) }
func (s *echoSession) Input(p []byte) error {
	_, err := s.w.Write(p)
	return err
}
func (s *echoSession) Resize(size protocol.TerminalResize) error {
	_, err := fmt.Fprintf(s.w, "[resize %dx%d]", size.Rows, size.Columns)
	return err
}
func (s *echoSession) Signal(sig protocol.TerminalSignalKind) error {
	if _, err := fmt.Fprintf(s.w, "[signal %d]", sig); err != nil {
		return err
	}
	if sig == protocol.SignalInterrupt {
		s.end(protocol.SessionExit{Outcome: protocol.ExitTerminated})
	}
	return nil
}
func (s *echoSession) Decide(protocol.SignedProtocolRecord) error { return nil }
func (s *echoSession) Prompts() <-chan protocol.TerminalPrompt    { return s.prompts }
func (s *echoSession) Close() error {
	s.end(exited(0))
	return nil
}
func (s *echoSession) Wait(ctx context.Context) (protocol.SessionExit, error) {
	select {
	case <-s.done:
		return s.exit, nil
	case <-ctx.Done():
		return protocol.SessionExit{}, ctx.Err()
	}
}
