package proxy

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"lazaret.dev/pkg/broker"
)

// Event is one log entry of the proxy. It never holds a value or a
// placeholder.
type Event struct {
	Time time.Time
	// Kind is "brokered" or "refused".
	Kind string
	// Credentials are the names substituted (brokered) or involved
	// (refused).
	Credentials []string
	// Host is the TLS server name or destination host, "" if unknown.
	Host string
	Port uint16
	// Method is the request method, "" for a refusal during the TLS
	// handshake.
	Method string
	// Status is the upstream's status for brokered, 403 or 421 for a
	// refused request, and 0 for a refused handshake.
	Status int
	// Reason says, for refused only, what was refused and why.
	Reason string
}

// Event kinds.
const (
	KindBrokered = "brokered"
	KindRefused  = "refused"
)

// Options are the proxy's dependencies.
type Options struct {
	// Dial opens the upstream TCP connection to host:port; the network
	// sidecar resolves the name itself and checks every address against
	// its policy. nil: a net.Dialer.
	Dial func(ctx context.Context, host string, port uint16) (net.Conn, error)
	// Roots are the system roots; nil: x509.SystemCertPool().
	Roots *x509.CertPool
	// Log receives an Event for every brokered or refused request and
	// every refused handshake. nil: discard.
	Log func(Event)
}

// Timeouts of the proxy's servers and upstream transports.
const (
	readHeaderTimeout     = 30 * time.Second
	idleTimeout           = 120 * time.Second
	maxHeaderBytes        = 64 << 10
	tlsHandshakeTimeout   = 10 * time.Second
	responseHeaderTimeout = 120 * time.Second
	dialTimeout           = 10 * time.Second
)

// Proxy terminates TLS for the brokered destinations, rewrites requests as
// Rewrite decides and forwards them upstream.
type Proxy struct {
	cfg        *broker.Config
	log        func(Event)
	scrub      *scrubber
	transports map[broker.Destination]*http.Transport

	mu      sync.Mutex
	closed  bool
	servers map[*http.Server]struct{}
}

// NewProxy validates cfg and returns a proxy for it. cfg must not be
// changed afterwards.
func NewProxy(cfg *broker.Config, opts Options) (*Proxy, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	roots := opts.Roots
	if roots == nil {
		var err error
		if roots, err = x509.SystemCertPool(); err != nil {
			return nil, fmt.Errorf("loading system roots: %w", err)
		}
	}
	dial := opts.Dial
	if dial == nil {
		dial = defaultDial
	}
	p := &Proxy{cfg: cfg, log: opts.Log, scrub: newScrubber(cfg.Credentials),
		transports: map[broker.Destination]*http.Transport{}, servers: map[*http.Server]struct{}{}}
	if p.log == nil {
		p.log = func(Event) {}
	}
	for _, d := range cfg.Destinations() {
		p.transports[d] = newTransport(rootsFor(cfg, d, roots), dial)
	}
	return p, nil
}

// defaultDial opens a TCP connection with a net.Dialer.
func defaultDial(ctx context.Context, host string, port uint16) (net.Conn, error) {
	d := net.Dialer{Timeout: dialTimeout}
	return d.DialContext(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(int(port))))
}

// rootsFor returns roots plus the UpstreamCA of every credential sent to d.
func rootsFor(c *broker.Config, d broker.Destination, roots *x509.CertPool) *x509.CertPool {
	pool := roots.Clone()
	for i := range c.Credentials {
		if cr := &c.Credentials[i]; cr.Allows(d) && len(cr.UpstreamCA) > 0 {
			pool.AppendCertsFromPEM(cr.UpstreamCA)
		}
	}
	return pool
}

// newTransport returns the upstream transport for one destination.
func newTransport(roots *x509.CertPool, dial func(context.Context, string, uint16) (net.Conn, error)) *http.Transport {
	return &http.Transport{
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
			host, port, err := splitHostPort(addr)
			if err != nil {
				return nil, err
			}
			return dial(ctx, host, port)
		},
		TLSClientConfig:       &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2:     true,
		TLSHandshakeTimeout:   tlsHandshakeTimeout,
		ResponseHeaderTimeout: responseHeaderTimeout,
		IdleConnTimeout:       idleTimeout,
		MaxIdleConnsPerHost:   16,
		DisableCompression:    true,
	}
}

