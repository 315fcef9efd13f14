package control

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"lazaret.dev/pkg/ids"
	"lazaret.dev/pkg/protocol"
)

// Credential is a CLI's enrolled TLS identity. It lives in memory only: it
// is never written anywhere, and it prints without its private key.
type Credential struct {
	TLS protocol.TLSCredential
	key protocol.PrivateKey
}

// CLIID is the CLI ID the credential's certificate names.
func (c *Credential) CLIID() ids.CLIID { return ids.CLIID(c.TLS.SubjectID) }

func (c *Credential) String() string {
	return fmt.Sprintf("ClientCLI credential %v (certificate %v)", c.TLS.SubjectID, c.TLS.CertificateSHA256)
}

// GoString redacts the key like String.
func (c *Credential) GoString() string { return c.String() }

// Client is a CLI's connection to one generation's control socket. Its
// methods run one request at a time; an interactive session gets its own
// connection.
type Client struct {
	socket   string
	identity string
	pub      protocol.ProtocolPublicationIdentity
	uid      uint32

	mu   sync.Mutex
	cred *Credential
	conn *clientConn
}

type clientConn struct {
	tc   *tls.Conn
	wmu  sync.Mutex
	wbuf []byte
}

func (c *clientConn) write(f Frame) error {
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

// writeFrames writes fs in one write.
func (c *clientConn) writeFrames(fs ...Frame) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	b := c.wbuf[:0]
	for _, f := range fs {
		var err error
		if b, err = AppendFrame(b, f); err != nil {
			return err
		}
	}
	c.wbuf = b
	_, err := c.tc.Write(b)
	return err
}

func (c *clientConn) writeRecord(t FrameType, r protocol.Record) error {
	body, err := protocol.Encode(r)
	if err != nil {
		return err
	}
	return c.write(Frame{Type: t, Body: body})
}

// read returns the next frame; an error frame becomes its *RemoteError.
func (c *clientConn) read() (Frame, error) {
	f, err := ReadFrame(c.tc)
	if err != nil {
		return f, err
	}
	if f.Type == FrameError {
		return f, &RemoteError{Code: f.Code, Message: f.Message}
	}
	return f, nil
}

// Dial reads and verifies the identity file at identityPath, then connects
// to the control socket at socketPath without a client certificate: the
// server must run as the same user and present exactly the pinned
// coordinator certificate. The connection may only Enroll until
// UseCredential or Enroll gives it a certificate.
func Dial(ctx context.Context, socketPath, identityPath string) (*Client, error) {
	c := &Client{socket: socketPath, identity: identityPath, uid: uint32(os.Geteuid())}
	pub, _, err := ReadIdentityFile(identityPath)
	if err != nil {
		return nil, c.err("reading identity file "+fmt.Sprintf("%q", identityPath), err)
	}
	c.pub = pub
	conn, err := c.connect(ctx, nil)
	if err != nil {
		return nil, err
	}
	c.conn = conn
	return c, nil
}

// Publication is the verified identity the client was dialed with.
func (c *Client) Publication() protocol.ProtocolPublicationIdentity { return c.pub }

// Close closes the connection.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn == nil {
		return nil
	}
	err := c.conn.tc.Close()
	c.conn = nil
	return err
}

func (c *Client) err(step string, err error) error {
	return &Error{Socket: c.socket, Step: step, Err: err}
}

// pinnedConfig is the configuration of a client without a certificate: the
// same server checks as protocol.ClientTLSConfig.
func pinnedConfig(pub *protocol.ProtocolPublicationIdentity) *tls.Config {
	return &tls.Config{
		MinVersion:         tls.VersionTLS13,
		MaxVersion:         tls.VersionTLS13,
		InsecureSkipVerify: true, // no hostname; VerifyConnection checks the pin and chain
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) != 1 {
				return fmt.Errorf("%w: server sent %d certificates, want 1", protocol.ErrCertificate, len(cs.PeerCertificates))
			}
			leaf := cs.PeerCertificates[0]
			sum := ids.Digest(sha256.Sum256(leaf.Raw))
			if sum != pub.CoordinatorTLSCertificateSHA256 {
				return fmt.Errorf("%w: server certificate %v is not the pinned %v", protocol.ErrCertificate, sum, pub.CoordinatorTLSCertificateSHA256)
			}
			cred := protocol.TLSCredential{
				GenerationIdentity: pub.GenerationIdentity,
				Role:               protocol.TLSRoleSessionCoordinator,
				SubjectID:          ids.ID(pub.GenerationIdentity.CoordinatorID),
				CertificateDER:     leaf.Raw,
				CertificateSHA256:  sum,
			}
			return protocol.VerifyTLSCredential(&cred, pub.TLSCACertificateDER, pub.GenerationIdentity, protocol.TLSRoleSessionCoordinator, time.Now())
		},
	}
}

