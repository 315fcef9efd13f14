package netlab

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"sync"
	"time"
)

// The test CA is fixed: its key comes from a constant seed and every
// field of its certificate is constant (Ed25519 signatures are
// deterministic), so the in-process test internet, cmd/testinternet and
// every client compute the same certificate without sharing a file. It
// is a CA for tests only: anyone can compute its key.
var (
	testCASeed = []byte("lazaret-test-internet-ca-seed-01")
	testCAName = "Lazaret test internet CA"
	// Leaves live as long as the CA: the lab's clock is the host's.
	testCANotBefore = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	testCANotAfter  = time.Date(2099, 12, 31, 23, 59, 59, 0, time.UTC)
)

// ErrUnknownServerName is the handshake error of the test internet's TLS
// services for a server name they hold no certificate for.
var ErrUnknownServerName = errors.New("no certificate for this server name in the test internet")

type testCA struct {
	key  ed25519.PrivateKey
	cert *x509.Certificate
	der  []byte
}

var loadTestCA = sync.OnceValue(func() *testCA {
	key := ed25519.NewKeyFromSeed(testCASeed)
	pub := key.Public().(ed25519.PublicKey)
	// The key identifier is set here rather than left to crypto/x509,
	// whose choice of hash has changed between Go releases.
	skid := sha256.Sum256(pub)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: testCAName},
		NotBefore:             testCANotBefore,
		NotAfter:              testCANotAfter,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
		SubjectKeyId:          skid[:20],
	}
	der, err := x509.CreateCertificate(nil, tmpl, tmpl, pub, key)
	if err != nil {
		panic(fmt.Sprintf("test CA certificate: %v", err))
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		panic(fmt.Sprintf("parsing the test CA certificate: %v", err))
	}
	return &testCA{key: key, cert: cert, der: der}
})

// TestCAPEM returns the test internet's CA certificate in PEM, the one
// root a client of its TLS services trusts (curl --cacert,
// GIT_SSL_CAINFO, x509.CertPool.AppendCertsFromPEM). The bytes are the
// same in every process.
func TestCAPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: loadTestCA().der})
}

// ServerTLSConfig returns the configuration of the test internet's TLS
// services: for a server name in DynamicSuffix, or InternetName, it
// presents an Ed25519 certificate the test CA issued for that name
// (issued at the first handshake, then cached); any other name, or none,
// fails the handshake with ErrUnknownServerName.
func ServerTLSConfig() *tls.Config {
	var (
		mu     sync.Mutex
		issued = map[string]*tls.Certificate{}
	)
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetCertificate: func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
			name := strings.ToLower(hello.ServerName)
			if !servedName(name) {
				return nil, fmt.Errorf("server name %q: %w", hello.ServerName, ErrUnknownServerName)
			}
			mu.Lock()
			defer mu.Unlock()
			if c, ok := issued[name]; ok {
				return c, nil
			}
			c, err := issueLeaf(name)
			if err != nil {
				return nil, err
			}
			issued[name] = c
			return c, nil
		},
	}
}

// servedName reports whether the TLS services hold a certificate for name.
func servedName(name string) bool {
	return name == InternetName || strings.HasSuffix(name, "."+DynamicSuffix)
}

// issueLeaf makes a server certificate for name, signed by the test CA.
func issueLeaf(name string) (*tls.Certificate, error) {
	ca := loadTestCA()
	pub, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("leaf key for %q: %w", name, err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("leaf serial for %q: %w", name, err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: name},
		DNSNames:     []string{name},
		NotBefore:    testCANotBefore,
		NotAfter:     testCANotAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, pub, ca.key)
	if err != nil {
		return nil, fmt.Errorf("leaf certificate for %q: %w", name, err)
	}
	return &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}
