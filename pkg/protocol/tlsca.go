package protocol

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/url"
	"time"

	"lazaret.dev/pkg/ids"
)

// The generation TLS CA and its certificates use Ed25519. Both ends of the
// control socket are Lazaret's own Go binaries, so no peer needs another
// algorithm; Ed25519 is the protocol signature algorithm already, has no
// per-signature randomness to get wrong, and Go's TLS 1.3 supports it.
//
// Certificates name their subject with one URI SAN:
// urn:lazaret:v1:coordinator:<coordinator_id hex> for the SessionCoordinator
// server and urn:lazaret:v1:cli:<cli_id hex> for a ClientCLI. They live for
// CertificateLifetime from issuance (backdated by CertificateBackdate for
// clock steps); a generation that outlives it is restarted.

// Certificate validity.
const (
	CertificateLifetime = 365 * 24 * time.Hour
	CertificateBackdate = time.Minute
)

const uriPrefix = "urn:lazaret:v1:"

// SubjectURI is the URI SAN naming a TLS subject of role.
func SubjectURI(role TLSRole, subject ids.ID) *url.URL {
	kind := "cli"
	if role == TLSRoleSessionCoordinator {
		kind = "coordinator"
	}
	return &url.URL{Scheme: "urn", Opaque: "lazaret:v1:" + kind + ":" + hex.EncodeToString(subject[:])}
}

// CA is a generation's TLS certificate authority. Its key never leaves it.
type CA struct {
	generation GenerationIdentity
	cert       *x509.Certificate
	key        PrivateKey
}

func serial(r io.Reader) (*big.Int, error) {
	var b [16]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return nil, fmt.Errorf("reading certificate serial: %w", err)
	}
	b[0] &= 0x7f
	b[0] |= 0x40 // positive and never zero
	return new(big.Int).SetBytes(b[:]), nil
}

// NewCA creates the self-signed CA of gen, drawing its key and serial from
// r (crypto/rand.Reader in production).
func NewCA(r io.Reader, gen GenerationIdentity, now time.Time) (*CA, error) {
	if err := gen.Validate(); err != nil {
		return nil, err
	}
	key, err := GenerateKey(r)
	if err != nil {
		return nil, fmt.Errorf("generating CA key: %w", err)
	}
	sn, err := serial(r)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          sn,
		Subject:               pkix.Name{CommonName: "lazaret generation CA " + gen.GenerationID.String()},
		NotBefore:             now.Add(-CertificateBackdate),
		NotAfter:              now.Add(CertificateLifetime),
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(r, tmpl, tmpl, key.ed25519Key().Public(), key.ed25519Key())
	if err != nil {
		return nil, fmt.Errorf("creating CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parsing CA certificate: %w", err)
	}
	return &CA{generation: gen, cert: cert, key: key}, nil
}

// CertificateDER is the CA certificate.
func (ca *CA) CertificateDER() []byte { return bytes.Clone(ca.cert.Raw) }

// SHA256 is the digest the trust manifest names as tls_ca_sha256.
func (ca *CA) SHA256() ids.Digest { return sha256.Sum256(ca.cert.Raw) }

func (ca *CA) String() string { return "TLS CA of generation " + ca.generation.GenerationID.String() }

func (ca *CA) issue(r io.Reader, role TLSRole, subject ids.ID, pub ed25519.PublicKey, now time.Time) (TLSCredential, error) {
	sn, err := serial(r)
	if err != nil {
		return TLSCredential{}, err
	}
	usage := x509.ExtKeyUsageClientAuth
	if role == TLSRoleSessionCoordinator {
		usage = x509.ExtKeyUsageServerAuth
	}
	tmpl := &x509.Certificate{
		SerialNumber:          sn,
		Subject:               pkix.Name{CommonName: fmt.Sprintf("lazaret %v %v", role, subject)},
		NotBefore:             now.Add(-CertificateBackdate),
		NotAfter:              now.Add(CertificateLifetime),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{usage},
		BasicConstraintsValid: true,
		URIs:                  []*url.URL{SubjectURI(role, subject)},
	}
	der, err := x509.CreateCertificate(r, tmpl, ca.cert, pub, ca.key.ed25519Key())
	if err != nil {
		return TLSCredential{}, fmt.Errorf("creating %v certificate: %w", role, err)
	}
	c := TLSCredential{
		GenerationIdentity: ca.generation,
		Role:               role,
		SubjectID:          subject,
		CertificateDER:     der,
		CertificateSHA256:  sha256.Sum256(der),
	}
	return c, c.Validate()
}

// IssueCoordinator certifies the SessionCoordinator's TLS server key.
func (ca *CA) IssueCoordinator(r io.Reader, key PublicKey, now time.Time) (TLSCredential, error) {
	return ca.issue(r, TLSRoleSessionCoordinator, ids.ID(ca.generation.CoordinatorID), ed25519.PublicKey(key[:]), now)
}

