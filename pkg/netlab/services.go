package netlab

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
)

// BrokerSecret is the one credential the test internet's HTTPS services
// accept: the "real" value a credential broker substitutes for a
// placeholder. A test puts it in the host's environment where the broker
// reads it; the sandbox only ever holds the placeholder.
const BrokerSecret = "lzt-real-Q7mX2pLk9RvT4wZc8NbH3sJf6YdG1aE5uK0oWiVe"

// TLSPort is the port of the test internet's HTTPS services on APIHost
// and OtherHost. A client names the host with DynamicName (the services
// hold certificates only for names) and trusts TestCAPEM.
const TLSPort = 8443

// Hosts of the HTTPS services (TLSPort), reached by name as
// 198-19-0-11.ttl60.dyn.lab.test and 198-19-0-12.ttl60.dyn.lab.test
// (DynamicName). Both serve the same paths; APIHost stands for a
// credential's destination and OtherHost for any other host.
var (
	APIHost   = InternetNamed[1]
	OtherHost = InternetNamed[2]
)

// Anthropic and OpenAI double replies, fixed so tests can look for them.
const (
	doubleToolCommand = "echo tool-$((6*7))"
	doublePong        = "pong from the double"
)

// services is the HTTPS service of one host of the test internet.
type services struct {
	host     string       // host:port, named in /check answers
	git      http.Handler // nil without a git root
	messages atomic.Int64 // /v1/messages requests with the real key
}

// newServices returns the handler of the HTTPS service on host, serving
// the repositories under gitRoot with the git binary git (none when
// gitRoot is empty):
//
//   - GET|POST /check: which header carried BrokerSecret, or hashes of
//     the credentials that were not it;
//   - GET /echo-secret: BrokerSecret in the body and in X-Echo, for a
//     request that carried it;
//   - GET /stats: {"messages": N}, the /v1/messages requests so far that
//     carried BrokerSecret;
//   - POST /v1/messages (and /v1/messages/count_tokens, other POSTs
//     under /v1/): an Anthropic Messages API double for Claude Code;
//   - POST /v1/responses: an OpenAI Responses API double for Codex;
//   - /repo.git/...: git smart HTTP (clone and fetch), behind Basic
//     authentication with BrokerSecret as the password.
//
// No answer ever holds a credential value other than BrokerSecret.
func newServices(host, git, gitRoot string) *services {
	s := &services{host: host}
	if gitRoot != "" {
		s.git = &cgi.Handler{
			Path: git,
			Args: []string{"http-backend"},
			Root: "/",
			Dir:  gitRoot,
			Env: []string{
				"GIT_PROJECT_ROOT=" + gitRoot,
				"GIT_HTTP_EXPORT_ALL=1",
				"HOME=" + gitRoot,
				"GIT_CONFIG_NOSYSTEM=1",
			},
		}
	}
	return s
}

func (s *services) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch p := r.URL.Path; {
	case p == "/check" && (r.Method == http.MethodGet || r.Method == http.MethodPost):
		s.check(w, r)
	case p == "/echo-secret" && r.Method == http.MethodGet:
		if _, ok := realCredential(r); !ok {
			http.Error(w, "no real credential", http.StatusUnauthorized)
			return
		}
		w.Header().Set("X-Echo", BrokerSecret)
		io.WriteString(w, BrokerSecret+"\n")
	case strings.HasPrefix(p, "/bytes/") && r.Method == http.MethodGet:
		serveBytes(w, strings.TrimPrefix(p, "/bytes/"))
	case p == "/stats" && r.Method == http.MethodGet:
		writeJSON(w, http.StatusOK, map[string]int64{"messages": s.messages.Load()})
	case p == "/v1/responses" && r.Method == http.MethodPost:
		responsesDouble(w, r)
	case strings.HasPrefix(p, "/v1/") && r.Method == http.MethodPost:
		s.anthropic(w, r)
	case strings.HasPrefix(p, "/repo.git/") && s.git != nil:
		if _, pass, ok := r.BasicAuth(); !ok || !isSecret(pass) {
			w.Header().Set("WWW-Authenticate", `Basic realm="lab"`)
			http.Error(w, "no real credential", http.StatusUnauthorized)
			return
		}
		s.git.ServeHTTP(w, r)
	default:
		http.NotFound(w, r)
	}
}

