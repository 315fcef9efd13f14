package control

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"
	"unicode/utf8"

	"lazaret.dev/pkg/ids"
	"lazaret.dev/pkg/protocol"
)

// Limits bound what one server holds. Zero fields take the defaults.
type Limits struct {
	// Connections is the number of concurrent connections (default 256).
	Connections int
	// CLIs is the number of CLI IDs enrolled in the generation (default
	// 65536).
	CLIs int
	// Sessions is the number of registered sessions (default 65536).
	Sessions int
	// HandshakeTimeout bounds the TLS handshake (default 10s).
	HandshakeTimeout time.Duration
	// IdleTimeout bounds the wait for the next request (default 5m).
	IdleTimeout time.Duration
	// HangupTimeout bounds the wait for a session to end after its client
	// went away (default 10s).
	HangupTimeout time.Duration
}

// DefaultLimits are the limits of a zero Limits.
var DefaultLimits = Limits{
	Connections:      256,
	CLIs:             65536,
	Sessions:         65536,
	HandshakeTimeout: 10 * time.Second,
	IdleTimeout:      5 * time.Minute,
	HangupTimeout:    10 * time.Second,
}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits
	if l.Connections > 0 {
		d.Connections = l.Connections
	}
	if l.CLIs > 0 {
		d.CLIs = l.CLIs
	}
	if l.Sessions > 0 {
		d.Sessions = l.Sessions
	}
	if l.HandshakeTimeout > 0 {
		d.HandshakeTimeout = l.HandshakeTimeout
	}
	if l.IdleTimeout > 0 {
		d.IdleTimeout = l.IdleTimeout
	}
	if l.HangupTimeout > 0 {
		d.HangupTimeout = l.HangupTimeout
	}
	return d
}

// Config is what a Server needs. CA, TLS, CoordinatorKey, Coordinator,
// Sandbox and Sessions are required.
type Config struct {
	// CA issues ClientCLI certificates on enrollment.
	CA *protocol.CA
	// TLS is protocol.ServerTLSConfig's result. The server admits
	// connections without a client certificate for enrollment only.
	TLS *tls.Config
	// CoordinatorKey and Coordinator sign session capabilities; Sandbox is
	// the credential the capabilities name. All three belong to one
	// generation, the server's.
	CoordinatorKey protocol.PrivateKey
	Coordinator    protocol.ProtocolCredential
	Sandbox        protocol.ProtocolCredential
	// Sessions runs commands in the sandbox.
	Sessions Sessions
	// OnRegister, when set, is called before a new session registration
	// is accepted (the coordinator records the session); an error refuses
	// the registration.
	OnRegister func(context.Context, protocol.SessionBinding) error
	// Ports publishes ports for enrolled clients; nil refuses every
	// publish frame.
	Ports Ports
	// Logger receives refusals and lifecycle events; nil discards them.
	Logger *slog.Logger
	// Rand is the randomness for certificate serials (crypto/rand when nil).
	Rand io.Reader
	// Now is the clock for certificates (time.Now when nil).
	Now func() time.Time
	// Limits bound the server.
	Limits Limits
}

type registration struct {
	binding    protocol.SessionBinding
	capability protocol.SessionRequestCapability
	active     bool
}

// Server serves the control channel of one generation.
type Server struct {
	cfg    Config
	gen    protocol.GenerationIdentity
	tls    *tls.Config
	log    *slog.Logger
	limits Limits
	uid    uint32
	slots  chan struct{}

	regMu    sync.Mutex // serializes enrollment and registration
	mu       sync.Mutex
	enrolled map[ids.CLIID]struct{}
	sessions map[ids.SessionID]*registration
}

