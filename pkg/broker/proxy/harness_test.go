package proxy

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"lazaret.dev/pkg/broker/brokertest"

	"lazaret.dev/pkg/broker"
)

// harness is a proxy in front of one local TLS upstream that answers for
// every brokered host.
type harness struct {
	cfg       *broker.Config
	upstream  *httptest.Server
	proxyAddr string
	proxy     *Proxy

	mu     sync.Mutex
	events []Event
}

// startHarness starts an upstream serving handler, trusted only through
// broker.Credential.UpstreamCA, and a proxy on loopback serving port 443 that dials
// every destination at the upstream.
func startHarness(tb testing.TB, handler http.Handler) *harness {
	tb.Helper()
	h := &harness{cfg: brokertest.Config(tb)}
	upCA, err := broker.NewAuthority("upstream", brokertest.Hosts, time.Now(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	for i := range h.cfg.Credentials {
		h.cfg.Credentials[i].UpstreamCA = upCA.CertificatePEM()
	}
	h.upstream = httptest.NewUnstartedServer(handler)
	h.upstream.EnableHTTP2 = true
	h.upstream.TLS = &tls.Config{GetCertificate: func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
		return upCA.Leaf(hello.ServerName)
	}}
	h.upstream.StartTLS()
	tb.Cleanup(h.upstream.Close)

	h.proxy, err = NewProxy(h.cfg, Options{
		Dial: func(ctx context.Context, host string, port uint16) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", h.upstream.Listener.Addr().String())
		},
		Roots: x509.NewCertPool(),
		Log:   h.record,
	})
	if err != nil {
		tb.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	h.proxyAddr = l.Addr().String()
	done := make(chan error, 1)
	go func() { done <- h.proxy.Serve(l, 443) }()
	tb.Cleanup(func() {
		h.proxy.Close()
		if err := <-done; err != nil {
			tb.Errorf("Serve: %v", err)
		}
	})
	return h
}

// record is the proxy's Log.
func (h *harness) record(e Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.events = append(h.events, e)
}

// takeEvents returns the events logged since the last call.
func (h *harness) takeEvents() []Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	e := h.events
	h.events = nil
	return e
}

// clientTo returns an HTTP client that trusts roots and connects every
// request to addr.
func clientTo(addr string, roots *x509.CertPool) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", addr)
		},
		TLSClientConfig:    &tls.Config{RootCAs: roots},
		DisableCompression: true,
		ForceAttemptHTTP2:  true,
	}}
}

// client returns a client of the proxy trusting the broker authority only,
// as the sandbox does.
func (h *harness) client() *http.Client {
	roots := x509.NewCertPool()
	roots.AddCert(h.cfg.Authority.Certificate())
	return clientTo(h.proxyAddr, roots)
}

// directClient returns a client of the upstream itself, for comparison.
func (h *harness) directClient() *http.Client {
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(h.cfg.Credentials[0].UpstreamCA)
	return clientTo(h.upstream.Listener.Addr().String(), roots)
}