// splitHostPort splits "host:port" with a numeric port.
func splitHostPort(addr string) (string, uint16, error) {
	host, ps, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, fmt.Errorf("upstream address %q: %w", addr, err)
	}
	port, err := strconv.ParseUint(ps, 10, 16)
	if err != nil {
		return "", 0, fmt.Errorf("upstream address %q: %w", addr, err)
	}
	return host, uint16(port), nil
}

// Serve accepts TCP connections on l, which listens on port (one of the
// configuration's Ports), terminates TLS and forwards requests. It takes
// ownership of l. It returns nil when l is closed or Close is called.
func (p *Proxy) Serve(l net.Listener, port uint16) error {
	if !slices.Contains(p.cfg.Ports(), port) {
		l.Close()
		return fmt.Errorf("serving port %d: %w", port, ErrNotServedPort)
	}
	srv := &http.Server{
		Handler:           p.handler(port),
		ReadHeaderTimeout: readHeaderTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          log.New(io.Discard, "", 0),
		TLSNextProto:      map[string]func(*http.Server, *tls.Conn, http.Handler){},
	}
	if !p.track(srv) {
		l.Close()
		return ErrClosed
	}
	defer p.untrack(srv)
	err := srv.Serve(tls.NewListener(l, p.tlsConfig(port)))
	if errors.Is(err, http.ErrServerClosed) || errors.Is(err, net.ErrClosed) {
		return nil
	}
	return fmt.Errorf("serving port %d: %w", port, err)
}

// track registers srv for Close, unless the proxy is closed.
func (p *Proxy) track(srv *http.Server) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.servers[srv] = struct{}{}
	return true
}

// untrack forgets srv.
func (p *Proxy) untrack(srv *http.Server) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.servers, srv)
}

// Close closes every listener and open connection and the upstream
// transports' idle connections. Serve returns afterwards.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	servers := make([]*http.Server, 0, len(p.servers))
	for s := range p.servers {
		servers = append(servers, s)
	}
	p.mu.Unlock()
	var errs []error
	for _, s := range servers {
		errs = append(errs, s.Close())
	}
	for _, t := range p.transports {
		t.CloseIdleConnections()
	}
	return errors.Join(errs...)
}

// tlsConfig returns the server TLS configuration for port: the leaf for
// the client's server name, if it is a destination on port.
func (p *Proxy) tlsConfig(port uint16) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"http/1.1"},
		GetCertificate: func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
			return p.certificate(hello.ServerName, port)
		},
	}
}

// certificate returns the leaf for server name sni on port, or refuses the
// handshake.
func (p *Proxy) certificate(sni string, port uint16) (*tls.Certificate, error) {
	host := strings.ToLower(sni)
	var reason string
	switch {
	case host == "":
		reason = "no TLS server name"
	case holdsPlaceholder(p.cfg, host):
		host, reason = "", fmt.Sprintf("TLS server name carrying a placeholder on port %d", port)
	case !p.cfg.Serves(broker.Destination{Host: host, Port: port}):
		reason = fmt.Sprintf("TLS server name %q is not a brokered destination on port %d", host, port)
	default:
		return p.cfg.Authority.Leaf(host)
	}
	p.log(Event{Time: time.Now(), Kind: KindRefused, Host: host, Port: port, Reason: reason})
	return nil, errors.New(reason)
}

// holdsPlaceholder reports whether s holds any credential's placeholder,
// case-insensitively, so that it is not logged.
func holdsPlaceholder(c *broker.Config, s string) bool {
	s = strings.ToLower(s)
	for i := range c.Credentials {
		if strings.Contains(s, strings.ToLower(c.Credentials[i].Placeholder)) {
			return true
		}
	}
	return false
}

// handler returns the request handler for port.
func (p *Proxy) handler(port uint16) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		dest := broker.Destination{Host: strings.ToLower(r.TLS.ServerName), Port: port}
		if requestHost(r.Host) != dest.Host {
			p.refuse(w, r, dest, http.StatusMisdirectedRequest, Decision{
				Reason: fmt.Sprintf("the Host header names another host than the TLS server name %q", dest.Host)})
			return
		}
		before := slices.Clone(r.Header.Values("Authorization"))
		d := Rewrite(p.cfg, r.Header, r.RequestURI, dest)
		if d.Refused {
			p.refuse(w, r, dest, http.StatusForbidden, d)
			return
		}
		p.forward(w, r, dest, d.Credentials, p.scrub.with(basicEchoes(before, r.Header.Values("Authorization"))))
	})
}

