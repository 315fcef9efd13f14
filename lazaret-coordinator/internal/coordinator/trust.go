package coordinator

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"lazaret.dev/pkg/fsroot"
	"lazaret.dev/pkg/protocol"
	"lazaret.dev/pkg/sys"
)

// trustAnchor is a generation's protocol material (CreateTrustAnchor).
// Its private keys live in this process's memory; the sandbox's own key
// is written only into the credential bundle under the generation's
// control directory.
type trustAnchor struct {
	ca             *protocol.CA
	issuer         protocol.PrivateKey
	manifest       protocol.TrustManifest
	tlsKey         protocol.PrivateKey
	tlsCred        protocol.TLSCredential
	coordinatorKey protocol.PrivateKey
	coordinator    protocol.ProtocolCredential
	sandbox        protocol.ProtocolCredential
	pub            protocol.ProtocolPublicationIdentity
	serverTLS      *tls.Config
	// escalation is the generation's escalation engine; nil when the
	// profile disables escalation.
	escalation *hostEscalation
}

// trustStep is the trust anchor participant (CreateTrustAnchor). It
// records no role: its keys live in this process's memory and its files
// in the generation's directory, which end with the generation.
type trustStep struct {
	s *scope
	// anchor is set by Start, before the publication that lets anyone
	// use it, and never cleared.
	anchor *trustAnchor
}

func (p *trustStep) Step() Step            { return StepTrust }
func (p *trustStep) Lost() <-chan struct{} { return nil }

// escalation is the generation's escalation engine, nil before the trust
// step and when the profile disables escalation.
func (p *trustStep) escalation() *hostEscalation {
	if p.anchor == nil {
		return nil
	}
	return p.anchor.escalation
}

// Release stops the escalation engine (host commands end with the
// generation); the keys go with the process.
func (p *trustStep) Release(context.Context) error {
	p.escalation().stop()
	return nil
}

// credentialsName is the credential bundle's name in the control
// directory (/run/lazaret/credentials in the sandbox).
const credentialsName = "credentials"

// startTrust creates the generation CA and coordinator TLS certificate,
// the protocol issuer key and Trust Manifest, the coordinator and sandbox
// protocol credentials, writes the SandboxCredentialBundle (0600) into
// the control directory, and starts the escalation engine on the mailbox
// beside it.
func (p *trustStep) Start(context.Context) error {
	s := p.s
	now := time.Now()
	t := &trustAnchor{}
	var err error
	if t.ca, err = protocol.NewCA(rand.Reader, s.ident, now); err != nil {
		return fmt.Errorf("creating the generation CA: %w", err)
	}
	if t.issuer, err = protocol.GenerateKey(rand.Reader); err != nil {
		return fmt.Errorf("generating the protocol issuer key: %w", err)
	}
	if t.manifest, err = protocol.NewTrustManifest(s.ident, t.ca.CertificateDER(), t.issuer); err != nil {
		return fmt.Errorf("signing the trust manifest: %w", err)
	}
	if t.tlsKey, err = protocol.GenerateKey(rand.Reader); err != nil {
		return fmt.Errorf("generating the coordinator TLS key: %w", err)
	}
	if t.tlsCred, err = t.ca.IssueCoordinator(rand.Reader, t.tlsKey.Public(), now); err != nil {
		return fmt.Errorf("issuing the coordinator TLS certificate: %w", err)
	}
	if t.coordinatorKey, err = protocol.GenerateKey(rand.Reader); err != nil {
		return fmt.Errorf("generating the coordinator protocol key: %w", err)
	}
	if t.coordinator, err = protocol.IssueProtocolCredential(t.issuer, s.ident, protocol.RoleSessionCoordinator, t.coordinatorKey.Public()); err != nil {
		return fmt.Errorf("issuing the coordinator protocol credential: %w", err)
	}
	sandboxKey, err := protocol.GenerateKey(rand.Reader)
	if err != nil {
		return fmt.Errorf("generating the sandbox protocol key: %w", err)
	}
	bundle, err := protocol.NewSandboxCredentialBundle(t.issuer, t.manifest, t.coordinator, sandboxKey)
	if err != nil {
		return fmt.Errorf("building the sandbox credential bundle: %w", err)
	}
	t.sandbox = bundle.SandboxProtocolCredential
	if t.pub, err = protocol.NewPublicationIdentity(&t.manifest, t.ca.CertificateDER(), &t.tlsCred); err != nil {
		return fmt.Errorf("building the publication identity: %w", err)
	}
	if t.serverTLS, err = protocol.ServerTLSConfig(t.ca.CertificateDER(), &t.tlsCred, t.tlsKey); err != nil {
		return fmt.Errorf("building the server TLS configuration: %w", err)
	}
	b, err := protocol.Encode(&bundle)
	if err != nil {
		return fmt.Errorf("encoding the sandbox credential bundle: %w", err)
	}
	path := filepath.Join(s.controlDir(), credentialsName)
	if err := writeNew(path, b, 0o600); err != nil {
		return fmt.Errorf("writing the sandbox credential bundle: %w", err)
	}
	if err := startEscalation(s, t); err != nil {
		return err
	}
	p.anchor = t
	s.log.Info("trust anchor created", "ca_sha256", t.ca.SHA256().String(), "credential_bundle", path)
	return nil
}

// writeNew creates path (which must not exist) with mode perm, writes b
// and syncs it.
func writeNew(path string, b []byte, perm os.FileMode) error {
	dir, err := openDir(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer dir.Close()
	return writeNewAt(dir, filepath.Base(path), b, perm)
}

// openDir opens dir as a retained O_PATH descriptor for the *At helpers.
// A symbolic link as its last component is refused; one on the way is
// the user's choice of storage or runtime root.
func openDir(dir string) (*os.File, error) {
	fd, err := sys.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), dir), nil
}

// writeNewAt is writeNew for rel beneath the retained directory dir,
// reached through no link and across no mount.
func writeNewAt(dir *os.File, rel string, b []byte, perm os.FileMode) error {
	path := filepath.Join(dir.Name(), rel)
	fd, err := fsroot.OpenBeneath(int(dir.Fd()), rel, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW, uint32(perm))
	if err != nil {
		return &os.PathError{Op: "create", Path: path, Err: errors.Unwrap(err)}
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	if err := f.Chmod(perm); err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		return err
	}
	return f.Sync()
}
