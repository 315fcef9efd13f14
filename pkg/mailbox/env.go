package mailbox

import (
	"encoding/base64"
	"fmt"

	"lazaret.dev/pkg/protocol"
)

// Environment variables through which lazaret-guest finds its place in the
// protocol. The Host Coordinator sets EnvCapability on each session's exec,
// so that a request is bound to the terminal it came from; the others have
// defaults that match the sandbox layout.
const (
	// EnvCapability holds the session's SessionRequestCapability: standard
	// base64 (with padding) of its Postcard encoding. The capability
	// carries the session binding.
	EnvCapability = "LAZARET_SESSION_CAPABILITY"
	// EnvCredentialBundle is the path of the SandboxCredentialBundle file
	// (its Postcard encoding); default DefaultCredentialBundle.
	EnvCredentialBundle = "LAZARET_CREDENTIAL_BUNDLE"
	// EnvMailbox is the mailbox root; default SandboxPath.
	EnvMailbox = "LAZARET_MAILBOX"
)

// DefaultCredentialBundle is where the bundle appears inside the sandbox.
const DefaultCredentialBundle = "/run/lazaret/credentials"

// EncodeCapability is the EnvCapability value for c.
func EncodeCapability(c *protocol.SessionRequestCapability) (string, error) {
	b, err := protocol.Encode(c)
	if err != nil {
		return "", fmt.Errorf("encoding session capability: %w", err)
	}
	return base64.StdEncoding.EncodeToString(b), nil
}

// DecodeCapability parses an EnvCapability value. It checks the encoding
// only; verify the capability against the trusted credentials.
func DecodeCapability(s string) (protocol.SessionRequestCapability, error) {
	var c protocol.SessionRequestCapability
	b, err := base64.StdEncoding.Strict().DecodeString(s)
	if err != nil {
		return c, fmt.Errorf("decoding %s: not standard base64: %w", EnvCapability, err)
	}
	if err := protocol.Decode(b, &c); err != nil {
		return c, fmt.Errorf("decoding %s: %w", EnvCapability, err)
	}
	return c, nil
}
