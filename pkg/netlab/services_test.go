package netlab

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func serve(t *testing.T, s *services, method, path, body string, header http.Header) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	for k, v := range header {
		r.Header[k] = v
	}
	w := httptest.NewRecorder()
	s.ServeHTTP(w, r)
	return w
}

func TestCheck(t *testing.T) {
	const wrong = "sk-placeholder-0123456789"
	basic := func(pass string) string {
		r := &http.Request{Header: http.Header{}}
		r.SetBasicAuth("user", pass)
		return r.Header.Get("Authorization")
	}
	sum := sha256.Sum256([]byte(wrong))
	wrongHash := "sha256:" + hex.EncodeToString(sum[:])
	for _, tc := range []struct {
		name   string
		header http.Header
		code   int
		body   string
	}{
		{"x-api-key", http.Header{"X-Api-Key": {BrokerSecret}}, 200, "real credential received in x-api-key by 198.19.0.11:8443\n"},
		{"bearer", http.Header{"Authorization": {"Bearer " + BrokerSecret}}, 200, "real credential received in authorization by 198.19.0.11:8443\n"},
		{"basic", http.Header{"Authorization": {basic(BrokerSecret)}}, 200, "real credential received in authorization by 198.19.0.11:8443\n"},
		{"goog", http.Header{"X-Goog-Api-Key": {BrokerSecret}}, 200, "real credential received in x-goog-api-key by 198.19.0.11:8443\n"},
		{"none", nil, 401, "no credential headers\n"},
		{"wrong key", http.Header{"X-Api-Key": {wrong}}, 401, "no real credential: x-api-key=" + wrongHash + "\n"},
		{"wrong basic and goog", http.Header{"Authorization": {basic(wrong)}, "X-Goog-Api-Key": {wrong}}, 401,
			"no real credential: authorization=" + wrongHash + " x-goog-api-key=" + wrongHash + "\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newServices("198.19.0.11:8443", "", "")
			for _, method := range []string{"GET", "POST"} {
				w := serve(t, s, method, "/check", "", tc.header)
				if w.Code != tc.code || w.Body.String() != tc.body {
					t.Errorf("%s: %d %q, want %d %q", method, w.Code, w.Body, tc.code, tc.body)
				}
				if strings.Contains(w.Body.String(), wrong) {
					t.Errorf("%s: the answer holds the credential sent", method)
				}
			}
		})
	}
}

func TestEchoSecret(t *testing.T) {
	s := newServices("h", "", "")
	w := serve(t, s, "GET", "/echo-secret", "", http.Header{"Authorization": {"Bearer " + BrokerSecret}})
	if w.Code != 200 || w.Body.String() != BrokerSecret+"\n" || w.Header().Get("X-Echo") != BrokerSecret {
		t.Errorf("with the secret: %d %q X-Echo %q", w.Code, w.Body, w.Header().Get("X-Echo"))
	}
	w = serve(t, s, "GET", "/echo-secret", "", http.Header{"Authorization": {"Bearer nope"}})
	if w.Code != 401 || strings.Contains(w.Body.String(), BrokerSecret) || w.Header().Get("X-Echo") != "" {
		t.Errorf("without: %d %q", w.Code, w.Body)
	}
}

func TestGitNeedsTheSecret(t *testing.T) {
	s := newServices("h", "git", t.TempDir())
	w := serve(t, s, "GET", "/repo.git/info/refs?service=git-upload-pack", "", nil)
	if w.Code != 401 || w.Header().Get("WWW-Authenticate") != `Basic realm="lab"` {
		t.Errorf("%d %q", w.Code, w.Header())
	}
}

// sseEvents parses a server-sent event stream into (event, data) pairs,
// checking that each data's type is its event's name.
func sseEvents(t *testing.T, body string) (names []string, data []map[string]any) {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(body))
	var name string
	for sc.Scan() {
		line := sc.Text()
		if n, ok := strings.CutPrefix(line, "event: "); ok {
			name = n
		} else if d, ok := strings.CutPrefix(line, "data: "); ok {
			var m map[string]any
			if err := json.Unmarshal([]byte(d), &m); err != nil {
				t.Fatalf("data of %s: %v", name, err)
			}
			if m["type"] != name {
				t.Fatalf("event %s has data of type %v", name, m["type"])
			}
			names = append(names, name)
			data = append(data, m)
		}
	}
	return names, data
}

const (
	messagesFirst  = `{"model":"m","max_tokens":9,"tools":[{"name":"Bash"}],"messages":[{"role":"user","content":"run the echo"}]}`
	messagesResult = `{"model":"m","tools":[{"name":"Bash"}],"messages":[{"role":"user","content":"run the echo"},` +
		`{"role":"assistant","content":[{"type":"tool_use","id":"toolu_double","name":"Bash","input":{}}]},` +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_double","content":"tool-42"}]}]}`
)

