package broker_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"errors"
	"math/big"
	"slices"
	"testing"
	"time"

	"lazaret.dev/pkg/broker"
	"lazaret.dev/pkg/broker/brokertest"
)

// verifyLeaf verifies a leaf for host against the authority alone.
func verifyLeaf(a *broker.Authority, leaf *x509.Certificate, host string) error {
	roots := x509.NewCertPool()
	roots.AddCert(a.Certificate())
	_, err := leaf.Verify(x509.VerifyOptions{DNSName: host, Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	return err
}

func TestAuthorityCertificate(t *testing.T) {
	now := time.Now()
	a, err := broker.NewAuthority("gen-7", brokertest.Hosts, now, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	c := a.Certificate()
	if c.Subject.CommonName != "Lazaret credential broker gen-7" || !c.IsCA || !c.MaxPathLenZero || c.KeyUsage&x509.KeyUsageCertSign == 0 {
		t.Errorf("CA certificate: CN %q, IsCA %v, MaxPathLenZero %v, KeyUsage %v", c.Subject.CommonName, c.IsCA, c.MaxPathLenZero, c.KeyUsage)
	}
	if !slices.Equal(c.PermittedDNSDomains, brokertest.Hosts) || !c.PermittedDNSDomainsCritical {
		t.Errorf("name constraints %v (critical %v), want exactly %v, critical", c.PermittedDNSDomains, c.PermittedDNSDomainsCritical, brokertest.Hosts)
	}
	if !criticalNameConstraints(c) {
		t.Error("NameConstraints extension is missing or not critical")
	}
	if !c.NotBefore.Equal(now.Add(-time.Hour).Truncate(time.Second)) || !c.NotAfter.Equal(now.Add(30*24*time.Hour).Truncate(time.Second)) {
		t.Errorf("validity %v to %v", c.NotBefore, c.NotAfter)
	}
	if _, ok := c.PublicKey.(*ecdsa.PublicKey); !ok {
		t.Errorf("key %T, want ECDSA", c.PublicKey)
	}
	if b, _ := pem.Decode(a.CertificatePEM()); b == nil || b.Type != "CERTIFICATE" || !slices.Equal(b.Bytes, c.Raw) {
		t.Error("CertificatePEM does not hold the certificate")
	}
}

// criticalNameConstraints reports whether c carries a critical
// NameConstraints extension (2.5.29.30).
func criticalNameConstraints(c *x509.Certificate) bool {
	for _, e := range c.Extensions {
		if e.Id.Equal(asn1.ObjectIdentifier{2, 5, 29, 30}) {
			return e.Critical
		}
	}
	return false
}

func TestNewAuthorityHosts(t *testing.T) {
	for _, hosts := range [][]string{nil, {"API.example"}, {"a.example."}, {"a..example"}, {"-a.example"}, {"a.example", "a.example"}, {"*.example"}} {
		if _, err := broker.NewAuthority("x", hosts, time.Now(), rand.Reader); err == nil {
			t.Errorf("NewAuthority(%q) succeeded", hosts)
		}
	}
}

func TestLeaf(t *testing.T) {
	a, err := broker.NewAuthority("x", brokertest.Hosts, time.Now(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := a.Leaf(brokertest.OpenAIDest.Host)
	if err != nil {
		t.Fatal(err)
	}
	if err := verifyLeaf(a, leaf.Leaf, brokertest.OpenAIDest.Host); err != nil {
		t.Errorf("leaf for a permitted host: %v", err)
	}
	if !slices.Equal(leaf.Leaf.DNSNames, []string{brokertest.OpenAIDest.Host}) || leaf.Leaf.NotAfter.After(a.Certificate().NotAfter) ||
		leaf.Leaf.NotBefore.Before(a.Certificate().NotBefore) {
		t.Errorf("leaf names %v, validity %v to %v", leaf.Leaf.DNSNames, leaf.Leaf.NotBefore, leaf.Leaf.NotAfter)
	}
	again, _ := a.Leaf(brokertest.OpenAIDest.Host)
	if again != leaf {
		t.Error("Leaf did not return the cached certificate")
	}
	if _, err := a.Leaf("evil.example"); !errors.Is(err, broker.ErrNotBrokered) {
		t.Errorf("Leaf(evil.example) error = %v, want ErrNotBrokered", err)
	}
}

// TestNameConstraintsHold signs, with the authority's own key, a leaf for a
// name outside its hosts, as someone holding a leaked key could: no
// verifier that honours name constraints may accept it.
func TestNameConstraintsHold(t *testing.T) {
	a, err := broker.NewAuthority("x", brokertest.Hosts, time.Now(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caCert, caKey := broker.AuthoritySigner(a)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	for _, host := range []string{"evil.example", "example", "api.openai.example.evil"} {
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(7),
			Subject:      pkix.Name{CommonName: host},
			DNSNames:     []string{host},
			NotBefore:    caCert.NotBefore,
			NotAfter:     caCert.NotAfter,
			KeyUsage:     x509.KeyUsageDigitalSignature,
			ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		leaf, err := x509.ParseCertificate(der)
		if err != nil {
			t.Fatal(err)
		}
		var cerr x509.CertificateInvalidError
		if err := verifyLeaf(a, leaf, host); !errors.As(err, &cerr) || cerr.Reason != x509.CANotAuthorizedForThisName {
			t.Errorf("leaf for %q signed with the authority key: verify error %v, want CANotAuthorizedForThisName", host, err)
		}
	}
}
