package protocol

import (
	"crypto/rand"
	"crypto/tls"
	"errors"
	"net"
	"testing"
	"time"

	"lazaret.dev/pkg/ids"
)

type tlsSetup struct {
	ca        *CA
	pub       ProtocolPublicationIdentity
	serverKey PrivateKey
	server    TLSCredential
	clientKey PrivateKey
	client    TLSCredential
	cliID     ids.CLIID
}

func newTLSSetup(t *testing.T) *tlsSetup {
	t.Helper()
	gen := testGeneration()
	now := time.Now()
	s := &tlsSetup{cliID: ids.CLIID(filled16(0x71))}
	var err error
	if s.ca, err = NewCA(rand.Reader, gen, now); err != nil {
		t.Fatal(err)
	}
	manifest, err := NewTrustManifest(gen, s.ca.CertificateDER(), issuerKey)
	if err != nil {
		t.Fatal(err)
	}
	s.serverKey, s.clientKey = coordinatorKey, anchorKey
	if s.server, err = s.ca.IssueCoordinator(rand.Reader, s.serverKey.Public(), now); err != nil {
		t.Fatal(err)
	}
	if s.pub, err = NewPublicationIdentity(&manifest, s.ca.CertificateDER(), &s.server); err != nil {
		t.Fatal(err)
	}
	csr, err := NewClientCSR(s.cliID, s.clientKey)
	if err != nil {
		t.Fatal(err)
	}
	req := ClientEnrollmentRequest{GenerationIdentity: gen, CLIID: s.cliID, CertificateSigningRequestDER: csr}
	if s.client, err = s.ca.IssueClient(rand.Reader, &req, now); err != nil {
		t.Fatal(err)
	}
	return s
}

// handshake runs both ends over an in-memory pipe and returns their errors
// and the server's view of the client.
func handshake(t *testing.T, server, client *tls.Config) (serverErr, clientErr error, cli ids.CLIID) {
	t.Helper()
	a, b := net.Pipe()
	t.Cleanup(func() { a.Close(); b.Close() })
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := tls.Server(a, server)
		serverErr = sc.Handshake()
		if serverErr == nil {
			cli, serverErr = PeerCLIID(sc.ConnectionState())
		}
		a.Close()
	}()
	cc := tls.Client(b, client)
	clientErr = cc.Handshake()
	b.Close()
	<-done
	return serverErr, clientErr, cli
}

func TestTLSHandshake(t *testing.T) {
	s := newTLSSetup(t)
	gen := testGeneration()
	if err := VerifyTLSCredential(&s.server, s.ca.CertificateDER(), gen, TLSRoleSessionCoordinator, time.Now()); err != nil {
		t.Fatalf("server credential: %v", err)
	}
	if err := VerifyTLSCredential(&s.client, s.ca.CertificateDER(), gen, TLSRoleClientCLI, time.Now()); err != nil {
		t.Fatalf("client credential: %v", err)
	}
	serverCfg, err := ServerTLSConfig(s.ca.CertificateDER(), &s.server, s.serverKey)
	if err != nil {
		t.Fatal(err)
	}
	clientCfg, err := ClientTLSConfig(&s.pub, &s.client, s.clientKey)
	if err != nil {
		t.Fatal(err)
	}
	if serverCfg.MinVersion != tls.VersionTLS13 || serverCfg.MaxVersion != tls.VersionTLS13 ||
		clientCfg.MinVersion != tls.VersionTLS13 || clientCfg.MaxVersion != tls.VersionTLS13 {
		t.Fatal("configurations are not TLS 1.3 only")
	}
	serr, cerr, cli := handshake(t, serverCfg, clientCfg)
	if serr != nil || cerr != nil {
		t.Fatalf("handshake: server %v, client %v", serr, cerr)
	}
	if cli != s.cliID {
		t.Fatalf("server sees CLI %v, want %v", cli, s.cliID)
	}

	t.Run("wrong pin", func(t *testing.T) {
		pub := s.pub
		pub.CoordinatorTLSCertificateSHA256[0] ^= 1
		cfg, err := ClientTLSConfig(&pub, &s.client, s.clientKey)
		if err != nil {
			t.Fatal(err)
		}
		_, cerr, _ := handshake(t, serverCfg, cfg)
		if !errors.Is(cerr, ErrCertificate) {
			t.Fatalf("client error %v, want ErrCertificate", cerr)
		}
	})
	t.Run("client of another CA", func(t *testing.T) {
		other := newTLSSetup(t)
		cfg, err := ClientTLSConfig(&s.pub, &other.client, other.clientKey)
		if err != nil {
			t.Fatal(err)
		}
		serr, _, _ := handshake(t, serverCfg, cfg)
		if serr == nil {
			t.Fatal("server accepted a client certificate of another CA")
		}
	})
	t.Run("client without certificate", func(t *testing.T) {
		cfg := clientCfg.Clone()
		cfg.Certificates = nil
		serr, _, _ := handshake(t, serverCfg, cfg)
		if serr == nil {
			t.Fatal("server accepted a client without certificate")
		}
	})
	t.Run("TLS 1.2 client", func(t *testing.T) {
		cfg := clientCfg.Clone()
		cfg.MinVersion, cfg.MaxVersion = tls.VersionTLS12, tls.VersionTLS12
		serr, _, _ := handshake(t, serverCfg, cfg)
		if serr == nil {
			t.Fatal("server accepted TLS 1.2")
		}
	})
	t.Run("server of another generation", func(t *testing.T) {
		other := newTLSSetup(t)
		cfg, err := ServerTLSConfig(other.ca.CertificateDER(), &other.server, other.serverKey)
		if err != nil {
			t.Fatal(err)
		}
		_, cerr, _ := handshake(t, cfg, clientCfg)
		if !errors.Is(cerr, ErrCertificate) {
			t.Fatalf("client error %v, want ErrCertificate", cerr)
		}
	})
	t.Run("key does not match certificate", func(t *testing.T) {
		if _, err := ServerTLSConfig(s.ca.CertificateDER(), &s.server, strangerKey); !errors.Is(err, ErrCertificate) {
			t.Fatalf("error %v, want ErrCertificate", err)
		}
	})
}