// connect opens one verified connection, with cred's certificate when cred
// is set.
func (c *Client) connect(ctx context.Context, cred *Credential) (*clientConn, error) {
	dir := filepath.Dir(c.socket)
	dirfd, err := openDir(dir)
	if err != nil {
		return nil, c.err("opening socket directory", err)
	}
	defer unix.Close(dirfd)
	if err := checkPrivateDir(dirfd, dir, c.uid); err != nil {
		return nil, c.err("checking socket directory", err)
	}
	var d net.Dialer
	nc, err := d.DialContext(ctx, "unix", procPath(dirfd, filepath.Base(c.socket)))
	if err != nil {
		return nil, c.err("connecting", err)
	}
	uc, ok := nc.(*net.UnixConn)
	if !ok {
		nc.Close()
		return nil, c.err("connecting", fmt.Errorf("connection is a %T, not a unix socket", nc))
	}
	peer, err := PeerOf(uc)
	if err == nil {
		err = checkPeer(peer, c.uid)
	}
	if err != nil {
		nc.Close()
		return nil, c.err("checking server credentials", err)
	}
	cfg := pinnedConfig(&c.pub)
	if cred != nil {
		if cfg, err = protocol.ClientTLSConfig(&c.pub, &cred.TLS, cred.key); err != nil {
			nc.Close()
			return nil, c.err("preparing TLS", err)
		}
	}
	tc := tls.Client(nc, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		nc.Close()
		return nil, c.err("TLS handshake", err)
	}
	return &clientConn{tc: tc}, nil
}

// ensure returns the open connection, dialing one when the last was closed
// by an error. The caller holds mu.
func (c *Client) ensure(ctx context.Context) (*clientConn, error) {
	if c.conn != nil {
		return c.conn, nil
	}
	conn, err := c.connect(ctx, c.cred)
	if err != nil {
		return nil, err
	}
	c.conn = conn
	return conn, nil
}

// drop closes the connection after an error; the next request redials.
func (c *Client) drop() {
	if c.conn != nil {
		c.conn.tc.Close()
		c.conn = nil
	}
}

// bind makes ctx's end interrupt the connection's I/O.
func bind(ctx context.Context, conn *clientConn) func() bool {
	if d, ok := ctx.Deadline(); ok {
		_ = conn.tc.SetDeadline(d)
	}
	return context.AfterFunc(ctx, func() { _ = conn.tc.SetDeadline(time.Unix(1, 0)) })
}

// call sends req and returns the response frame.
func (c *Client) call(ctx context.Context, step string, req *protocol.ControlRequest) (*protocol.ControlResponse, error) {
	body, err := protocol.Encode(req)
	if err != nil {
		return nil, c.err(step, err)
	}
	f, err := c.exchange(ctx, step, Frame{Type: FrameRequest, Body: body}, FrameResponse, "a response")
	if err != nil {
		return nil, err
	}
	var resp protocol.ControlResponse
	if err := protocol.Decode(f.Body, &resp); err != nil {
		c.drop()
		return nil, c.err(step, err)
	}
	return &resp, nil
}