// NewServer checks cfg and builds a server for the generation of
// cfg.Coordinator.
func NewServer(cfg Config) (*Server, error) {
	switch {
	case cfg.CA == nil:
		return nil, errors.New("control server configuration: no CA")
	case cfg.TLS == nil:
		return nil, errors.New("control server configuration: no TLS configuration")
	case cfg.Sessions == nil:
		return nil, errors.New("control server configuration: no Sessions")
	case cfg.TLS.ClientAuth != tls.RequireAndVerifyClientCert || cfg.TLS.ClientCAs == nil || cfg.TLS.MinVersion != tls.VersionTLS13:
		return nil, errors.New("control server configuration: TLS configuration must come from protocol.ServerTLSConfig")
	case cfg.CoordinatorKey.IsZero() || cfg.CoordinatorKey.Public() != cfg.Coordinator.PublicKey:
		return nil, errors.New("control server configuration: coordinator key does not belong to the coordinator credential")
	case cfg.Coordinator.Role != protocol.RoleSessionCoordinator || cfg.Sandbox.Role != protocol.RoleAgentSandbox:
		return nil, errors.New("control server configuration: credentials must be SessionCoordinator and AgentSandbox")
	case cfg.Coordinator.GenerationIdentity != cfg.Sandbox.GenerationIdentity:
		return nil, errors.New("control server configuration: coordinator and sandbox credentials name different generations")
	}
	if err := cfg.Coordinator.GenerationIdentity.Validate(); err != nil {
		return nil, fmt.Errorf("control server configuration: %w", err)
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.Reader
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	tc := cfg.TLS.Clone()
	verify := tc.VerifyConnection
	tc.ClientAuth = tls.VerifyClientCertIfGiven
	tc.VerifyConnection = func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return nil // anonymous: enrollment only
		}
		if verify != nil {
			if err := verify(cs); err != nil {
				return err
			}
		}
		_, err := protocol.PeerCLIID(cs)
		return err
	}
	limits := cfg.Limits.withDefaults()
	return &Server{
		cfg:      cfg,
		gen:      cfg.Coordinator.GenerationIdentity,
		tls:      tc,
		log:      log,
		limits:   limits,
		uid:      uint32(os.Geteuid()),
		slots:    make(chan struct{}, limits.Connections),
		enrolled: make(map[ids.CLIID]struct{}),
		sessions: make(map[ids.SessionID]*registration),
	}, nil
}

// Lookup returns the registered binding of a session; it is a
// protocol.SessionLookup for the mailbox verifier.
func (s *Server) Lookup(id ids.SessionID) (protocol.SessionBinding, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.sessions[id]
	if !ok {
		return protocol.SessionBinding{}, false
	}
	return r.binding, true
}

// Unregister forgets a session; later requests naming it are refused as
// unknown. It reports whether the session was registered.
func (s *Server) Unregister(id ids.SessionID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.sessions[id]
	delete(s.sessions, id)
	return ok
}

// Serve accepts connections on ln until ctx ends or ln fails, handling each
// on its own goroutine. When ctx ends it closes ln and every connection and
// returns once all handlers have finished.
func (s *Server) Serve(ctx context.Context, ln *net.UnixListener) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	go func() {
		<-ctx.Done()
		ln.Close()
	}()
	for {
		c, err := ln.AcceptUnix()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return fmt.Errorf("accepting control connections: %w", err)
		}
		select {
		case s.slots <- struct{}{}:
		default:
			s.log.Warn("control connection refused: connection limit reached", "limit", s.limits.Connections)
			c.Close()
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-s.slots }()
			s.serveConn(ctx, c)
		}()
	}
}

// serverConn is one admitted, handshaken connection.
type serverConn struct {
	s     *Server
	tc    *tls.Conn
	peer  Peer
	cli   ids.CLIID
	authd bool
	log   *slog.Logger
	wmu   sync.Mutex
	wbuf  []byte
	in    chan readResult
	done  chan struct{}
}

type readResult struct {
	f   Frame
	err error
}