// IssueClient certifies a CLI from its enrollment request. The request
// must name this generation, and its CSR must carry a valid self-signature,
// an Ed25519 key, and exactly one name: the URI SAN of req.CLIID. Nothing
// else from the CSR enters the certificate.
func (ca *CA) IssueClient(r io.Reader, req *ClientEnrollmentRequest, now time.Time) (TLSCredential, error) {
	const rec = "client-enrollment-request"
	if err := req.Validate(); err != nil {
		return TLSCredential{}, err
	}
	if req.GenerationIdentity != ca.generation {
		return TLSCredential{}, newError(KindGeneration, rec, "generation_identity", "enrollment for generation %v, want %v", req.GenerationIdentity.GenerationID, ca.generation.GenerationID)
	}
	csr, err := x509.ParseCertificateRequest(req.CertificateSigningRequestDER)
	if err != nil {
		return TLSCredential{}, &Error{Kind: KindCertificate, Record: rec, Field: "certificate_signing_request_der", Err: err}
	}
	if err := csr.CheckSignature(); err != nil {
		return TLSCredential{}, &Error{Kind: KindCertificate, Record: rec, Field: "certificate_signing_request_der", Err: err}
	}
	pub, ok := csr.PublicKey.(ed25519.PublicKey)
	if !ok {
		return TLSCredential{}, newError(KindCertificate, rec, "certificate_signing_request_der", "key is %T, want Ed25519", csr.PublicKey)
	}
	want := SubjectURI(TLSRoleClientCLI, ids.ID(req.CLIID)).String()
	if len(csr.URIs) != 1 || csr.URIs[0].String() != want || len(csr.DNSNames)+len(csr.EmailAddresses)+len(csr.IPAddresses) != 0 {
		return TLSCredential{}, newError(KindCertificate, rec, "certificate_signing_request_der", "CSR must name exactly %s", want)
	}
	return ca.issue(r, TLSRoleClientCLI, ids.ID(req.CLIID), pub, now)
}

// NewClientCSR is the CLI's half of enrollment: a CSR for key that names
// cliID.
func NewClientCSR(cliID ids.CLIID, key PrivateKey) ([]byte, error) {
	if key.IsZero() {
		return nil, errors.New("creating CSR: no key")
	}
	tmpl := &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: "lazaret cli " + cliID.String()},
		URIs:    []*url.URL{SubjectURI(TLSRoleClientCLI, ids.ID(cliID))},
	}
	// Ed25519 signing draws no randomness.
	der, err := x509.CreateCertificateRequest(nil, tmpl, key.ed25519Key())
	if err != nil {
		return nil, fmt.Errorf("creating CSR: %w", err)
	}
	return der, nil
}

// VerifyTLSCredential checks a TLS credential completely: its fields and
// certificate_sha256, its generation, its role, that the certificate chains
// to the CA certificate caDER at now for the role's usage, and that it
// names SubjectID (which for the coordinator must be the generation's
// coordinator ID).
func VerifyTLSCredential(c *TLSCredential, caDER []byte, gen GenerationIdentity, role TLSRole, now time.Time) error {
	const rec = "tls-credential"
	if err := c.Validate(); err != nil {
		return err
	}
	if c.GenerationIdentity != gen {
		return newError(KindGeneration, rec, "generation_identity", "credential of generation %v, want %v", c.GenerationIdentity.GenerationID, gen.GenerationID)
	}
	if c.Role != role {
		return newError(KindCertificate, rec, "role", "role %v, want %v", c.Role, role)
	}
	if role == TLSRoleSessionCoordinator && c.SubjectID != ids.ID(gen.CoordinatorID) {
		return newError(KindCertificate, rec, "subject_id", "%v is not the coordinator ID %v", c.SubjectID, gen.CoordinatorID)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return &Error{Kind: KindCertificate, Record: rec, Field: "tls_ca_certificate_der", Err: err}
	}
	leaf, err := x509.ParseCertificate(c.CertificateDER)
	if err != nil {
		return &Error{Kind: KindCertificate, Record: rec, Field: "certificate_der", Err: err}
	}
	return verifyLeaf(rec, leaf, caCert, role, c.SubjectID, now)
}

func verifyLeaf(rec string, leaf, ca *x509.Certificate, role TLSRole, subject ids.ID, now time.Time) error {
	usage := x509.ExtKeyUsageClientAuth
	if role == TLSRoleSessionCoordinator {
		usage = x509.ExtKeyUsageServerAuth
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
		return &Error{Kind: KindCertificate, Record: rec, Field: "certificate_der", Err: err}
	}
	want := SubjectURI(role, subject).String()
	if len(leaf.URIs) != 1 || leaf.URIs[0].String() != want {
		return newError(KindCertificate, rec, "certificate_der", "certificate does not name exactly %s", want)
	}
	return nil
}