// exchange writes out and reads the frame that answers it, which must be
// of type want (described as what in the error). Any failure drops the
// connection, so the next call starts a fresh one. The caller holds c.mu.
func (c *Client) exchange(ctx context.Context, step string, out Frame, want FrameType, what string) (Frame, error) {
	conn, err := c.ensure(ctx)
	if err != nil {
		return Frame{}, err
	}
	stop := bind(ctx, conn)
	defer stop()
	if err := conn.write(out); err != nil {
		c.drop()
		return Frame{}, c.err(step, ctxErr(ctx, err))
	}
	f, err := conn.read()
	if err != nil {
		c.drop()
		return Frame{}, c.err(step, ctxErr(ctx, err))
	}
	if f.Type != want {
		c.drop()
		return Frame{}, c.err(step, fmt.Errorf("%w: server sent a %v frame, want %s", ErrFrame, f.Type, what))
	}
	_ = conn.tc.SetDeadline(time.Time{})
	return f, nil
}

func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%w (%v)", ctx.Err(), err)
	}
	return err
}

// Enroll generates a TLS key for cliID, has the coordinator certify it, and
// reconnects with the issued certificate. The returned credential is the
// only copy of the key.
func (c *Client) Enroll(ctx context.Context, cliID ids.CLIID) (*Credential, error) {
	const step = "enrollment"
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cred != nil {
		return nil, c.err(step, fmt.Errorf("already enrolled as CLI %v", c.cred.CLIID()))
	}
	key, err := protocol.GenerateKey(rand.Reader)
	if err != nil {
		return nil, c.err(step, err)
	}
	csr, err := protocol.NewClientCSR(cliID, key)
	if err != nil {
		return nil, c.err(step, err)
	}
	resp, err := c.call(ctx, step, &protocol.ControlRequest{Kind: protocol.ControlEnroll, Enroll: &protocol.ClientEnrollmentRequest{
		GenerationIdentity: c.pub.GenerationIdentity, CLIID: cliID, CertificateSigningRequestDER: csr,
	}})
	if err != nil {
		return nil, err
	}
	if resp.Kind != protocol.ControlEnrolled {
		c.drop()
		return nil, c.err(step, fmt.Errorf("%w: server answered %d, want Enrolled", ErrFrame, resp.Kind))
	}
	tlsCred := resp.Enrolled.Credential
	if err := protocol.VerifyTLSCredential(&tlsCred, c.pub.TLSCACertificateDER, c.pub.GenerationIdentity, protocol.TLSRoleClientCLI, time.Now()); err != nil {
		c.drop()
		return nil, c.err(step, err)
	}
	if tlsCred.SubjectID != ids.ID(cliID) {
		c.drop()
		return nil, c.err(step, fmt.Errorf("%w: certificate names CLI %v, requested %v", protocol.ErrCertificate, tlsCred.SubjectID, cliID))
	}
	cred := &Credential{TLS: tlsCred, key: key}
	if err := c.useLocked(ctx, cred); err != nil {
		return nil, err
	}
	return cred, nil
}

// UseCredential reconnects with an enrolled credential.
func (c *Client) UseCredential(ctx context.Context, cred *Credential) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.useLocked(ctx, cred)
}

func (c *Client) useLocked(ctx context.Context, cred *Credential) error {
	conn, err := c.connect(ctx, cred)
	if err != nil {
		return err
	}
	c.drop()
	c.cred, c.conn = cred, conn
	return nil
}

// Register registers the session of binding and returns its capability.
// The binding must name the generation of the identity file and the
// client's CLI ID.
func (c *Client) Register(ctx context.Context, binding protocol.SessionBinding) (protocol.SessionRequestCapability, error) {
	const step = "session registration"
	c.mu.Lock()
	defer c.mu.Unlock()
	resp, err := c.call(ctx, step, registerRequest(binding))
	if err != nil {
		return protocol.SessionRequestCapability{}, err
	}
	return c.registered(step, resp, binding)
}

func registerRequest(binding protocol.SessionBinding) *protocol.ControlRequest {
	return &protocol.ControlRequest{Kind: protocol.ControlRegister, Register: &protocol.SessionRegistrationRequest{SessionBinding: binding}}
}

// registered checks the answer to a registration of binding and returns
// the capability. The caller holds mu.
func (c *Client) registered(step string, resp *protocol.ControlResponse, binding protocol.SessionBinding) (protocol.SessionRequestCapability, error) {
	if resp.Kind != protocol.ControlRegistered {
		c.drop()
		return protocol.SessionRequestCapability{}, c.err(step, fmt.Errorf("%w: server answered %d, want Registered", ErrFrame, resp.Kind))
	}
	capability := resp.Registered.SessionCapability
	if capability.SessionBinding != binding || capability.ComputeID() != capability.CapabilityID {
		c.drop()
		return protocol.SessionRequestCapability{}, c.err(step, fmt.Errorf("%w: capability does not bind the registered session", protocol.ErrCapability))
	}
	return capability, nil
}

