package proxy

import (
	"io"
	"net/http"
	"testing"

	"lazaret.dev/pkg/broker/brokertest"
)

// benchTargets returns the direct and brokered clients of one harness, with
// the header each sends: the real value directly, the placeholder through
// the broker.
func benchTargets(b *testing.B) (*harness, map[string]*http.Client, map[string]string) {
	h := startHarness(b, &upstream{seen: make(chan *http.Request, 1)})
	oai := brokertest.Cred(h.cfg, "OPENAI_API_KEY")
	clients := map[string]*http.Client{"direct": h.directClient(), "brokered": h.client()}
	auth := map[string]string{"direct": "Bearer " + oai.Value, "brokered": "Bearer " + oai.Placeholder}
	return h, clients, auth
}

// fetch sends one GET with the Authorization auth and drains the response.
func fetch(b *testing.B, c *http.Client, url, auth string) int64 {
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Authorization", auth)
	res, err := c.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	n, err := io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if err != nil || res.StatusCode != 200 {
		b.Fatalf("status %d, %v", res.StatusCode, err)
	}
	return n
}

// BenchmarkRequest measures a small GET over a kept-alive TLS connection,
// directly to the upstream and through the broker.
func BenchmarkRequest(b *testing.B) {
	for _, name := range []string{"direct", "brokered"} {
		b.Run(name, func(b *testing.B) {
			_, clients, auth := benchTargets(b)
			fetch(b, clients[name], "https://api.openai.example/", auth[name])
			b.ResetTimer()
			for b.Loop() {
				fetch(b, clients[name], "https://api.openai.example/", auth[name])
			}
		})
	}
}

// BenchmarkThroughput measures an 8 MiB response body, directly and
// through the broker (which scrubs it).
func BenchmarkThroughput(b *testing.B) {
	for _, name := range []string{"direct", "brokered"} {
		b.Run(name, func(b *testing.B) {
			_, clients, auth := benchTargets(b)
			b.SetBytes(int64(len(bigBody)))
			fetch(b, clients[name], "https://api.openai.example/big", auth[name])
			b.ResetTimer()
			for b.Loop() {
				fetch(b, clients[name], "https://api.openai.example/big", auth[name])
			}
		})
	}
}
