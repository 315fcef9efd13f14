package broker

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"slices"
	"sync"
	"time"
)

// authorityLifetime is how long after its creation an authority stays valid.
const authorityLifetime = 30 * 24 * time.Hour

// Authority is a per-generation certificate authority. Its certificate
// carries a critical name constraint listing exactly its hosts, so it can
// vouch for no other name even if its key leaked. The sandbox trusts its
// certificate; the broker presents leaves it signs.
//
// An Authority prints without its key under every fmt verb.
type Authority struct {
	cert   *x509.Certificate
	key    *ecdsa.PrivateKey
	leaves *leafCache
}

// leafCache holds the leaf certificates an authority has made, by host.
type leafCache struct {
	mu     sync.Mutex
	leaves map[string]*tls.Certificate
}

// NewAuthority makes an ECDSA P-256 self-signed CA named "Lazaret credential
// broker " + label, valid from now-1h to now+30 days, which may sign leaves
// for hosts only (a critical NameConstraints extension permits exactly
// hosts). hosts must be non-empty lowercase DNS names, each given once.
// rand supplies the key and serial number.
func NewAuthority(label string, hosts []string, now time.Time, rand io.Reader) (*Authority, error) {
	if err := checkHosts(hosts); err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand)
	if err != nil {
		return nil, fmt.Errorf("generating authority key: %w", err)
	}
	serial, err := newSerial(rand)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:                serial,
		Subject:                     pkix.Name{CommonName: "Lazaret credential broker " + label},
		NotBefore:                   now.Add(-time.Hour),
		NotAfter:                    now.Add(authorityLifetime),
		IsCA:                        true,
		BasicConstraintsValid:       true,
		MaxPathLen:                  0,
		MaxPathLenZero:              true,
		KeyUsage:                    x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		PermittedDNSDomainsCritical: true,
		PermittedDNSDomains:         slices.Clone(hosts),
	}
	der, err := x509.CreateCertificate(rand, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("signing authority certificate: %w", err)
	}
	return authorityFrom(der, key)
}

// checkHosts reports why hosts cannot be an authority's hosts.
func checkHosts(hosts []string) error {
	if len(hosts) == 0 {
		return ErrNoHosts
	}
	seen := make(map[string]bool, len(hosts))
	for _, h := range hosts {
		if err := checkHost(h); err != nil {
			return fmt.Errorf("authority host %q: %w", h, err)
		}
		if seen[h] {
			return fmt.Errorf("authority host %q: %w", h, ErrDuplicate)
		}
		seen[h] = true
	}
	return nil
}

// authorityFrom assembles an Authority from its certificate and key, checking
// that they belong together and that the certificate constrains its names.
func authorityFrom(der []byte, key *ecdsa.PrivateKey) (*Authority, error) {
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parsing authority certificate: %w", err)
	}
	if !key.PublicKey.Equal(cert.PublicKey) {
		return nil, ErrAuthorityKey
	}
	if !cert.IsCA || !cert.PermittedDNSDomainsCritical {
		return nil, fmt.Errorf("authority certificate %q is not a name-constrained CA", cert.Subject.CommonName)
	}
	if err := checkHosts(cert.PermittedDNSDomains); err != nil {
		return nil, err
	}
	return &Authority{cert: cert, key: key, leaves: &leafCache{leaves: map[string]*tls.Certificate{}}}, nil
}

// newSerial returns a random positive 128-bit serial number.
func newSerial(rand io.Reader) (*big.Int, error) {
	b := make([]byte, 16)
	if _, err := io.ReadFull(rand, b); err != nil {
		return nil, fmt.Errorf("drawing a serial number: %w", err)
	}
	b[0] &= 0x7f
	b[0] |= 0x40
	return new(big.Int).SetBytes(b), nil
}

// CertificatePEM returns the authority's certificate as one PEM block, for
// the sandbox's trust store.
func (a *Authority) CertificatePEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: a.cert.Raw})
}

// Certificate returns the authority's certificate. The caller must not
// modify it.
func (a *Authority) Certificate() *x509.Certificate {
	return a.cert
}

// has reports whether host is one of a's hosts.
func (a *Authority) has(host string) bool {
	return slices.Contains(a.cert.PermittedDNSDomains, host)
}

// Format prints a's name, hosts and expiry, never its key.
func (a Authority) Format(f fmt.State, _ rune) {
	if a.cert == nil {
		fmt.Fprint(f, "broker.Authority{}")
		return
	}
	fmt.Fprintf(f, "broker.Authority{CommonName:%q, Hosts:%v, NotAfter:%s}",
		a.cert.Subject.CommonName, a.cert.PermittedDNSDomains, a.cert.NotAfter.UTC().Format(time.RFC3339))
}

// Leaf returns the leaf certificate for host (ECDSA P-256, server
// authentication, the single DNS name host, the authority's validity),
// making it on first use. host must be one of the authority's hosts.
func (a *Authority) Leaf(host string) (*tls.Certificate, error) {
	if !a.has(host) {
		return nil, fmt.Errorf("leaf for %q: %w", host, ErrNotBrokered)
	}
	a.leaves.mu.Lock()
	defer a.leaves.mu.Unlock()
	if c, ok := a.leaves.leaves[host]; ok {
		return c, nil
	}
	c, err := a.makeLeaf(host)
	if err != nil {
		return nil, fmt.Errorf("leaf for %q: %w", host, err)
	}
	a.leaves.leaves[host] = c
	return c, nil
}

// makeLeaf signs a fresh leaf certificate for host.
func (a *Authority) makeLeaf(host string) (*tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating key: %w", err)
	}
	serial, err := newSerial(rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: host},
		DNSNames:              []string{host},
		NotBefore:             a.cert.NotBefore,
		NotAfter:              a.cert.NotAfter,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, &key.PublicKey, a.key)
	if err != nil {
		return nil, fmt.Errorf("signing: %w", err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parsing: %w", err)
	}
	return &tls.Certificate{Certificate: [][]byte{der, a.cert.Raw}, PrivateKey: key, Leaf: leaf}, nil
}
