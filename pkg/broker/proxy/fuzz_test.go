package proxy

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"

	"lazaret.dev/pkg/broker/brokertest"

	"lazaret.dev/pkg/broker"
)

// fuzzConfig is the fixed configuration FuzzRewrite runs against.
var fuzzConfig *broker.Config

// fuzzSeeds are requests FuzzRewrite starts from; PH_<NAME> stands for the
// placeholder of credential NAME.
var fuzzSeeds = []string{
	"GET /v1/models HTTP/1.1\r\nHost: api.openai.example\r\nAuthorization: Bearer PH_OPENAI_API_KEY\r\n\r\n",
	"POST /v1/messages HTTP/1.1\r\nHost: api.anthropic.example\r\nx-api-key: PH_ANTHROPIC_API_KEY\r\nContent-Length: 2\r\n\r\n{}",
	"GET /info/refs?service=git-upload-pack HTTP/1.1\r\nHost: git.example\r\nAuthorization: Basic BASIC_GIT_TOKEN\r\n\r\n",
	"GET /?key=PH_ANTHROPIC_API_KEY HTTP/1.1\r\nHost: api.anthropic.example\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: api.openai.example\r\nAuthorization: Bearer PH_OPENAI_API_KEY\r\nAuthorization: Bearer PH_OPENAI_API_KEY\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: api.openai.example\r\nX-Api-Key: PH_ANTHROPIC_API_KEY\r\nCookie: a=PH_GIT_TOKEN\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: x\r\nAccept: */*\r\n\r\n",
}

// expandSeed replaces the seed markers with the fixture's placeholders.
func expandSeed(c *broker.Config, s string) string {
	for _, cr := range c.Credentials {
		s = strings.ReplaceAll(s, "BASIC_"+cr.Name, strings.TrimPrefix(basic("user", cr.Placeholder), "Basic "))
		s = strings.ReplaceAll(s, "PH_"+cr.Name, cr.Placeholder)
	}
	return s
}

// FuzzRewrite parses the input as an HTTP/1.1 request and checks the
// invariants of Rewrite toward each fixture destination.
func FuzzRewrite(f *testing.F) {
	fuzzConfig = brokertest.Config(f)
	for _, s := range fuzzSeeds {
		f.Add([]byte(expandSeed(fuzzConfig, s)))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		req, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(data)))
		if err != nil {
			return
		}
		for _, dest := range []broker.Destination{brokertest.AnthropicDest, brokertest.OpenAIDest, brokertest.GitDest, brokertest.OtherDest} {
			h := req.Header.Clone()
			if h == nil {
				h = http.Header{}
			}
			d := Rewrite(fuzzConfig, h, req.RequestURI, dest)
			checkRewrite(t, fuzzConfig, data, h, dest, d)
		}
	})
}

// checkRewrite asserts Rewrite's invariants for one outcome.
func checkRewrite(t *testing.T, c *broker.Config, input []byte, h http.Header, dest broker.Destination, d Decision) {
	t.Helper()
	for k, vs := range h {
		for _, v := range vs {
			if hasControl(v) {
				t.Fatalf("header %q holds CR, LF or NUL after Rewrite", k)
			}
		}
	}
	for i := range c.Credentials {
		cr := &c.Credentials[i]
		if strings.Contains(d.Reason, cr.Value) || strings.Contains(d.Reason, cr.Placeholder) {
			t.Fatalf("reason %q holds a value or placeholder of %s", d.Reason, cr.Name)
		}
		if d.Refused || bytes.Contains(input, []byte(cr.Value)) {
			continue
		}
		for k, vs := range h {
			for _, v := range vs {
				carries := strings.Contains(v, cr.Value) || strings.Contains(decodedBasic(v), cr.Value)
				if carries && (strings.ToLower(k) != cr.Field() || !cr.Allows(dest)) {
					t.Fatalf("value of %s in header %q toward %s", cr.Name, k, dest)
				}
				if carries && strings.Contains(v, cr.Placeholder) {
					t.Fatalf("substituted placeholder of %s remains in header %q", cr.Name, k)
				}
			}
		}
	}
}

// decodedBasic returns the decoded credentials of a Basic value, or "".
func decodedBasic(v string) string {
	d, _ := decodeBasic(v)
	return d
}

// FuzzScrubBody checks the streaming scrubber against strings.ReplaceAll
// for any body and read sizes.
func FuzzScrubBody(f *testing.F) {
	c := brokertest.Config(f)
	s := newScrubber(c.Credentials)
	f.Add([]byte("x"+c.Credentials[0].Value+"y"+c.Credentials[1].Value[:9]), []byte{3, 1, 200})
	f.Fuzz(func(t *testing.T, body, sizes []byte) {
		in := string(body)
		// Splice values in where the input asks for them.
		for i, cr := range c.Credentials {
			in = strings.ReplaceAll(in, "$"+string(rune('0'+i)), cr.Value)
		}
		want := in
		for _, cr := range c.Credentials {
			want = strings.ReplaceAll(want, cr.Value, cr.Placeholder)
		}
		r := &sizedReader{b: []byte(in), sizes: sizes}
		got, err := io.ReadAll(s.body(io.NopCloser(r), nil))
		if err != nil || string(got) != want {
			t.Fatalf("scrubbed %q (%v), want %q", got, err, want)
		}
	})
}

// sizedReader returns data in reads of the given sizes, cycling.
type sizedReader struct {
	b     []byte
	sizes []byte
	i     int
}

func (r *sizedReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	n := len(r.b)
	if len(r.sizes) > 0 {
		n = int(r.sizes[r.i%len(r.sizes)]) + 1
		r.i++
	}
	n = copy(p, r.b[:min(n, len(r.b))])
	r.b = r.b[n:]
	return n, nil
}
