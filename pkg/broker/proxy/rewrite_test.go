package proxy

import (
	"encoding/base64"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"lazaret.dev/pkg/broker/brokertest"

	"lazaret.dev/pkg/broker"
)

// basic returns a Basic authorization value for user and password.
func basic(user, pass string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
}

func TestRewriteSubstitutes(t *testing.T) {
	c := brokertest.Config(t)
	ant, oai, git := brokertest.Cred(c, "ANTHROPIC_API_KEY"), brokertest.Cred(c, "OPENAI_API_KEY"), brokertest.Cred(c, "GIT_TOKEN")
	tests := []struct {
		name      string
		header    http.Header
		dest      broker.Destination
		field     string
		want      string
		wantNames []string
	}{
		{"header", http.Header{"X-Api-Key": {ant.Placeholder}}, brokertest.AnthropicDest, "X-Api-Key", ant.Value, []string{ant.Name}},
		{"header second destination", http.Header{"X-Api-Key": {ant.Placeholder}}, broker.Destination{Host: brokertest.AnthropicDest.Host, Port: 8443}, "X-Api-Key", ant.Value, []string{ant.Name}},
		{"header lowercase key", http.Header{"x-api-key": {ant.Placeholder}}, brokertest.AnthropicDest, "x-api-key", ant.Value, []string{ant.Name}},
		{"bearer", http.Header{"Authorization": {"Bearer " + oai.Placeholder}}, brokertest.OpenAIDest, "Authorization", "Bearer " + oai.Value, []string{oai.Name}},
		{"bearer lowercase word", http.Header{"Authorization": {"bearer " + oai.Placeholder}}, brokertest.OpenAIDest, "Authorization", "bearer " + oai.Value, []string{oai.Name}},
		{"basic", http.Header{"Authorization": {basic("x-access-token", git.Placeholder)}}, brokertest.GitDest, "Authorization", basic("x-access-token", git.Value), []string{git.Name}},
		{"basic empty user", http.Header{"Authorization": {basic("", git.Placeholder)}}, brokertest.GitDest, "Authorization", basic("", git.Value), []string{git.Name}},
		{"basic unpadded", http.Header{"Authorization": {strings.TrimRight(basic("ab", git.Placeholder), "=")}}, brokertest.GitDest, "Authorization", basic("ab", git.Value), []string{git.Name}},
		{"no placeholder", http.Header{"Authorization": {"Bearer sk-other"}, "X-Api-Key": {"k"}}, brokertest.OpenAIDest, "Authorization", "Bearer sk-other", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Rewrite(c, tt.header, "/v1/messages?beta=true", tt.dest)
			if d.Refused {
				t.Fatalf("refused: %s", d.Reason)
			}
			if got := tt.header[tt.field]; len(got) != 1 || got[0] != tt.want {
				t.Errorf("%s = %q, want %q", tt.field, got, tt.want)
			}
			if !slices.Equal(d.Credentials, tt.wantNames) {
				t.Errorf("credentials %v, want %v", d.Credentials, tt.wantNames)
			}
		})
	}
}

func TestRewriteTwoCredentials(t *testing.T) {
	c := brokertest.Config(t)
	ant := brokertest.Cred(c, "ANTHROPIC_API_KEY")
	// A second credential for the same destination, in Authorization.
	c.Credentials[1].Destinations = append(c.Credentials[1].Destinations, brokertest.AnthropicDest)
	oai := brokertest.Cred(c, "OPENAI_API_KEY")
	h := http.Header{"X-Api-Key": {ant.Placeholder}, "Authorization": {"Bearer " + oai.Placeholder}, "Accept": {"*/*"}}
	d := Rewrite(c, h, "/", brokertest.AnthropicDest)
	if d.Refused {
		t.Fatalf("refused: %s", d.Reason)
	}
	if h.Get("X-Api-Key") != ant.Value || h.Get("Authorization") != "Bearer "+oai.Value || h.Get("Accept") != "*/*" {
		t.Errorf("header after rewrite: x-api-key ok %v, authorization ok %v", h.Get("X-Api-Key") == ant.Value, h.Get("Authorization") == "Bearer "+oai.Value)
	}
	if want := []string{ant.Name, oai.Name}; !slices.Equal(d.Credentials, want) {
		t.Errorf("credentials %v, want %v", d.Credentials, want)
	}
}