// requestHost returns the lowercase host of a Host header, port stripped.
func requestHost(h string) string {
	if host, _, err := net.SplitHostPort(h); err == nil {
		h = host
	}
	return strings.ToLower(h)
}

// refuse answers status with the reason and logs the refusal.
func (p *Proxy) refuse(w http.ResponseWriter, r *http.Request, dest broker.Destination, status int, d Decision) {
	p.log(Event{Time: time.Now(), Kind: KindRefused, Credentials: d.Credentials, Host: dest.Host, Port: dest.Port,
		Method: r.Method, Status: status, Reason: d.Reason})
	w.Header().Set("X-Lazaret-Broker", "refused")
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Connection", "close")
	w.WriteHeader(status)
	io.WriteString(w, "lazaret credential broker refused this request: "+d.Reason+"\n")
}

// forward sends r to dest, with the credentials named in substituted
// already swapped in, and streams the scrubbed response back.
func (p *Proxy) forward(w http.ResponseWriter, r *http.Request, dest broker.Destination, substituted []string, scrub *scrubber) {
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme = "https"
			pr.Out.URL.Host = dest.String()
			pr.Out.Host = pr.In.Host
			if len(substituted) > 0 {
				pr.Out.Header.Set("Accept-Encoding", "identity")
			}
		},
		Transport:     p.transports[dest],
		FlushInterval: -1,
		ErrorLog:      log.New(io.Discard, "", 0),
		ModifyResponse: func(res *http.Response) error {
			return p.response(res, r, dest, substituted, scrub)
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			p.upstreamFailed(w, r, dest, substituted, err)
		},
	}
	rp.ServeHTTP(w, r)
}

// errEncodedResponse refuses a response the proxy cannot scrub.
var errEncodedResponse = errors.New("upstream answered a brokered request with an encoded body, which cannot be scrubbed")

// response scrubs an upstream response and logs a brokered request.
func (p *Proxy) response(res *http.Response, r *http.Request, dest broker.Destination, substituted []string, scrub *scrubber) error {
	encoded := !identityEncoding(res.Header.Get("Content-Encoding"))
	if len(substituted) > 0 && encoded {
		return errEncodedResponse
	}
	if len(substituted) > 0 {
		p.log(Event{Time: time.Now(), Kind: KindBrokered, Credentials: substituted, Host: dest.Host, Port: dest.Port,
			Method: r.Method, Status: res.StatusCode})
	}
	if len(scrub.olds) == 0 {
		return nil
	}
	scrub.header(res.Header)
	if !encoded {
		res.Body = scrub.body(res.Body, func() { scrub.header(res.Trailer) })
	}
	return nil
}

// identityEncoding reports whether a Content-Encoding leaves the body as
// it is.
func identityEncoding(ce string) bool {
	ce = strings.TrimSpace(ce)
	return ce == "" || strings.EqualFold(ce, "identity")
}

// upstreamFailed answers 502 with a plain reason and logs a brokered
// request's failure.
func (p *Proxy) upstreamFailed(w http.ResponseWriter, r *http.Request, dest broker.Destination, substituted []string, err error) {
	reason := "could not reach " + dest.String()
	if errors.Is(err, errEncodedResponse) {
		reason = errEncodedResponse.Error()
	}
	if len(substituted) > 0 {
		p.log(Event{Time: time.Now(), Kind: KindBrokered, Credentials: substituted, Host: dest.Host, Port: dest.Port,
			Method: r.Method, Status: http.StatusBadGateway})
	}
	w.Header().Set("X-Lazaret-Broker", "upstream-failed")
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusBadGateway)
	io.WriteString(w, "lazaret credential broker: "+reason+"\n")
}

// Errors of Serve.
var (
	ErrNotServedPort = errors.New("port is not a destination port of the configuration")
	ErrClosed        = errors.New("broker proxy is closed")
)