// RegisterExecute registers the session of binding and runs argv in it
// without a terminal, as Register and then Execute do, but pipelined: both
// requests leave in one write, so the command starts one round trip
// sooner. The server answers requests on a connection in order, so the
// Registered answer comes first and is checked as Register checks it; if
// it fails that check, the connection is closed, which stops the command
// if it had started (the server ends a command whose client went away).
// A refused registration is the server's error frame, after which it
// closes the connection without reading the Execute.
func (c *Client) RegisterExecute(ctx context.Context, binding protocol.SessionBinding, argv []string, stdout, stderr io.Writer) (protocol.SessionRequestCapability, protocol.SessionExit, error) {
	const step = "session registration"
	c.mu.Lock()
	defer c.mu.Unlock()
	conn, err := c.ensure(ctx)
	if err != nil {
		return protocol.SessionRequestCapability{}, protocol.SessionExit{}, err
	}
	stop := bind(ctx, conn)
	defer stop()
	fail := func(step string, err error) (protocol.SessionRequestCapability, protocol.SessionExit, error) {
		c.drop()
		return protocol.SessionRequestCapability{}, protocol.SessionExit{}, c.err(step, ctxErr(ctx, err))
	}
	reg, err := protocol.Encode(registerRequest(binding))
	if err != nil {
		return fail(step, err)
	}
	exe, err := protocol.Encode(executeRequest(binding.SessionID, argv))
	if err != nil {
		return fail("execution", err)
	}
	if err := conn.writeFrames(Frame{Type: FrameRequest, Body: reg}, Frame{Type: FrameRequest, Body: exe}); err != nil {
		return fail(step, err)
	}
	f, err := conn.read()
	if err != nil {
		return fail(step, err)
	}
	if f.Type != FrameResponse {
		return fail(step, fmt.Errorf("%w: server sent a %v frame, want a response", ErrFrame, f.Type))
	}
	var resp protocol.ControlResponse
	if err := protocol.Decode(f.Body, &resp); err != nil {
		return fail(step, err)
	}
	capability, err := c.registered(step, &resp, binding)
	if err != nil {
		return protocol.SessionRequestCapability{}, protocol.SessionExit{}, err
	}
	exit, err := c.executed(ctx, conn, binding.SessionID, stdout, stderr)
	return capability, exit, err
}

func executeRequest(sessionID ids.SessionID, argv []string) *protocol.ControlRequest {
	return &protocol.ControlRequest{Kind: protocol.ControlExecute, Execute: &protocol.NonInteractiveSessionRequest{SessionID: sessionID, Argv: argv}}
}

// Execute runs argv in the registered session without a terminal, copying
// its output to stdout and stderr, and returns how it ended.
func (c *Client) Execute(ctx context.Context, sessionID ids.SessionID, argv []string, stdout, stderr io.Writer) (protocol.SessionExit, error) {
	const step = "execution"
	c.mu.Lock()
	defer c.mu.Unlock()
	conn, err := c.ensure(ctx)
	if err != nil {
		return protocol.SessionExit{}, err
	}
	stop := bind(ctx, conn)
	defer stop()
	if err := conn.writeRecord(FrameRequest, executeRequest(sessionID, argv)); err != nil {
		c.drop()
		return protocol.SessionExit{}, c.err(step, ctxErr(ctx, err))
	}
	return c.executed(ctx, conn, sessionID, stdout, stderr)
}