// credential is one credential-like header value of a request.
type credential struct{ header, value string }

// credentials returns the credentials a request carries: x-api-key,
// the token of Authorization: Bearer, the password of Authorization:
// Basic, and x-goog-api-key.
func credentials(r *http.Request) []credential {
	var out []credential
	for _, v := range r.Header.Values("X-Api-Key") {
		out = append(out, credential{"x-api-key", v})
	}
	for _, v := range r.Header.Values("Authorization") {
		scheme, rest, _ := strings.Cut(v, " ")
		switch strings.ToLower(scheme) {
		case "bearer":
			out = append(out, credential{"authorization", strings.TrimSpace(rest)})
		case "basic":
			if _, pass, ok := (&http.Request{Header: http.Header{"Authorization": {v}}}).BasicAuth(); ok {
				out = append(out, credential{"authorization", pass})
				continue
			}
			out = append(out, credential{"authorization", v})
		default:
			out = append(out, credential{"authorization", v})
		}
	}
	for _, v := range r.Header.Values("X-Goog-Api-Key") {
		out = append(out, credential{"x-goog-api-key", v})
	}
	return out
}

func isSecret(v string) bool {
	return subtle.ConstantTimeCompare([]byte(v), []byte(BrokerSecret)) == 1
}

// realCredential returns the header that carried BrokerSecret.
func realCredential(r *http.Request) (string, bool) {
	for _, c := range credentials(r) {
		if isSecret(c.value) {
			return c.header, true
		}
	}
	return "", false
}