func (s *Server) serveConn(ctx context.Context, c *net.UnixConn) {
	defer c.Close()
	peer, err := PeerOf(c)
	if err != nil {
		s.log.Warn("control connection refused", "err", err)
		return
	}
	if err := checkPeer(peer, s.uid); err != nil {
		s.log.Warn("control connection refused: peer runs as another user", "peer_pid", peer.PID, "peer_uid", peer.UID, "want_uid", s.uid)
		return
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	tc := tls.Server(c, s.tls)
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	_ = c.SetDeadline(time.Now().Add(s.limits.HandshakeTimeout))
	if err := tc.HandshakeContext(ctx); err != nil {
		s.log.Info("control TLS handshake failed", "peer_pid", peer.PID, "err", err)
		return
	}
	_ = c.SetDeadline(time.Time{})
	sc := &serverConn{s: s, tc: tc, peer: peer, in: make(chan readResult, 1), done: make(chan struct{})}
	defer close(sc.done)
	defer func() {
		// close_notify, without waiting on a client that stopped reading.
		_ = c.SetWriteDeadline(time.Now().Add(time.Second))
		_ = tc.Close()
	}()
	cs := tc.ConnectionState()
	if len(cs.PeerCertificates) > 0 {
		cli, err := protocol.PeerCLIID(cs)
		if err != nil {
			s.log.Info("control connection refused: client certificate", "peer_pid", peer.PID, "err", err)
			return
		}
		sc.cli, sc.authd = cli, true
	}
	sc.log = s.log.With("peer_pid", peer.PID, "cli_id", sc.cliName())
	go sc.readLoop()
	sc.run(ctx)
}

func (c *serverConn) cliName() string {
	if !c.authd {
		return "anonymous"
	}
	return c.cli.String()
}

func (c *serverConn) readLoop() {
	for {
		f, err := ReadFrame(c.tc)
		select {
		case c.in <- readResult{f, err}:
		case <-c.done:
			return
		}
		if err != nil {
			return
		}
	}
}

func (c *serverConn) write(f Frame) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	b, err := AppendFrame(c.wbuf[:0], f)
	if err != nil {
		return err
	}
	c.wbuf = b
	_, err = c.tc.Write(b)
	return err
}

func (c *serverConn) writeRecord(t FrameType, r protocol.Record) error {
	body, err := protocol.Encode(r)
	if err != nil {
		return fmt.Errorf("encoding %v frame: %w", t, err)
	}
	return c.write(Frame{Type: t, Body: body})
}

// fail sends an error frame; the connection ends after it.
func (c *serverConn) fail(err error) {
	re := toRemote(err)
	c.log.Info("control request refused", "code", re.Code.String(), "reason", re.Message)
	if werr := c.write(Frame{Type: FrameError, Code: re.Code, Message: re.Message}); werr != nil {
		c.log.Debug("sending error frame", "err", werr)
	}
}

// toRemote maps an error to what the client is told.
func toRemote(err error) *RemoteError {
	var re *RemoteError
	switch {
	case errors.As(err, &re):
	case errors.Is(err, protocol.ErrGeneration):
		re = &RemoteError{Code: CodeGeneration, Message: err.Error()}
	case errors.Is(err, protocol.ErrMalformed), errors.Is(err, ErrFrame), errors.Is(err, ErrFrameSize):
		re = &RemoteError{Code: CodeMalformed, Message: err.Error()}
	default:
		re = &RemoteError{Code: CodeInternal, Message: err.Error()}
	}
	out := *re
	out.Message = clip(out.Message)
	if out.Message == "" {
		out.Message = out.Code.String()
	}
	return &out
}

// clip shortens s to MaxErrorMessageBytes without splitting a rune.
func clip(s string) string {
	if !utf8.ValidString(s) {
		s = string([]rune(s))
	}
	if len(s) <= MaxErrorMessageBytes {
		return s
	}
	s = s[:MaxErrorMessageBytes]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}

func (c *serverConn) run(ctx context.Context) {
	idle := time.NewTimer(c.s.limits.IdleTimeout)
	defer idle.Stop()
	for {
		idle.Reset(c.s.limits.IdleTimeout)
		var r readResult
		select {
		case r = <-c.in:
		case <-idle.C:
			c.log.Debug("control connection idle; closing")
			return
		case <-ctx.Done():
			return
		}
		if r.err != nil {
			if !errors.Is(r.err, io.EOF) && !errors.Is(r.err, net.ErrClosed) {
				c.fail(r.err)
			}
			return
		}
		if r.f.Type == FramePublish {
			if err := c.publish(r.f.Body); err != nil {
				c.fail(err)
				return
			}
			continue
		}
		if r.f.Type != FrameRequest {
			c.fail(refuse(CodeUnexpected, "expected a request frame, got a %v frame", r.f.Type))
			return
		}
		var req protocol.ControlRequest
		if err := decodeRecord(r.f.Body, &req); err != nil {
			c.fail(err)
			return
		}
		var err error
		switch req.Kind {
		case protocol.ControlEnroll:
			err = c.enroll(req.Enroll)
		case protocol.ControlRegister:
			err = c.register(ctx, req.Register)
		case protocol.ControlExecute:
			err = c.execute(ctx, req.Execute)
		default:
			c.interactive(ctx, req.ExecuteInteractive)
			return
		}
		if err != nil {
			if !errors.Is(err, ErrClosed) {
				c.fail(err)
			}
			return
		}
	}
}

