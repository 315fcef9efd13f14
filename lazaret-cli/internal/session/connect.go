package session

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"

	"lazaret.dev/pkg/control"
	"lazaret.dev/pkg/ids"
	"lazaret.dev/pkg/protocol"
)

// Session is one registered session of this CLI on a Domain: the
// connection, the session binding, its capability and the session anchor
// key that signs the developer's decisions. The key lives in memory only.
type Session struct {
	Client     *control.Client
	Binding    protocol.SessionBinding
	Capability protocol.SessionRequestCapability
	anchor     protocol.PrivateKey
}

// ID is the session ID.
func (s *Session) ID() ids.SessionID { return s.Binding.SessionID }

// Register enrolls a fresh CLI ID on client and registers session id
// (chosen by the caller before it attached, so that a coordinator it
// spawned knows its starter) with a fresh Ed25519 session anchor key.
func Register(ctx context.Context, client *control.Client, id ids.SessionID) (*Session, error) {
	s, err := Enroll(ctx, client, id)
	if err != nil {
		return nil, err
	}
	if s.Capability, err = client.Register(ctx, s.Binding); err != nil {
		return nil, err
	}
	return s, nil
}

// Enroll enrolls a fresh CLI ID on client and prepares the binding of
// session id with a fresh Ed25519 session anchor key, without registering
// it: RegisterExecute registers it and runs its command in one flight.
func Enroll(ctx context.Context, client *control.Client, id ids.SessionID) (*Session, error) {
	cli := ids.CLIID(ids.New())
	if _, err := client.Enroll(ctx, cli); err != nil {
		return nil, err
	}
	key, err := protocol.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating the session anchor key: %w", err)
	}
	binding := protocol.SessionBinding{
		GenerationIdentity:     client.Publication().GenerationIdentity,
		CLIID:                  cli,
		SessionID:              id,
		SessionAnchorPublicKey: key.Public(),
	}
	return &Session{Client: client, Binding: binding, anchor: key}, nil
}

// RegisterExecute registers an enrolled session and runs argv in it
// without a terminal, the two requests pipelined
// (control.Client.RegisterExecute).
func (s *Session) RegisterExecute(ctx context.Context, argv []string, stdout, stderr io.Writer) (protocol.SessionExit, error) {
	capability, exit, err := s.Client.RegisterExecute(ctx, s.Binding, argv, stdout, stderr)
	if err != nil {
		return protocol.SessionExit{}, err
	}
	s.Capability = capability
	return exit, nil
}

// Sign signs a decision on a prompt of this session with its anchor key.
func (s *Session) Sign(d protocol.DeveloperDecision) (protocol.SignedProtocolRecord, error) {
	d.SessionBinding = s.Binding
	return protocol.Sign(s.anchor, &d)
}