func TestRewriteRefuses(t *testing.T) {
	c := brokertest.Config(t)
	ant, oai, git := brokertest.Cred(c, "ANTHROPIC_API_KEY"), brokertest.Cred(c, "OPENAI_API_KEY"), brokertest.Cred(c, "GIT_TOKEN")
	tests := []struct {
		name   string
		header http.Header
		target string
		dest   broker.Destination
		names  []string
		reason string
	}{
		{"wrong destination", http.Header{"X-Api-Key": {ant.Placeholder}}, "/", brokertest.OtherDest, []string{ant.Name},
			"placeholder of ANTHROPIC_API_KEY sent to other.example:443, which is not one of its destinations (api.anthropic.example:443, api.anthropic.example:8443)"},
		{"wrong port", http.Header{"Authorization": {"Bearer " + oai.Placeholder}}, "/", broker.Destination{Host: brokertest.OpenAIDest.Host, Port: 8443}, []string{oai.Name},
			"placeholder of OPENAI_API_KEY sent to api.openai.example:8443, which is not one of its destinations (api.openai.example:443)"},
		{"wrong header", http.Header{"X-Goog-Api-Key": {ant.Placeholder}}, "/", brokertest.AnthropicDest, []string{ant.Name},
			"placeholder of ANTHROPIC_API_KEY in header x-goog-api-key; it belongs only in header x-api-key"},
		{"header credential as bearer", http.Header{"Authorization": {"Bearer " + ant.Placeholder}}, "/", brokertest.AnthropicDest, []string{ant.Name},
			"placeholder of ANTHROPIC_API_KEY in header authorization; it belongs only in header x-api-key"},
		{"bearer in basic", http.Header{"Authorization": {basic("u", oai.Placeholder)}}, "/", brokertest.OpenAIDest, []string{oai.Name},
			`placeholder of OPENAI_API_KEY in header authorization is not of the form "Bearer <placeholder>"`},
		{"bearer two spaces", http.Header{"Authorization": {"Bearer  " + oai.Placeholder}}, "/", brokertest.OpenAIDest, []string{oai.Name},
			`placeholder of OPENAI_API_KEY in header authorization is not of the form "Bearer <placeholder>"`},
		{"header with suffix", http.Header{"X-Api-Key": {ant.Placeholder + "x"}}, "/", brokertest.AnthropicDest, []string{ant.Name},
			"placeholder of ANTHROPIC_API_KEY in header x-api-key is not of the form <placeholder> alone"},
		{"in path", nil, "/v1/" + ant.Placeholder, brokertest.AnthropicDest, []string{ant.Name},
			"placeholder of ANTHROPIC_API_KEY in the request target; it belongs only in header x-api-key"},
		{"in query", nil, "/v1?key=" + url.QueryEscape(ant.Placeholder), brokertest.AnthropicDest, []string{ant.Name},
			"placeholder of ANTHROPIC_API_KEY in the request target; it belongs only in header x-api-key"},
		{"percent-encoded in query", nil, "/v1?key=" + percentAll(ant.Placeholder), brokertest.AnthropicDest, []string{ant.Name},
			"placeholder of ANTHROPIC_API_KEY in the request target; it belongs only in header x-api-key"},
		{"doubly encoded", nil, "/v1?key=" + strings.ReplaceAll(percentAll(ant.Placeholder), "%", "%25"), brokertest.AnthropicDest, []string{ant.Name},
			"placeholder of ANTHROPIC_API_KEY in the request target; it belongs only in header x-api-key"},
		{"query to wrong destination", nil, "/?k=" + oai.Placeholder, brokertest.AnthropicDest, []string{oai.Name},
			"placeholder of OPENAI_API_KEY sent to api.anthropic.example:443, which is not one of its destinations (api.openai.example:443)"},
		{"basic placeholder as user", http.Header{"Authorization": {basic(git.Placeholder, "x")}}, "/", brokertest.GitDest, []string{git.Name},
			`placeholder of GIT_TOKEN in header authorization is not of the form "Basic base64(<user>:<placeholder>)"`},
		{"basic placeholder as user and password", http.Header{"Authorization": {basic(git.Placeholder, git.Placeholder)}}, "/", brokertest.GitDest, []string{git.Name},
			`placeholder of GIT_TOKEN in header authorization is not of the form "Basic base64(<user>:<placeholder>)"`},
		{"basic raw", http.Header{"Authorization": {"Basic " + git.Placeholder}}, "/", brokertest.GitDest, []string{git.Name},
			`placeholder of GIT_TOKEN in header authorization is not of the form "Basic base64(<user>:<placeholder>)"`},
		{"basic in proxy-authorization", http.Header{"Proxy-Authorization": {basic("u", git.Placeholder)}}, "/", brokertest.GitDest, []string{git.Name},
			"placeholder of GIT_TOKEN in header proxy-authorization; it belongs only in header authorization"},
		{"two authorization values", http.Header{"Authorization": {"Bearer " + oai.Placeholder, "Bearer " + oai.Placeholder}}, "/", brokertest.OpenAIDest, []string{oai.Name},
			"header authorization is given 2 times with a placeholder of OPENAI_API_KEY; it must be given once"},
		{"authorization under two spellings", http.Header{"Authorization": {"Bearer " + oai.Placeholder}, "authorization": {"Bearer x"}}, "/", brokertest.OpenAIDest, []string{oai.Name},
			"header authorization is given 2 times with a placeholder of OPENAI_API_KEY; it must be given once"},
		{"placeholder in cookie", http.Header{"Cookie": {"k=" + oai.Placeholder}}, "/", brokertest.OpenAIDest, []string{oai.Name},
			"placeholder of OPENAI_API_KEY in header cookie; it belongs only in header authorization"},
		{"placeholder in header name", http.Header{"X-" + oai.Placeholder: {"1"}}, "/", brokertest.OpenAIDest, []string{oai.Name},
			"placeholder of OPENAI_API_KEY in a header name"},
		{"two credentials one wrong", http.Header{"Authorization": {"Bearer " + oai.Placeholder}, "X-Api-Key": {ant.Placeholder}}, "/", brokertest.OpenAIDest, []string{ant.Name},
			"placeholder of ANTHROPIC_API_KEY sent to api.openai.example:443, which is not one of its destinations (api.anthropic.example:443, api.anthropic.example:8443)"},
		{"control byte", http.Header{"X-Trace": {"a\r\nX-Api-Key: b"}}, "/", brokertest.OpenAIDest, nil,
			`header "x-trace" holds a CR, LF or NUL byte`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := tt.header.Clone()
			if h == nil {
				h = http.Header{}
			}
			d := Rewrite(c, h, tt.target, tt.dest)
			if !d.Refused {
				t.Fatalf("not refused; header %v", h)
			}
			if d.Reason != tt.reason {
				t.Errorf("reason:\n%s\nwant:\n%s", d.Reason, tt.reason)
			}
			if !slices.Equal(d.Credentials, tt.names) {
				t.Errorf("credentials %v, want %v", d.Credentials, tt.names)
			}
			for _, cr := range c.Credentials {
				for _, vs := range h {
					if slices.ContainsFunc(vs, func(v string) bool { return strings.Contains(v, cr.Value) }) {
						t.Errorf("refused request carries the value of %s", cr.Name)
					}
				}
			}
			for k, vs := range h {
				if slices.ContainsFunc(vs, hasControl) {
					t.Errorf("header %q still holds a control byte", k)
				}
			}
		})
	}
}

// percentAll percent-encodes every byte of s.
func percentAll(s string) string {
	var b strings.Builder
	for i := range len(s) {
		b.WriteString("%" + strings.ToUpper(string("0123456789abcdef"[s[i]>>4])+string("0123456789abcdef"[s[i]&15])))
	}
	return b.String()
}