func decodeRecord(b []byte, r protocol.Record) error {
	if err := protocol.Decode(b, r); err != nil {
		return refuse(CodeMalformed, "%v", err)
	}
	if err := r.Validate(); err != nil {
		return refuse(CodeMalformed, "%v", err)
	}
	return nil
}

func (c *serverConn) enroll(req *protocol.ClientEnrollmentRequest) error {
	s := c.s
	if c.authd {
		return refuse(CodeUnauthorized, "this connection is already enrolled as CLI %v; enrollment needs a connection without a client certificate", c.cli)
	}
	s.regMu.Lock()
	defer s.regMu.Unlock()
	s.mu.Lock()
	_, dup := s.enrolled[req.CLIID]
	n := len(s.enrolled)
	s.mu.Unlock()
	if dup {
		return refuse(CodeConflict, "CLI ID %v is already enrolled in this generation; use a fresh CLI ID", req.CLIID)
	}
	if n >= s.limits.CLIs {
		return refuse(CodeLimit, "%d CLIs are enrolled, the limit of this generation", n)
	}
	cred, err := s.cfg.CA.IssueClient(s.cfg.Rand, req, s.cfg.Now())
	if err != nil {
		if errors.Is(err, protocol.ErrGeneration) {
			return refuse(CodeGeneration, "%v", err)
		}
		return refuse(CodeEnrollmentRefused, "%v", err)
	}
	s.mu.Lock()
	s.enrolled[req.CLIID] = struct{}{}
	s.mu.Unlock()
	c.log.Info("CLI enrolled", "enrolled_cli_id", req.CLIID.String())
	return c.writeRecord(FrameResponse, &protocol.ControlResponse{
		Kind:     protocol.ControlEnrolled,
		Enrolled: &protocol.ClientEnrollmentResponse{Credential: cred},
	})
}

func (c *serverConn) requireCLI(what string) error {
	if !c.authd {
		return refuse(CodeUnauthorized, "%s needs an enrolled CLI: enroll, then connect with the issued client certificate", what)
	}
	return nil
}

func (c *serverConn) register(ctx context.Context, req *protocol.SessionRegistrationRequest) error {
	if err := c.requireCLI("registration"); err != nil {
		return err
	}
	s := c.s
	b := req.SessionBinding
	if b.GenerationIdentity != s.gen {
		return refuse(CodeGeneration, "binding names generation %v, this is generation %v", b.GenerationIdentity.GenerationID, s.gen.GenerationID)
	}
	if b.CLIID != c.cli {
		return refuse(CodeUnauthorized, "binding names CLI %v, the connection's certificate names CLI %v", b.CLIID, c.cli)
	}
	s.regMu.Lock()
	defer s.regMu.Unlock()
	s.mu.Lock()
	old, exists := s.sessions[b.SessionID]
	n := len(s.sessions)
	s.mu.Unlock()
	var capability protocol.SessionRequestCapability
	switch {
	case exists && old.binding != b:
		return refuse(CodeConflict, "session %v is already registered with another binding", b.SessionID)
	case exists:
		capability = old.capability
	case n >= s.limits.Sessions:
		return refuse(CodeLimit, "%d sessions are registered, the limit of this generation", n)
	default:
		if s.cfg.OnRegister != nil {
			if err := s.cfg.OnRegister(ctx, b); err != nil {
				return refuse(CodeInternal, "recording session %v: %v", b.SessionID, err)
			}
		}
		var err error
		capability, err = protocol.IssueSessionCapability(s.cfg.CoordinatorKey, &s.cfg.Coordinator, &s.cfg.Sandbox, b)
		if err != nil {
			return fmt.Errorf("issuing session capability: %w", err)
		}
		s.mu.Lock()
		s.sessions[b.SessionID] = &registration{binding: b, capability: capability}
		s.mu.Unlock()
		c.log.Info("session registered", "session_id", b.SessionID.String())
	}
	return c.writeRecord(FrameResponse, &protocol.ControlResponse{
		Kind:       protocol.ControlRegistered,
		Registered: &protocol.SessionRegistrationResponse{SessionCapability: capability},
	})
}

