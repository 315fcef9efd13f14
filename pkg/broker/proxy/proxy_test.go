package proxy

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"lazaret.dev/pkg/broker/brokertest"
)

// bigBody is the 8 MiB body /big serves.
var bigBody = func() []byte {
	b := make([]byte, 8<<20)
	for i := range b {
		b[i] = byte(i*7 + i>>11)
	}
	return b
}()

// upstream is the test upstream: it echoes what it received, streams
// events and serves a large body.
type upstream struct {
	seen    chan *http.Request
	release chan struct{}
}

func (u *upstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/echo":
		u.seen <- r
		auth := r.Header.Get("Authorization") + r.Header.Get("X-Api-Key")
		w.Header().Set("X-Echo", auth)
		w.Header().Set("Content-Length", strconv.Itoa(len(auth)+len("you sent: \n")))
		io.WriteString(w, "you sent: "+auth+"\n")
	case "/sse":
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range 3 {
			io.WriteString(w, "data: event "+strconv.Itoa(i)+"\n\n")
			w.(http.Flusher).Flush()
			<-u.release
		}
	case "/gzip":
		w.Header().Set("Content-Encoding", "gzip")
		io.WriteString(w, "not really gzip")
	case "/big":
		w.Header().Set("Content-Length", strconv.Itoa(len(bigBody)))
		w.Write(bigBody)
	default:
		io.WriteString(w, "ok")
	}
}

func TestProxyBrokers(t *testing.T) {
	u := &upstream{seen: make(chan *http.Request, 1)}
	h := startHarness(t, u)
	c := h.client()
	for _, tt := range []struct {
		cred, url, field, sent, want string
	}{
		{"OPENAI_API_KEY", "https://api.openai.example/echo", "Authorization", "Bearer %s", "Bearer %s"},
		{"ANTHROPIC_API_KEY", "https://api.anthropic.example/echo?x=1", "X-Api-Key", "%s", "%s"},
		{"GIT_TOKEN", "https://git.example/echo", "Authorization", "basic:%s", "basic:%s"},
	} {
		t.Run(tt.cred, func(t *testing.T) {
			cr := brokertest.Cred(h.cfg, tt.cred)
			form := func(format, v string) string {
				if user, ok := strings.CutPrefix(format, "basic:"); ok {
					return basic("x-access-token", strings.Replace(user, "%s", v, 1))
				}
				return strings.Replace(format, "%s", v, 1)
			}
			req, _ := http.NewRequest("GET", tt.url, nil)
			req.Header.Set(tt.field, form(tt.sent, cr.Placeholder))
			res, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			got := <-u.seen
			if got.Header.Get(tt.field) != form(tt.want, cr.Value) {
				t.Errorf("upstream did not receive the real value in %s", tt.field)
			}
			if got.Host != req.URL.Host || got.Header.Get("Accept-Encoding") != "identity" || got.Header.Get("X-Forwarded-For") != "" {
				t.Errorf("upstream saw Host %q, Accept-Encoding %q, X-Forwarded-For %q", got.Host, got.Header.Get("Accept-Encoding"), got.Header.Get("X-Forwarded-For"))
			}
			if bytes.Contains(body, []byte(cr.Value)) || strings.Contains(res.Header.Get("X-Echo"), cr.Value) {
				t.Fatal("the real value reached the client")
			}
			if want := form(tt.sent, cr.Placeholder); res.Header.Get("X-Echo") != want || string(body) != "you sent: "+want+"\n" {
				t.Errorf("client got X-Echo %q, body %q; want the placeholder echoed", res.Header.Get("X-Echo"), body)
			}
			ev := h.takeEvents()
			if len(ev) != 1 || ev[0].Kind != KindBrokered || ev[0].Status != 200 || !slices.Equal(ev[0].Credentials, []string{cr.Name}) ||
				ev[0].Host != req.URL.Host || ev[0].Port != 443 || ev[0].Method != "GET" {
				t.Errorf("events %+v, want one brokered 200 for %s", ev, cr.Name)
			}
		})
	}
}