// executed reads the frames of a running Execute on conn until its exit.
// The caller holds mu and has bound ctx to conn.
func (c *Client) executed(ctx context.Context, conn *clientConn, sessionID ids.SessionID, stdout, stderr io.Writer) (protocol.SessionExit, error) {
	const step = "execution"
	fail := func(err error) (protocol.SessionExit, error) {
		c.drop()
		return protocol.SessionExit{}, c.err(step, ctxErr(ctx, err))
	}
	for {
		f, err := conn.read()
		if err != nil {
			return fail(err)
		}
		if f.Type != FrameOutput {
			return fail(fmt.Errorf("%w: server sent a %v frame during execution", ErrFrame, f.Type))
		}
		var msg protocol.NonInteractiveSessionMessage
		if err := protocol.Decode(f.Body, &msg); err != nil {
			return fail(err)
		}
		switch msg.Kind {
		case protocol.NonInteractiveStdout, protocol.NonInteractiveStderr:
			if msg.Output.SessionID != sessionID {
				return fail(fmt.Errorf("%w: output of session %v, want %v", ErrFrame, msg.Output.SessionID, sessionID))
			}
			w, name := stdout, "stdout"
			if msg.Kind == protocol.NonInteractiveStderr {
				w, name = stderr, "stderr"
			}
			if _, err := w.Write(msg.Output.Bytes); err != nil {
				return fail(fmt.Errorf("writing %s: %w", name, err))
			}
		default:
			if msg.Exit.SessionID != sessionID {
				return fail(fmt.Errorf("%w: exit of session %v, want %v", ErrFrame, msg.Exit.SessionID, sessionID))
			}
			_ = conn.tc.SetDeadline(time.Time{})
			return *msg.Exit, nil
		}
	}
}

// Interactive starts a terminal session on a connection of its own. The
// caller sends events and receives batches until a batch carries the
// session's exit, then closes it.
func (c *Client) Interactive(ctx context.Context, req protocol.InteractiveSessionRequest) (*InteractiveClient, error) {
	const step = "interactive session"
	c.mu.Lock()
	cred := c.cred
	c.mu.Unlock()
	if cred == nil {
		return nil, c.err(step, fmt.Errorf("%w: enroll before starting a session", ErrUnauthorized))
	}
	conn, err := c.connect(ctx, cred)
	if err != nil {
		return nil, err
	}
	stop := bind(ctx, conn)
	defer stop()
	fail := func(err error) (*InteractiveClient, error) {
		conn.tc.Close()
		return nil, c.err(step, ctxErr(ctx, err))
	}
	if err := conn.writeRecord(FrameRequest, &protocol.ControlRequest{Kind: protocol.ControlExecuteInteractive, ExecuteInteractive: &req}); err != nil {
		return fail(err)
	}
	f, err := conn.read()
	if err != nil {
		return fail(err)
	}
	var ack protocol.InteractiveSessionBatch
	if f.Type != FrameBatch {
		return fail(fmt.Errorf("%w: server sent a %v frame, want the session's first batch", ErrFrame, f.Type))
	}
	if err := protocol.Decode(f.Body, &ack); err != nil {
		return fail(err)
	}
	if ack.SessionID != req.SessionID || len(ack.Messages) != 0 {
		return fail(fmt.Errorf("%w: the session's first batch must be empty and name session %v", ErrFrame, req.SessionID))
	}
	_ = conn.tc.SetDeadline(time.Time{})
	return &InteractiveClient{conn: conn, id: req.SessionID, socket: c.socket}, nil
}

// InteractiveClient is the CLI end of one interactive session. Send and the
// helpers may be called from one goroutine while Recv runs on another.
type InteractiveClient struct {
	conn   *clientConn
	id     ids.SessionID
	socket string
	mu     sync.Mutex // guards exited
	exited bool
}

func (s *InteractiveClient) err(step string, err error) error {
	return &Error{Socket: s.socket, Step: step, Err: err}
}

// SessionID is the session this client drives.
func (s *InteractiveClient) SessionID() ids.SessionID { return s.id }

// Send sends one event.
func (s *InteractiveClient) Send(ev protocol.InteractiveSessionEvent) error {
	if err := s.conn.writeRecord(FrameEvent, &ev); err != nil {
		return s.err("sending event", err)
	}
	return nil
}

func (s *InteractiveClient) terminal(ev protocol.SessionTerminalEvent) error {
	return s.Send(protocol.InteractiveSessionEvent{Kind: protocol.InteractiveTerminal, Terminal: &ev})
}