// acquire marks a registered session of this connection's CLI as running.
// The returned release frees it exactly once. A command's final frame (its
// exit, or the error that ends it) is written only after release, so a
// client that starts its next command as soon as it reads that frame never
// finds the session still busy.
func (c *serverConn) acquire(id ids.SessionID, what string) (*registration, func(), error) {
	if err := c.requireCLI(what); err != nil {
		return nil, nil, err
	}
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.sessions[id]
	switch {
	case !ok:
		return nil, nil, refuse(CodeUnknownSession, "session %v is not registered; register it before running commands", id)
	case r.binding.CLIID != c.cli:
		return nil, nil, refuse(CodeForeignSession, "session %v belongs to another CLI", id)
	case r.active:
		return nil, nil, refuse(CodeBusy, "session %v is already running a command", id)
	}
	r.active = true
	var once sync.Once
	release := func() {
		once.Do(func() {
			s.mu.Lock()
			r.active = false
			s.mu.Unlock()
		})
	}
	return r, release, nil
}

// outputWriter turns Writes into Stdout or Stderr frames.
type outputWriter struct {
	c    *serverConn
	kind protocol.NonInteractiveKind
	id   ids.SessionID
}

func (w *outputWriter) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		chunk := p[:min(len(p), protocol.MaxTerminalBytes)]
		msg := protocol.NonInteractiveSessionMessage{Kind: w.kind, Output: &protocol.NonInteractiveOutput{SessionID: w.id, Bytes: chunk}}
		if err := w.c.writeRecord(FrameOutput, &msg); err != nil {
			return n, err
		}
		n += len(chunk)
		p = p[len(chunk):]
	}
	return n, nil
}

func (c *serverConn) execute(ctx context.Context, req *protocol.NonInteractiveSessionRequest) error {
	reg, release, err := c.acquire(req.SessionID, "execution")
	if err != nil {
		return err
	}
	// Deferred release runs before the caller writes a returned error.
	defer release()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// While the command runs the client has nothing to send: a frame is a
	// protocol violation and a read error means the client is gone.
	var violation error
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case r := <-c.in:
			if r.err == nil {
				violation = refuse(CodeUnexpected, "a %v frame arrived while a command was running", r.f.Type)
			} else {
				violation = ErrClosed
			}
			cancel()
		case <-ctx.Done():
		}
	}()
	stdout := &outputWriter{c: c, kind: protocol.NonInteractiveStdout, id: req.SessionID}
	stderr := &outputWriter{c: c, kind: protocol.NonInteractiveStderr, id: req.SessionID}
	c.log.Debug("executing", "session_id", req.SessionID.String(), "argc", len(req.Argv))
	exit, err := c.s.cfg.Sessions.Execute(ctx, ExecRequest{Binding: reg.binding, Capability: reg.capability, Argv: req.Argv}, stdout, stderr)
	cancel()
	<-watched
	if violation != nil {
		return violation
	}
	if err != nil {
		return refuse(CodeSessionFailed, "%v", err)
	}
	exit.SessionID = req.SessionID
	release()
	return c.writeRecord(FrameOutput, &protocol.NonInteractiveSessionMessage{Kind: protocol.NonInteractiveExit, Exit: &exit})
}

// publish adds the forwards of a publish frame and answers with every
// forward now published. Only an enrolled client may publish.
func (c *serverConn) publish(body []byte) error {
	if !c.authd {
		return refuse(CodeUnauthorized, "publishing a port needs an enrolled client")
	}
	fs, err := DecodePorts(body)
	if err != nil {
		return refuse(CodeMalformed, "%v", err)
	}
	if len(fs) == 0 {
		return refuse(CodeMalformed, "a publish frame names no port")
	}
	if c.s.cfg.Ports == nil {
		return refuse(CodePortRefused, "this Domain publishes no ports")
	}
	all, err := c.s.cfg.Ports.Publish(fs)
	if err != nil {
		var re *RemoteError
		if errors.As(err, &re) {
			return re
		}
		return refuse(CodePortRefused, "%v", err)
	}
	out, err := EncodePorts(all)
	if err != nil {
		return err
	}
	c.log.Info("ports published", "requested", len(fs), "published", len(all))
	return c.write(Frame{Type: FramePublished, Body: out})
}