func (s *services) check(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if h, ok := realCredential(r); ok {
		fmt.Fprintf(w, "real credential received in %s by %s\n", h, s.host)
		return
	}
	cs := credentials(r)
	w.WriteHeader(http.StatusUnauthorized)
	if len(cs) == 0 {
		io.WriteString(w, "no credential headers\n")
		return
	}
	seen := make([]string, len(cs))
	for i, c := range cs {
		sum := sha256.Sum256([]byte(c.value))
		seen[i] = c.header + "=sha256:" + hex.EncodeToString(sum[:])
	}
	io.WriteString(w, "no real credential: "+strings.Join(seen, " ")+"\n")
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

// sse writes server-sent events, flushing after each.
type sse struct {
	w http.ResponseWriter
	f http.Flusher
}

func startSSE(w http.ResponseWriter) *sse {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	f, _ := w.(http.Flusher)
	return &sse{w: w, f: f}
}

// event writes one event whose data is fields plus "type": name.
func (e *sse) event(name string, fields map[string]any) {
	data := map[string]any{"type": name}
	for k, v := range fields {
		data[k] = v
	}
	b, _ := json.Marshal(data)
	fmt.Fprintf(e.w, "event: %s\ndata: %s\n\n", name, b)
	if e.f != nil {
		e.f.Flush()
	}
}

// anthropicRequest is what the Messages API double reads of a request.
type anthropicRequest struct {
	Model    string `json:"model"`
	Stream   bool   `json:"stream"`
	Messages []struct {
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Tools []struct {
		Name string `json:"name"`
	} `json:"tools"`
}

// anthropic answers the Messages API as the end-to-end suite's agent
// double does: a request offering the Bash tool whose last message holds
// no tool result gets a tool_use of `echo tool-$((6*7))`; any other
// request gets the text `tool said: <the tool result's content as JSON>`
// (or `tool said: nothing`).
func (s *services) anthropic(w http.ResponseWriter, r *http.Request) {
	if !isSecret(r.Header.Get("X-Api-Key")) {
		writeJSON(w, http.StatusUnauthorized, map[string]any{
			"type":  "error",
			"error": map[string]string{"type": "authentication_error", "message": "invalid x-api-key"},
		})
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	if err != nil {
		return
	}
	switch r.URL.Path {
	case "/v1/messages":
	case "/v1/messages/count_tokens":
		writeJSON(w, http.StatusOK, map[string]int{"input_tokens": 1})
		return
	default:
		writeJSON(w, http.StatusOK, map[string]any{})
		return
	}
	s.messages.Add(1)
	var req anthropicRequest
	json.Unmarshal(body, &req)
	block := anthropicReply(req)
	stop := "end_turn"
	if block["type"] == "tool_use" {
		stop = "tool_use"
	}
	model := req.Model
	if model == "" {
		model = "double"
	}
	msg := func(content []any, stop any) map[string]any {
		return map[string]any{
			"id": "msg_double", "type": "message", "role": "assistant", "model": model,
			"content": content, "stop_reason": stop, "stop_sequence": nil,
			"usage": map[string]int{"input_tokens": 1, "output_tokens": 1, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0},
		}
	}
	if !req.Stream {
		writeJSON(w, http.StatusOK, msg([]any{block}, stop))
		return
	}
	e := startSSE(w)
	e.event("message_start", map[string]any{"message": msg([]any{}, nil)})
	if block["type"] == "text" {
		e.event("content_block_start", map[string]any{"index": 0, "content_block": map[string]any{"type": "text", "text": ""}})
		e.event("content_block_delta", map[string]any{"index": 0, "delta": map[string]any{"type": "text_delta", "text": block["text"]}})
	} else {
		input, _ := json.Marshal(block["input"])
		start := map[string]any{"type": "tool_use", "id": block["id"], "name": block["name"], "input": map[string]any{}}
		e.event("content_block_start", map[string]any{"index": 0, "content_block": start})
		e.event("content_block_delta", map[string]any{"index": 0, "delta": map[string]any{"type": "input_json_delta", "partial_json": string(input)}})
	}
	e.event("content_block_stop", map[string]any{"index": 0})
	e.event("message_delta", map[string]any{"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]int{"output_tokens": 1}})
	e.event("message_stop", nil)
}

// anthropicReply is the content block the Messages API double answers.
func anthropicReply(req anthropicRequest) map[string]any {
	var result json.RawMessage
	if n := len(req.Messages); n > 0 {
		var parts []struct {
			Type    string          `json:"type"`
			Content json.RawMessage `json:"content"`
		}
		if json.Unmarshal(req.Messages[n-1].Content, &parts) == nil {
			for _, p := range parts {
				if p.Type == "tool_result" {
					result = p.Content
					if result == nil {
						result = json.RawMessage("null")
					}
					break
				}
			}
		}
	}
	bash := false
	for _, t := range req.Tools {
		bash = bash || t.Name == "Bash"
	}
	if bash && result == nil {
		return map[string]any{
			"type": "tool_use", "id": "toolu_double", "name": "Bash",
			"input": map[string]any{"command": doubleToolCommand, "description": "print a number"},
		}
	}
	said := "nothing"
	if result != nil {
		var b bytes.Buffer
		if json.Compact(&b, result) == nil {
			said = b.String()
		}
	}
	return map[string]any{"type": "text", "text": "tool said: " + said}
}

// responsesDouble answers the OpenAI Responses API for Codex: one
// streamed assistant message, doublePong.
func responsesDouble(w http.ResponseWriter, r *http.Request) {
	auth := r.Header.Get("Authorization")
	token, ok := strings.CutPrefix(auth, "Bearer ")
	if !ok || !isSecret(token) {
		writeJSON(w, http.StatusUnauthorized, map[string]any{"error": map[string]any{
			"message": "Incorrect API key provided.", "type": "invalid_request_error", "param": nil, "code": "invalid_api_key",
		}})
		return
	}
	io.Copy(io.Discard, io.LimitReader(r.Body, 64<<20))
	item := func(status string, text bool) map[string]any {
		content := []any{}
		if text {
			content = []any{map[string]any{"type": "output_text", "text": doublePong, "annotations": []any{}}}
		}
		return map[string]any{"id": "msg_double", "type": "message", "status": status, "role": "assistant", "content": content}
	}
	response := func(status string, output []any, usage any) map[string]any {
		return map[string]any{
			"id": "resp_double", "object": "response", "created_at": 946684800, "status": status,
			"model": "double", "output": output, "usage": usage,
		}
	}
	e := startSSE(w)
	e.event("response.created", map[string]any{"sequence_number": 0, "response": response("in_progress", []any{}, nil)})
	e.event("response.output_item.added", map[string]any{"sequence_number": 1, "output_index": 0, "item": item("in_progress", false)})
	e.event("response.output_text.delta", map[string]any{"sequence_number": 2, "item_id": "msg_double", "output_index": 0, "content_index": 0, "delta": doublePong})
	e.event("response.output_item.done", map[string]any{"sequence_number": 3, "output_index": 0, "item": item("completed", true)})
	usage := map[string]any{
		"input_tokens": 1, "input_tokens_details": map[string]int{"cached_tokens": 0},
		"output_tokens": 1, "output_tokens_details": map[string]int{"reasoning_tokens": 0},
		"total_tokens": 2,
	}
	e.event("response.completed", map[string]any{"sequence_number": 4, "response": response("completed", []any{item("completed", true)}, usage)})
}

// gitReadme is the README of the test internet's repository.
const gitReadme = "hello from the test internet's git\n"

// makeGitRoot finds git on PATH and creates a temporary directory
// holding the bare repository repo.git with one commit of README
// (gitReadme). Every field of the commit is fixed, so its ID is the same
// in every test internet. The caller removes the directory.
func makeGitRoot() (git, dir string, err error) {
	git, err = exec.LookPath("git")
	if err != nil {
		return "", "", fmt.Errorf("the test internet's git service needs git on PATH: %w", err)
	}
	dir, err = os.MkdirTemp("", "lazaret-testinternet-git-")
	if err != nil {
		return "", "", fmt.Errorf("git root: %w", err)
	}
	defer func() {
		if err != nil {
			os.RemoveAll(dir)
		}
	}()
	repo := filepath.Join(dir, "repo.git")
	run := func(stdin string, args ...string) (string, error) {
		cmd := exec.Command(git, args...)
		cmd.Dir = dir
		cmd.Stdin = strings.NewReader(stdin)
		cmd.Env = []string{
			"HOME=" + dir, "GIT_CONFIG_NOSYSTEM=1", "GIT_DIR=" + repo,
			"GIT_AUTHOR_NAME=test internet", "GIT_AUTHOR_EMAIL=git@lab.test", "GIT_AUTHOR_DATE=946684800 +0000",
			"GIT_COMMITTER_NAME=test internet", "GIT_COMMITTER_EMAIL=git@lab.test", "GIT_COMMITTER_DATE=946684800 +0000",
		}
		out, err := cmd.Output()
		if err != nil {
			var stderr []byte
			if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
				stderr = ee.Stderr
			}
			return "", fmt.Errorf("git %s in %q: %w: %s", args[0], repo, err, bytes.TrimSpace(stderr))
		}
		return strings.TrimSpace(string(out)), nil
	}
	if _, err := run("", "init", "-q", "--bare", repo); err != nil {
		return "", "", err
	}
	blob, err := run(gitReadme, "hash-object", "-w", "--stdin")
	if err != nil {
		return "", "", err
	}
	tree, err := run("100644 blob "+blob+"\tREADME\n", "mktree")
	if err != nil {
		return "", "", err
	}
	commit, err := run("", "commit-tree", tree, "-m", "the test internet's repository")
	if err != nil {
		return "", "", err
	}
	if _, err := run("", "update-ref", "refs/heads/main", commit); err != nil {
		return "", "", err
	}
	if _, err := run("", "symbolic-ref", "HEAD", "refs/heads/main"); err != nil {
		return "", "", err
	}
	return git, dir, nil
}

// MaxBytes bounds GET /bytes/N.
const MaxBytes = 1 << 30

// serveBytes answers GET /bytes/N with N bytes ('x'), for throughput
// measurements; it needs no credential.
func serveBytes(w http.ResponseWriter, n string) {
	size, err := strconv.ParseInt(n, 10, 64)
	if err != nil || size < 0 || size > MaxBytes {
		http.Error(w, "want /bytes/N with N from 0 to 1073741824", http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.FormatInt(size, 10))
	chunk := bytes.Repeat([]byte{'x'}, 64<<10)
	for size > 0 {
		m := min(size, int64(len(chunk)))
		if _, err := w.Write(chunk[:m]); err != nil {
			return
		}
		size -= m
	}
}