// Input sends keyboard input, split into messages of at most
// protocol.MaxTerminalBytes.
func (s *InteractiveClient) Input(p []byte) error {
	for len(p) > 0 {
		n := min(len(p), protocol.MaxTerminalBytes)
		if err := s.terminal(protocol.SessionTerminalEvent{Kind: protocol.EventInput, Input: &protocol.TerminalInput{SessionID: s.id, Bytes: p[:n]}}); err != nil {
			return err
		}
		p = p[n:]
	}
	return nil
}

// Resize sends the terminal's new size.
func (s *InteractiveClient) Resize(rows, columns, pixelWidth, pixelHeight uint16) error {
	return s.terminal(protocol.SessionTerminalEvent{Kind: protocol.EventResize, Resize: &protocol.TerminalResize{
		SessionID: s.id, Rows: rows, Columns: columns, PixelWidth: pixelWidth, PixelHeight: pixelHeight,
	}})
}

// Signal sends Interrupt, Quit or Suspend.
func (s *InteractiveClient) Signal(sig protocol.TerminalSignalKind) error {
	return s.terminal(protocol.SessionTerminalEvent{Kind: protocol.EventSignal, Signal: &protocol.TerminalSignal{SessionID: s.id, Signal: sig}})
}

// Hangup asks the server to close the session; its exit follows.
func (s *InteractiveClient) Hangup() error {
	return s.terminal(protocol.SessionTerminalEvent{Kind: protocol.EventClose, Close: &protocol.SessionClose{SessionID: s.id}})
}

// Decide sends the developer's signed decision on a prompt.
func (s *InteractiveClient) Decide(decision protocol.SignedProtocolRecord) error {
	return s.Send(protocol.InteractiveSessionEvent{Kind: protocol.InteractivePromptDecision, Decision: &decision})
}

// Poll asks for a batch now, empty when nothing is pending.
func (s *InteractiveClient) Poll() error {
	return s.Send(protocol.InteractiveSessionEvent{Kind: protocol.InteractivePoll})
}

// Recv returns the next batch. After the batch that carries the session's
// exit it returns io.EOF.
func (s *InteractiveClient) Recv() (protocol.InteractiveSessionBatch, error) {
	var b protocol.InteractiveSessionBatch
	s.mu.Lock()
	exited := s.exited
	s.mu.Unlock()
	if exited {
		return b, io.EOF
	}
	f, err := s.conn.read()
	if err != nil {
		return b, s.err("receiving batch", err)
	}
	if f.Type != FrameBatch {
		return b, s.err("receiving batch", fmt.Errorf("%w: server sent a %v frame during the session", ErrFrame, f.Type))
	}
	if err := protocol.Decode(f.Body, &b); err != nil {
		return b, s.err("receiving batch", err)
	}
	if b.SessionID != s.id {
		return b, s.err("receiving batch", fmt.Errorf("%w: batch of session %v, want %v", ErrFrame, b.SessionID, s.id))
	}
	for i, m := range b.Messages {
		if m.Kind == protocol.InteractiveMessageTerminal && m.Terminal.Kind == protocol.MessageExit {
			if i != len(b.Messages)-1 {
				return b, s.err("receiving batch", fmt.Errorf("%w: messages follow the session's exit", ErrFrame))
			}
			s.mu.Lock()
			s.exited = true
			s.mu.Unlock()
		}
	}
	return b, nil
}

// Close closes the session's connection. Closing before the exit hangs the
// session up.
func (s *InteractiveClient) Close() error {
	if err := s.conn.tc.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
		return s.err("closing", err)
	}
	return nil
}

// Publish asks the coordinator to publish fs (sorted here) and returns
// every forward the generation now publishes. A refusal is a
// *RemoteError with CodePortRefused and a sentence naming the port.
func (c *Client) Publish(ctx context.Context, fs []PortForward) ([]PortForward, error) {
	const step = "publishing ports"
	fs = slices.Clone(fs)
	SortPorts(fs)
	body, err := EncodePorts(fs)
	if err != nil {
		return nil, c.err(step, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	f, err := c.exchange(ctx, step, Frame{Type: FramePublish, Body: body}, FramePublished, "published")
	if err != nil {
		return nil, err
	}
	all, err := DecodePorts(f.Body)
	if err != nil {
		c.drop()
		return nil, c.err(step, err)
	}
	return all, nil
}