func TestProxyRefusesWrongHost(t *testing.T) {
	u := &upstream{seen: make(chan *http.Request, 1)}
	h := startHarness(t, u)
	oai := brokertest.Cred(h.cfg, "OPENAI_API_KEY")
	req, _ := http.NewRequest("POST", "https://api.anthropic.example/echo", strings.NewReader("{}"))
	req.Header.Set("Authorization", "Bearer "+oai.Placeholder)
	res, err := h.client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	reason := "placeholder of OPENAI_API_KEY sent to api.anthropic.example:443, which is not one of its destinations (api.openai.example:443)"
	if res.StatusCode != 403 || res.Header.Get("X-Lazaret-Broker") != "refused" || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/plain") ||
		string(body) != "lazaret credential broker refused this request: "+reason+"\n" {
		t.Errorf("response %d %v %q", res.StatusCode, res.Header, body)
	}
	ev := h.takeEvents()
	if len(ev) != 1 || ev[0].Kind != KindRefused || ev[0].Status != 403 || ev[0].Reason != reason || ev[0].Method != "POST" ||
		!slices.Equal(ev[0].Credentials, []string{oai.Name}) {
		t.Errorf("events %+v, want one refusal", ev)
	}
	if len(u.seen) != 0 {
		t.Error("the refused request reached the upstream")
	}
}

func TestProxyRefusesMisdirected(t *testing.T) {
	u := &upstream{seen: make(chan *http.Request, 1)}
	h := startHarness(t, u)
	req, _ := http.NewRequest("GET", "https://api.openai.example/echo", nil)
	req.Host = "git.example"
	res, err := h.client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	ev := h.takeEvents()
	if res.StatusCode != http.StatusMisdirectedRequest || len(ev) != 1 || ev[0].Status != 421 || ev[0].Kind != KindRefused {
		t.Errorf("status %d, events %+v; want 421 and one refusal", res.StatusCode, ev)
	}
}

func TestProxyRefusesHandshake(t *testing.T) {
	h := startHarness(t, &upstream{})
	roots := x509.NewCertPool()
	roots.AddCert(h.cfg.Authority.Certificate())
	for _, tt := range []struct{ sni, reason string }{
		{"evil.example", `TLS server name "evil.example" is not a brokered destination on port 443`},
		{"other.example", `TLS server name "other.example" is not a brokered destination on port 443`},
		{"", "no TLS server name"},
		{"x" + strings.ToLower(brokertest.Cred(h.cfg, "GIT_TOKEN").Placeholder) + ".example",
			"TLS server name carrying a placeholder on port 443"},
	} {
		conn, err := tls.Dial("tcp", h.proxyAddr, &tls.Config{ServerName: tt.sni, RootCAs: roots, InsecureSkipVerify: tt.sni == ""})
		if err == nil {
			conn.Close()
			t.Errorf("handshake with server name %q succeeded", tt.sni)
		}
		ev := h.takeEvents()
		if len(ev) != 1 || ev[0].Kind != KindRefused || ev[0].Reason != tt.reason || ev[0].Status != 0 || ev[0].Method != "" {
			t.Errorf("server name %q: events %+v, want one refusal: %s", tt.sni, ev, tt.reason)
		}
	}
}

func TestProxyStreamsEvents(t *testing.T) {
	u := &upstream{release: make(chan struct{})}
	h := startHarness(t, u)
	res, err := h.client().Get("https://api.openai.example/sse")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	r := bufio.NewReader(res.Body)
	for i := range 3 {
		// The upstream sends event i+1 only after this event arrived.
		line, err := r.ReadString('\n')
		if err != nil || line != "data: event "+strconv.Itoa(i)+"\n" {
			t.Fatalf("event %d: %q, %v", i, line, err)
		}
		if _, err := r.ReadString('\n'); err != nil {
			t.Fatal(err)
		}
		u.release <- struct{}{}
	}
}

func TestProxyLargeBody(t *testing.T) {
	h := startHarness(t, &upstream{})
	res, err := h.client().Get("https://git.example/big")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	got, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	if sha256.Sum256(got) != sha256.Sum256(bigBody) || res.ContentLength != int64(len(bigBody)) {
		t.Errorf("got %d bytes (Content-Length %d), want the %d-byte body intact", len(got), res.ContentLength, len(bigBody))
	}
}

func TestProxyRefusesEncodedBrokeredResponse(t *testing.T) {
	h := startHarness(t, &upstream{})
	oai := brokertest.Cred(h.cfg, "OPENAI_API_KEY")
	req, _ := http.NewRequest("GET", "https://api.openai.example/gzip", nil)
	req.Header.Set("Authorization", "Bearer "+oai.Placeholder)
	res, err := h.client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	ev := h.takeEvents()
	if res.StatusCode != http.StatusBadGateway || bytes.Contains(body, []byte("not really")) || len(ev) != 1 || ev[0].Status != 502 {
		t.Errorf("status %d, body %q, events %+v; want 502 and one brokered event with 502", res.StatusCode, body, ev)
	}
	// Without a credential the encoded body passes untouched.
	res, err = h.client().Get("https://api.openai.example/gzip")
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || string(body) != "not really gzip" {
		t.Errorf("pass-through: status %d, body %q", res.StatusCode, body)
	}
}
