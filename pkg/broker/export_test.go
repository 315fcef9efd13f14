package broker

import (
	"crypto/ecdsa"
	"crypto/x509"
)

// AuthoritySigner exposes an authority's certificate and key to the
// external tests, which sign with it as someone holding a leaked key
// could.
func AuthoritySigner(a *Authority) (*x509.Certificate, *ecdsa.PrivateKey) { return a.cert, a.key }

// WireVersion is the version string Encode writes.
const WireVersion = wireVersion
