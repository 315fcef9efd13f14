package netlab

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestHTTPSServices reaches the test internet's HTTPS services from the
// host's namespace as a client of the broker would: by name, trusting
// only the test CA, with curl (through git) and Go's client.
func TestHTTPSServices(t *testing.T) {
	if !EnterInternet(t) {
		return
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(TestCAPEM()) {
		t.Fatal("TestCAPEM is no certificate")
	}
	// Dial the addresses straight: this namespace's resolver does not
	// know the test internet's names.
	dialer := &net.Dialer{Timeout: 5 * time.Second}
	client := &http.Client{
		Timeout: 10 * time.Second,
		Transport: &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: pool},
			DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				host, port, err := net.SplitHostPort(addr)
				if err != nil {
					return nil, err
				}
				for _, h := range []netip.Addr{APIHost, OtherHost} {
					if host == DynamicName(h, 60) {
						return dialer.DialContext(ctx, network, net.JoinHostPort(h.String(), port))
					}
				}
				return nil, fmt.Errorf("no address for %s in this test", host)
			},
		},
	}
	url := func(h netip.Addr, path string) string {
		return fmt.Sprintf("https://%s:%d%s", DynamicName(h, 60), TLSPort, path)
	}
	do := func(method, u, body string, header http.Header) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, u, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header = header
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, u, err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("%s %s: reading the answer: %v", method, u, err)
		}
		return resp.StatusCode, string(b)
	}

	t.Run("check", func(t *testing.T) {
		for _, h := range []netip.Addr{APIHost, OtherHost} {
			code, body := do("GET", url(h, "/check"), "", http.Header{"X-Api-Key": {BrokerSecret}})
			if want := fmt.Sprintf("real credential received in x-api-key by %s:%d\n", h, TLSPort); code != 200 || body != want {
				t.Errorf("%v with the secret: %d %q, want 200 %q", h, code, body, want)
			}
		}
		const wrong = "sk-placeholder-not-it"
		code, body := do("GET", url(APIHost, "/check"), "", http.Header{"Authorization": {"Bearer " + wrong}})
		if code != 401 || strings.Contains(body, wrong) || !strings.HasPrefix(body, "no real credential: authorization=sha256:") {
			t.Errorf("wrong secret: %d %q", code, body)
		}
	})

	t.Run("messages", func(t *testing.T) {
		key := http.Header{"X-Api-Key": {BrokerSecret}, "Content-Type": {"application/json"}}
		code, body := do("POST", url(APIHost, "/v1/messages"), messagesFirst, key)
		if code != 200 || !strings.Contains(body, `"type":"tool_use"`) {
			t.Errorf("non-streamed: %d %s", code, body)
		}
		code, body = do("POST", url(APIHost, "/v1/messages"), strings.Replace(messagesResult, `{"model"`, `{"stream":true,"model"`, 1), key)
		names, data := sseEvents(t, body)
		if code != 200 || len(names) != 6 || names[5] != "message_stop" {
			t.Fatalf("streamed: %d %v", code, names)
		}
		if d := data[2]["delta"].(map[string]any); d["text"] != `tool said: "tool-42"` {
			t.Errorf("streamed delta %v", d)
		}
	})

	t.Run("git clone", func(t *testing.T) {
		git, err := exec.LookPath("git")
		if err != nil {
			t.Fatal("git not on PATH")
		}
		dir := t.TempDir()
		ca := filepath.Join(dir, "ca.pem")
		if err := os.WriteFile(ca, TestCAPEM(), 0o644); err != nil {
			t.Fatal(err)
		}
		name := DynamicName(APIHost, 60)
		cmd := exec.Command(git,
			"-c", fmt.Sprintf("http.curloptResolve=%s:%d:%s", name, TLSPort, APIHost),
			"clone", "-q", fmt.Sprintf("https://user:%s@%s:%d/repo.git", BrokerSecret, name, TLSPort), filepath.Join(dir, "clone"))
		cmd.Env = append(os.Environ(), "GIT_SSL_CAINFO="+ca, "GIT_TERMINAL_PROMPT=0", "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git clone: %v\n%s", err, out)
		}
		got, err := os.ReadFile(filepath.Join(dir, "clone", "README"))
		if err != nil || string(got) != gitReadme {
			t.Fatalf("README %q, %v", got, err)
		}
		// Without the secret, git is refused (and asks nobody).
		cmd = exec.Command(git,
			"-c", fmt.Sprintf("http.curloptResolve=%s:%d:%s", name, TLSPort, APIHost),
			"ls-remote", fmt.Sprintf("https://user:wrong@%s:%d/repo.git", name, TLSPort))
		cmd.Env = append(os.Environ(), "GIT_SSL_CAINFO="+ca, "GIT_TERMINAL_PROMPT=0", "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir)
		if out, err := cmd.CombinedOutput(); err == nil {
			t.Fatalf("git ls-remote with a wrong password succeeded:\n%s", out)
		}
	})
}