// subjectFromLeaf returns the ID the leaf's single URI SAN names for role.
func subjectFromLeaf(leaf *x509.Certificate, role TLSRole) (ids.ID, error) {
	var id ids.ID
	kind := "cli:"
	if role == TLSRoleSessionCoordinator {
		kind = "coordinator:"
	}
	if len(leaf.URIs) != 1 {
		return id, fmt.Errorf("certificate has %d URI names, want 1", len(leaf.URIs))
	}
	s := leaf.URIs[0].String()
	prefix := uriPrefix + kind
	if len(s) != len(prefix)+32 || s[:len(prefix)] != prefix {
		return id, fmt.Errorf("certificate name %q is not a %v name", s, role)
	}
	if err := ids.ParseHex(id[:], s[len(prefix):], "certificate subject ID"); err != nil {
		return id, err
	}
	if s != SubjectURI(role, id).String() {
		return id, fmt.Errorf("certificate name %q is not canonical", s)
	}
	return id, nil
}

func tlsCertificate(c *TLSCredential, key PrivateKey) (tls.Certificate, error) {
	leaf, err := x509.ParseCertificate(c.CertificateDER)
	if err != nil {
		return tls.Certificate{}, &Error{Kind: KindCertificate, Record: "tls-credential", Field: "certificate_der", Err: err}
	}
	pub, ok := leaf.PublicKey.(ed25519.PublicKey)
	if !ok || key.IsZero() || !bytes.Equal(pub, key.ed25519Key().Public().(ed25519.PublicKey)) {
		return tls.Certificate{}, newError(KindCertificate, "tls-credential", "certificate_der", "certificate key does not match the private key")
	}
	return tls.Certificate{Certificate: [][]byte{c.CertificateDER}, PrivateKey: key.ed25519Key(), Leaf: leaf}, nil
}

// ServerTLSConfig is the SessionCoordinator's control-socket configuration:
// TLS 1.3 only, its certificate from cred, and a client certificate
// required, chained to the CA certificate caDER and naming a CLI ID
// (PeerCLIID reads it).
func ServerTLSConfig(caDER []byte, cred *TLSCredential, key PrivateKey) (*tls.Config, error) {
	if cred.Role != TLSRoleSessionCoordinator {
		return nil, newError(KindCertificate, "tls-credential", "role", "role %v, want SessionCoordinator", cred.Role)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, &Error{Kind: KindCertificate, Record: "tls-credential", Field: "tls_ca_certificate_der", Err: err}
	}
	cert, err := tlsCertificate(cred, key)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(caCert)
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		MaxVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{cert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    pool,
		VerifyConnection: func(cs tls.ConnectionState) error {
			_, err := PeerCLIID(cs)
			return err
		},
	}, nil
}

// PeerCLIID is the CLI ID named by a verified client certificate.
func PeerCLIID(cs tls.ConnectionState) (ids.CLIID, error) {
	if len(cs.PeerCertificates) != 1 {
		return ids.CLIID{}, newError(KindCertificate, "tls-credential", "", "peer sent %d certificates, want 1", len(cs.PeerCertificates))
	}
	id, err := subjectFromLeaf(cs.PeerCertificates[0], TLSRoleClientCLI)
	if err != nil {
		return ids.CLIID{}, &Error{Kind: KindCertificate, Record: "tls-credential", Err: err}
	}
	return ids.CLIID(id), nil
}

// ClientTLSConfig is a CLI's control-socket configuration: TLS 1.3 only,
// its certificate from cred, and the server accepted only if its single
// certificate is the one pinned by pub.CoordinatorTLSCertificateSHA256,
// chains to pub's CA certificate, and names pub's coordinator ID.
//
// Go's hostname-based verification is switched off (InsecureSkipVerify)
// because the socket has no hostname; VerifyConnection performs the
// complete check above instead, on every handshake.
func ClientTLSConfig(pub *ProtocolPublicationIdentity, cred *TLSCredential, key PrivateKey) (*tls.Config, error) {
	if err := pub.Validate(); err != nil {
		return nil, err
	}
	if cred.Role != TLSRoleClientCLI {
		return nil, newError(KindCertificate, "tls-credential", "role", "role %v, want ClientCLI", cred.Role)
	}
	caCert, err := x509.ParseCertificate(pub.TLSCACertificateDER)
	if err != nil {
		return nil, &Error{Kind: KindCertificate, Record: "protocol-publication-identity", Field: "tls_ca_certificate_der", Err: err}
	}
	cert, err := tlsCertificate(cred, key)
	if err != nil {
		return nil, err
	}
	pin := pub.CoordinatorTLSCertificateSHA256
	coordinator := ids.ID(pub.GenerationIdentity.CoordinatorID)
	return &tls.Config{
		MinVersion:         tls.VersionTLS13,
		MaxVersion:         tls.VersionTLS13,
		Certificates:       []tls.Certificate{cert},
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			const rec = "protocol-publication-identity"
			if len(cs.PeerCertificates) != 1 {
				return newError(KindCertificate, rec, "coordinator_tls_certificate_sha256", "server sent %d certificates, want 1", len(cs.PeerCertificates))
			}
			leaf := cs.PeerCertificates[0]
			if d := ids.Digest(sha256.Sum256(leaf.Raw)); d != pin {
				return newError(KindCertificate, rec, "coordinator_tls_certificate_sha256", "server certificate %v is not the pinned %v", d, pin)
			}
			return verifyLeaf(rec, leaf, caCert, TLSRoleSessionCoordinator, coordinator, time.Now())
		},
	}, nil
}