func TestIssueClientRejects(t *testing.T) {
	s := newTLSSetup(t)
	gen := testGeneration()
	csr, err := NewClientCSR(s.cliID, s.clientKey)
	if err != nil {
		t.Fatal(err)
	}
	otherGen := gen
	otherGen.GenerationID = ids.GenerationID(filled16(0xf1))
	tamper := func(b []byte) []byte {
		c := append([]byte(nil), b...)
		c[len(c)-1] ^= 1 // inside the signature
		return c
	}
	tests := []struct {
		name string
		req  ClientEnrollmentRequest
		want error
	}{
		{"CSR names another CLI", ClientEnrollmentRequest{GenerationIdentity: gen, CLIID: ids.CLIID(filled16(0x72)), CertificateSigningRequestDER: csr}, ErrCertificate},
		{"another generation", ClientEnrollmentRequest{GenerationIdentity: otherGen, CLIID: s.cliID, CertificateSigningRequestDER: csr}, ErrGeneration},
		{"bad CSR signature", ClientEnrollmentRequest{GenerationIdentity: gen, CLIID: s.cliID, CertificateSigningRequestDER: tamper(csr)}, ErrCertificate},
		{"not a CSR", ClientEnrollmentRequest{GenerationIdentity: gen, CLIID: s.cliID, CertificateSigningRequestDER: []byte{0x30, 0x00}}, ErrCertificate},
		{"empty CSR", ClientEnrollmentRequest{GenerationIdentity: gen, CLIID: s.cliID}, ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := s.ca.IssueClient(rand.Reader, &tt.req, time.Now())
			if !errors.Is(err, tt.want) {
				t.Fatalf("error %v, want %v", err, tt.want)
			}
		})
	}
	// A valid credential presented for the wrong role, or one whose digest
	// does not match, is refused.
	if err := VerifyTLSCredential(&s.client, s.ca.CertificateDER(), gen, TLSRoleSessionCoordinator, time.Now()); !errors.Is(err, ErrCertificate) {
		t.Fatalf("wrong role: %v", err)
	}
	c := s.client
	c.CertificateSHA256[0] ^= 1
	if err := VerifyTLSCredential(&c, s.ca.CertificateDER(), gen, TLSRoleClientCLI, time.Now()); !errors.Is(err, ErrMalformed) {
		t.Fatalf("digest mismatch: %v", err)
	}
	if err := VerifyTLSCredential(&s.client, s.ca.CertificateDER(), gen, TLSRoleClientCLI, time.Now().Add(2*CertificateLifetime)); !errors.Is(err, ErrCertificate) {
		t.Fatalf("expired: %v", err)
	}
}