func TestMessagesDouble(t *testing.T) {
	s := newServices("h", "", "")
	key := http.Header{"X-Api-Key": {BrokerSecret}}

	w := serve(t, s, "POST", "/v1/messages", messagesFirst, http.Header{"X-Api-Key": {"sk-ant-placeholder"}})
	if w.Code != 401 || w.Body.String() != `{"error":{"message":"invalid x-api-key","type":"authentication_error"},"type":"error"}`+"\n" {
		t.Errorf("wrong key: %d %s", w.Code, w.Body)
	}

	w = serve(t, s, "POST", "/v1/messages", messagesFirst, key)
	var msg struct {
		Content []struct {
			Type  string            `json:"type"`
			Name  string            `json:"name"`
			Input map[string]string `json:"input"`
			Text  string            `json:"text"`
		} `json:"content"`
		StopReason string `json:"stop_reason"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &msg); err != nil || w.Code != 200 {
		t.Fatalf("%d %s: %v", w.Code, w.Body, err)
	}
	if len(msg.Content) != 1 || msg.Content[0].Type != "tool_use" || msg.Content[0].Input["command"] != "echo tool-$((6*7))" || msg.StopReason != "tool_use" {
		t.Errorf("non-streamed tool use: %s", w.Body)
	}

	w = serve(t, s, "POST", "/v1/messages", strings.Replace(messagesResult, `{"model"`, `{"stream":true,"model"`, 1), key)
	if ct := w.Header().Get("Content-Type"); w.Code != 200 || ct != "text/event-stream" {
		t.Fatalf("streamed: %d %s", w.Code, ct)
	}
	names, data := sseEvents(t, w.Body.String())
	want := []string{"message_start", "content_block_start", "content_block_delta", "content_block_stop", "message_delta", "message_stop"}
	if strings.Join(names, " ") != strings.Join(want, " ") {
		t.Fatalf("events %v, want %v", names, want)
	}
	if d := data[2]["delta"].(map[string]any); d["type"] != "text_delta" || d["text"] != `tool said: "tool-42"` {
		t.Errorf("delta %v", d)
	}
	if d := data[4]["delta"].(map[string]any); d["stop_reason"] != "end_turn" {
		t.Errorf("message_delta %v", d)
	}

	w = serve(t, s, "POST", "/v1/messages", `{"stream":true,"tools":[{"name":"Bash"}],"messages":[{"role":"user","content":"x"}]}`, key)
	_, data = sseEvents(t, w.Body.String())
	if d := data[2]["delta"].(map[string]any); d["type"] != "input_json_delta" || !strings.Contains(d["partial_json"].(string), "echo tool-$((6*7))") {
		t.Errorf("streamed tool use delta %v", d)
	}

	w = serve(t, s, "POST", "/v1/messages/count_tokens", messagesFirst, key)
	if w.Code != 200 || w.Body.String() != `{"input_tokens":1}`+"\n" {
		t.Errorf("count_tokens: %d %s", w.Code, w.Body)
	}
	if w := serve(t, s, "GET", "/v2/other", "", key); w.Code != 404 {
		t.Errorf("unknown path: %d", w.Code)
	}
	w = serve(t, s, "GET", "/stats", "", nil)
	if w.Body.String() != `{"messages":3}`+"\n" {
		t.Errorf("stats %s, want 3 messages", w.Body)
	}
}

func TestResponsesDouble(t *testing.T) {
	s := newServices("h", "", "")
	if w := serve(t, s, "POST", "/v1/responses", "{}", http.Header{"Authorization": {"Bearer sk-placeholder"}}); w.Code != 401 {
		t.Errorf("wrong key: %d", w.Code)
	}
	w := serve(t, s, "POST", "/v1/responses", `{"model":"m","stream":true}`, http.Header{"Authorization": {"Bearer " + BrokerSecret}})
	names, data := sseEvents(t, w.Body.String())
	want := []string{"response.created", "response.output_item.added", "response.output_text.delta", "response.output_item.done", "response.completed"}
	if w.Code != 200 || strings.Join(names, " ") != strings.Join(want, " ") {
		t.Fatalf("%d events %v, want %v", w.Code, names, want)
	}
	if data[2]["delta"] != "pong from the double" {
		t.Errorf("delta %v", data[2])
	}
	resp := data[4]["response"].(map[string]any)
	out := resp["output"].([]any)[0].(map[string]any)
	text := out["content"].([]any)[0].(map[string]any)["text"]
	usage := resp["usage"].(map[string]any)
	if resp["object"] != "response" || resp["status"] != "completed" || out["role"] != "assistant" || text != "pong from the double" || usage["total_tokens"] != 2.0 {
		t.Errorf("completed response %v", resp)
	}
}

func TestBytes(t *testing.T) {
	s := newServices("h", "", "")
	w := serve(t, s, "GET", "/bytes/200000", "", nil)
	if w.Code != 200 || w.Body.Len() != 200000 || strings.Trim(w.Body.String(), "x") != "" {
		t.Errorf("/bytes/200000: %d, %d bytes", w.Code, w.Body.Len())
	}
	for _, bad := range []string{"/bytes/-1", "/bytes/x", "/bytes/1073741825"} {
		if w := serve(t, s, "GET", bad, "", nil); w.Code != 400 {
			t.Errorf("%s: %d", bad, w.Code)
		}
	}
}
