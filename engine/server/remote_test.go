package server

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/spoolhq/spool/engine/remote"
	"github.com/spoolhq/spool/engine/remote/standin"
	"github.com/spoolhq/spool/engine/status"
)

// remoteFront is a Spool in front of a remote engine, behind httptest.
type remoteFront struct {
	*testServer
	rc *remote.Client
}

const (
	frontKey  = "front-key-0123456789"
	remoteKey = "remote-key-ABCDEFGHIJ"
)

func newRemoteFront(t *testing.T, url string, cfg Config, rcfg remote.Config) *remoteFront {
	t.Helper()
	rcfg.URL = url
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	rc, err := remote.New(rcfg)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := NewRemote(cfg, rc)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		hs.CloseClientConnections()
		hs.Close()
	})
	return &remoteFront{testServer: &testServer{Server: hs, srv: srv, key: cfg.APIKey}, rc: rc}
}

// newStandinFront is a front with the remote key before a vLLM stand-in
// that requires it.
func newStandinFront(t *testing.T, o standin.Options, cfg Config, rcfg remote.Config) (*remoteFront, *standin.Server) {
	t.Helper()
	o.Key = remoteKey
	vs := standin.New(o)
	hs := httptest.NewServer(vs)
	t.Cleanup(func() {
		hs.CloseClientConnections()
		hs.Close()
	})
	if cfg.APIKey == "" {
		cfg.APIKey = frontKey
	}
	rcfg.Key = remoteKey
	return newRemoteFront(t, hs.URL+"/v1", cfg, rcfg), vs
}

// raw posts body and returns the status, headers and the whole body.
func (ts *testServer) raw(t *testing.T, ctx context.Context, path string, body any) (int, http.Header, string) {
	t.Helper()
	resp := ts.post(t, ctx, path, body)
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(data)
}

func userChat(text string, extra map[string]any) map[string]any {
	b := map[string]any{"model": "spool", "messages": []any{map[string]any{"role": "user", "content": text}}, "max_tokens": 50}
	for k, v := range extra {
		b[k] = v
	}
	return b
}

func TestRemoteModels(t *testing.T) {
	ts, _ := newStandinFront(t, standin.Options{}, Config{}, remote.Config{})
	status, list, _ := ts.do(t, "GET", "/v1/models", nil)
	if status != 200 || jpath(list, "data", 0, "id") != "glm-5.2-fp8" || jpath(list, "data", 0, "max_model_len") != 131072.0 ||
		jpath(list, "data", 0, "context_length") != 131072.0 || jpath(list, "data", 0, "owned_by") != "vllm" {
		t.Fatalf("%d %v", status, list)
	}
	if status, m, _ := ts.do(t, "GET", "/v1/models/glm-5.2-fp8", nil); status != 200 || m["root"] != "zai-org/GLM-5.2-FP8" {
		t.Fatalf("%d %v", status, m)
	}
	if status, m, _ := ts.do(t, "GET", "/v1/models/gpt-9", nil); status != 404 || jpath(m, "error", "code") != "model_not_found" {
		t.Fatalf("%d %v", status, m)
	}
	// An Anthropic client gets Anthropic's shape.
	av := []string{"anthropic-version", "2023-06-01"}
	status, list, _ = ts.do(t, "GET", "/v1/models", nil, av...)
	if status != 200 || jpath(list, "data", 0, "id") != "glm-5.2-fp8" || jpath(list, "data", 0, "type") != "model" ||
		jpath(list, "data", 0, "max_input_tokens") != 131072.0 || list["has_more"] != false || list["first_id"] != "glm-5.2-fp8" {
		t.Fatalf("anthropic list: %d %v", status, list)
	}
	if status, m, _ := ts.do(t, "GET", "/v1/models/glm-5.2-fp8", nil, av...); status != 200 || m["display_name"] != "glm-5.2-fp8" || m["created_at"] == nil {
		t.Fatalf("anthropic model: %d %v", status, m)
	}
	if status, m, _ := ts.do(t, "GET", "/v1/models/gpt-9", nil, av...); status != 404 || jpath(m, "error", "type") != "not_found_error" {
		t.Fatalf("anthropic unknown model: %d %v", status, m)
	}
}

func TestRemoteChatPassThrough(t *testing.T) {
	ts, vs := newStandinFront(t, standin.Options{}, Config{}, remote.Config{})
	status, resp, _ := ts.do(t, "POST", "/v1/chat/completions", userChat("hello there [[think]]", nil))
	if status != 200 || jpath(resp, "choices", 0, "message", "content") != "You said: hello there" ||
		jpath(resp, "choices", 0, "message", "reasoning") != "Let me think about that." || jpath(resp, "model") != "glm-5.2-fp8" {
		t.Fatalf("%d %v", status, resp)
	}
	got, _ := vs.Last("/v1/chat/completions")
	if got.Body["model"] != "glm-5.2-fp8" || got.Header.Get("Authorization") != "Bearer "+remoteKey || got.Body["max_tokens"] != 50.0 {
		t.Fatalf("the remote got %v %v", got.Body, got.Header)
	}
	for k, v := range got.Header {
		if strings.Contains(strings.Join(v, " "), frontKey) {
			t.Fatalf("the client's key went to the remote in %s", k)
		}
	}
	if s := ts.rc.Status(); s.Last == nil || s.Last.CompletionTokens != 9 || s.Last.PromptTokens == 0 || s.Last.Outcome != "ok" {
		t.Fatalf("figures %+v", s.Last)
	}
	// A model the remote does not serve is refused with the ones it does.
	status, resp, _ = ts.do(t, "POST", "/v1/chat/completions", userChat("hi", map[string]any{"model": "gpt-9"}))
	if status != 404 || jpath(resp, "error", "code") != "model_not_found" || !strings.Contains(jpath(resp, "error", "message").(string), `"glm-5.2-fp8"`) {
		t.Fatalf("%d %v", status, resp)
	}
	status, resp, _ = ts.do(t, "POST", "/v1/chat/completions", `[1]`)
	if status != 400 {
		t.Fatalf("%d %v", status, resp)
	}
}

func TestRemoteChatStream(t *testing.T) {
	ts, vs := newStandinFront(t, standin.Options{ChunkDelay: 2 * time.Millisecond}, Config{}, remote.Config{})
	tools := []any{map[string]any{"type": "function", "function": map[string]any{"name": "get_weather", "parameters": map[string]any{
		"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}, "required": []string{"city"}}}}}
	for _, includeUsage := range []bool{false, true} {
		body := userChat("one two three", map[string]any{"stream": true})
		if includeUsage {
			body["stream_options"] = map[string]any{"include_usage": true}
		}
		evs := ts.stream(t, "/v1/chat/completions", body)
		var text string
		var usage any
		for _, ev := range evs {
			if ev.data == "[DONE]" {
				continue
			}
			d := decode(t, ev.data)
			if c, ok := jpath(d, "choices", 0, "delta", "content").(string); ok {
				text += c
			}
			if u := d["usage"]; u != nil {
				usage = u
			}
		}
		if text != "You said: one two three" || evs[len(evs)-1].data != "[DONE]" {
			t.Fatalf("%q %v", text, evs)
		}
		if includeUsage != (usage != nil) {
			t.Fatalf("include_usage %v: usage %v", includeUsage, usage)
		}
		got, _ := vs.Last("/v1/chat/completions")
		if jpath(got.Body, "stream_options", "include_usage") != true {
			t.Fatalf("the remote was not asked for usage: %v", got.Body)
		}
		if s := ts.rc.Status(); s.Last.CompletionTokens != 5 || s.Last.DecodeTokensPerSecond <= 0 || s.Last.FirstTokenMS <= 0 {
			t.Fatalf("figures from usage %+v", s.Last)
		}
		if st := ts.srv.Status(); st.Engine != "remote" || st.State != status.Ready || st.Last == nil || st.Last.CompletionTokens != 5 || st.Last.DecodeTokensPerSecond <= 0 || st.Model != "glm-5.2-fp8" {
			t.Fatalf("status %+v", st)
		}
	}
	// A remote's comments and events without data (an older Spool's
	// opening comment) are not passed on: ts.stream reads strictly.
	var said string
	for _, ev := range ts.stream(t, "/v1/chat/completions", userChat("four five [[comments]]", map[string]any{"stream": true})) {
		if ev.data != "[DONE]" {
			c, _ := jpath(decode(t, ev.data), "choices", 0, "delta", "content").(string)
			said += c
		}
	}
	if said != "You said: four five" {
		t.Fatalf("through a remote sending comments: %q", said)
	}
	// Tool-call deltas pass through as the remote split them.
	var frags []string
	for _, ev := range ts.stream(t, "/v1/chat/completions", userChat("weather?", map[string]any{"stream": true, "tools": tools})) {
		if ev.data == "[DONE]" {
			continue
		}
		for _, tc := range toSlice(jpath(decode(t, ev.data), "choices", 0, "delta", "tool_calls")) {
			if a, _ := jpath(tc, "function", "arguments").(string); a != "" {
				frags = append(frags, a)
			}
		}
	}
	if len(frags) < 3 || strings.Join(frags, "") != `{"city":"Paris"}` {
		t.Fatalf("argument fragments %q", frags)
	}
}

func toSlice(v any) []any { s, _ := v.([]any); return s }

func TestRemoteCompletionsAndResponses(t *testing.T) {
	ts, vs := newStandinFront(t, standin.Options{}, Config{}, remote.Config{})
	status, resp, _ := ts.do(t, "POST", "/v1/completions", map[string]any{"prompt": "alpha beta", "max_tokens": 10})
	if status != 200 || jpath(resp, "choices", 0, "text") != "You said: alpha beta" || jpath(resp, "object") != "text_completion" {
		t.Fatalf("%d %v", status, resp)
	}
	var text string
	for _, ev := range ts.stream(t, "/v1/completions", map[string]any{"prompt": "alpha beta", "stream": true}) {
		if ev.data != "[DONE]" {
			text += jpath(decode(t, ev.data), "choices", 0, "text").(string)
		}
	}
	if text != "You said: alpha beta" {
		t.Fatalf("%q", text)
	}
	if got, _ := vs.Last("/v1/completions"); jpath(got.Body, "stream_options", "include_usage") != true {
		t.Fatalf("%v", got.Body)
	}
	status, resp, _ = ts.do(t, "POST", "/v1/responses", map[string]any{"input": "gamma"})
	id, _ := resp["id"].(string)
	if status != 200 || jpath(resp, "output", 0, "content", 0, "text") != "You said: gamma" || id == "" {
		t.Fatalf("%d %v", status, resp)
	}
	if status, got, _ := ts.do(t, "GET", "/v1/responses/"+id, nil); status != 200 || got["id"] != id {
		t.Fatalf("%d %v", status, got)
	}
	if status, got, _ := ts.do(t, "GET", "/v1/responses/resp_none", nil); status != 404 || jpath(got, "error", "type") != "invalid_request_error" {
		t.Fatalf("%d %v", status, got)
	}
	evs := ts.stream(t, "/v1/responses", map[string]any{"input": "gamma delta", "stream": true})
	if len(evs) < 3 || evs[0].name != "response.created" || evs[len(evs)-1].name != "response.completed" {
		t.Fatalf("%v", evs)
	}
	if s := ts.rc.Status(); s.Last.Path != "/v1/responses" || s.Last.CompletionTokens != 4 || s.Last.PromptTokens != 2 {
		t.Fatalf("%+v", s.Last)
	}
}

func TestRemoteErrors(t *testing.T) {
	ts, _ := newStandinFront(t, standin.Options{MaxModelLen: 1000}, Config{}, remote.Config{})
	for _, tc := range []struct {
		text        string
		extra       map[string]any
		status      int
		typ, code   string
		msg         string
		retry, anth string
	}{
		{"[[status 400]]", nil, 400, "invalid_request_error", "", "stand-in error 400", "", "invalid_request_error"},
		{"[[status 404]]", nil, 404, "invalid_request_error", "", "stand-in error 404", "", "not_found_error"},
		{"[[status 429]]", nil, 429, "rate_limit_error", "", "stand-in error 429", "2", "rate_limit_error"},
		{"[[status 500]]", nil, 502, "server_error", "remote_error", "the remote engine failed (500 Internal Server Error): stand-in error 500", "", "api_error"},
		{"[[status 503]]", nil, 503, "server_error", "", "stand-in error 503", "2", "overloaded_error"},
		{"hi", map[string]any{"max_tokens": 5000}, 400, "invalid_request_error", "context_length_exceeded", "maximum context length is 1000 tokens", "", "invalid_request_error"},
	} {
		status, resp, h := ts.do(t, "POST", "/v1/chat/completions", userChat(tc.text, tc.extra))
		if status != tc.status || jpath(resp, "error", "type") != tc.typ || !strings.Contains(jpath(resp, "error", "message").(string), tc.msg) ||
			h.Get("Retry-After") != tc.retry || (tc.code != "" && jpath(resp, "error", "code") != tc.code) {
			t.Errorf("%s: %d %v %v", tc.text, status, resp, h)
		}
		// The same failure through the Anthropic translation, in its
		// envelope.
		mb := map[string]any{"model": "claude-sonnet-4-5", "max_tokens": 50, "messages": []any{map[string]any{"role": "user", "content": tc.text}}}
		if tc.extra != nil {
			mb["max_tokens"] = tc.extra["max_tokens"]
		}
		if tc.code == "context_length_exceeded" {
			continue // the translation caps max_tokens (TestRemoteMessagesContext)
		}
		status, resp, _ = ts.do(t, "POST", "/v1/messages", mb)
		if status != tc.status || resp["type"] != "error" || jpath(resp, "error", "type") != tc.anth {
			t.Errorf("messages %s: %d %v", tc.text, status, resp)
		}
	}
	// An error event mid-stream is passed on in the OpenAI shape.
	evs := ts.stream(t, "/v1/chat/completions", userChat("go [[stream-error]]", map[string]any{"stream": true}))
	var sawError bool
	for _, ev := range evs {
		if ev.data != "[DONE]" && jpath(decode(t, ev.data), "error", "message") != nil {
			sawError = strings.Contains(ev.data, "stand-in failure mid-stream")
		}
	}
	if !sawError || ts.rc.Status().Last.Outcome == "ok" {
		t.Fatalf("%v %+v", evs, ts.rc.Status().Last)
	}
	// A connection that breaks mid-stream ends with an error event.
	evs = ts.stream(t, "/v1/chat/completions", userChat("go [[cut]]", map[string]any{"stream": true}))
	if last := evs[len(evs)-1]; jpath(decode(t, last.data), "error", "code") != "remote_unreachable" {
		t.Fatalf("%v", evs)
	}
	evs = ts.stream(t, "/v1/messages", map[string]any{"max_tokens": 20, "stream": true, "messages": []any{map[string]any{"role": "user", "content": "go [[cut]]"}}})
	if last := evs[len(evs)-1]; last.name != "error" || jpath(decode(t, last.data), "error", "type") != "api_error" {
		t.Fatalf("%v", evs)
	}
	evs = ts.stream(t, "/v1/responses", map[string]any{"input": "[[cut]]", "stream": true})
	if last := evs[len(evs)-1]; last.name != "error" || jpath(decode(t, last.data), "code") != "remote_unreachable" {
		t.Fatalf("%v", evs)
	}
}

func TestRemoteWrongKey(t *testing.T) {
	vs := standin.New(standin.Options{Key: "the-right-key"})
	hs := httptest.NewServer(vs)
	defer hs.Close()
	ts := newRemoteFront(t, hs.URL, Config{}, remote.Config{Key: "the-wrong-key"})
	status, resp, _ := ts.do(t, "POST", "/v1/chat/completions", userChat("hi", nil))
	if status != 502 || jpath(resp, "error", "code") != "remote_auth_failed" || !strings.Contains(jpath(resp, "error", "message").(string), "--remote-key") {
		t.Fatalf("%d %v", status, resp)
	}
}

func TestRemoteDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ts := newRemoteFront(t, "http://"+addr, Config{APIKey: frontKey}, remote.Config{Key: remoteKey})
	if status, _, _ := ts.do(t, "GET", "/health", nil); status != 200 {
		t.Fatal(status)
	}
	for _, path := range []string{"/v1/chat/completions", "/v1/completions", "/v1/responses"} {
		status, resp, h := ts.do(t, "POST", path, map[string]any{"model": "glm-5.2-fp8", "prompt": "x", "input": "x", "messages": []any{map[string]any{"role": "user", "content": "x"}}})
		if status != 502 || jpath(resp, "error", "code") != "remote_unreachable" || h.Get("Retry-After") == "" || !strings.Contains(jpath(resp, "error", "message").(string), addr) {
			t.Errorf("%s: %d %v", path, status, resp)
		}
	}
	if status, resp, _ := ts.do(t, "GET", "/v1/models", nil); status != 502 {
		t.Errorf("%d %v", status, resp)
	}
	status, resp, _ := ts.do(t, "POST", "/v1/messages", map[string]any{"model": "claude-opus-4", "max_tokens": 5, "messages": []any{map[string]any{"role": "user", "content": "x"}}})
	if status != 502 || resp["type"] != "error" || jpath(resp, "error", "type") != "api_error" {
		t.Errorf("%d %v", status, resp)
	}
	ts.rc.Probe(context.Background())
	_, stats, _ := ts.do(t, "GET", "/stats", nil)
	if jpath(stats, "engine", "kind") != "remote" || jpath(stats, "engine", "state") != "unreachable" || jpath(stats, "engine", "remote", "reachable") != false ||
		jpath(stats, "engine", "remote", "error") == nil {
		t.Fatalf("%v", stats)
	}
}

func TestRemoteSlow(t *testing.T) {
	ts, vs := newStandinFront(t, standin.Options{}, Config{KeepAlive: 40 * time.Millisecond}, remote.Config{Timeout: 300 * time.Millisecond})
	// No answer within the timeout.
	status, resp, _ := ts.do(t, "POST", "/v1/chat/completions", userChat("[[sleep 2s]]", nil))
	if status != 504 || jpath(resp, "error", "code") != "remote_timeout" {
		t.Fatalf("%d %v", status, resp)
	}
	// A stream that falls silent: keep-alives while waiting, then an error
	// event; the remote's request ends.
	before := vs.Cancelled()
	status, _, body := ts.raw(t, context.Background(), "/v1/chat/completions", userChat("go on [[stall]]", map[string]any{"stream": true}))
	if status != 200 || strings.Count(body, ": keep-alive") < 2 || !strings.Contains(body, `"code":"remote_timeout"`) || strings.Contains(body, "[DONE]") {
		t.Fatalf("%d %s", status, body)
	}
	_, _, body = ts.raw(t, context.Background(), "/v1/messages", map[string]any{"max_tokens": 9, "stream": true, "messages": []any{map[string]any{"role": "user", "content": "[[stall]]"}}})
	if strings.Count(body, "event: ping") < 2 || !strings.Contains(body, "event: error") || !strings.Contains(body, "sent nothing for 300ms") {
		t.Fatalf("%s", body)
	}
	waitFor(t, func() bool { return vs.Cancelled() >= before+2 && vs.Active() == 0 }, "the remote's stalled requests to end")
}

func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// The client leaving ends the request at the remote: streamed or not,
// proxied or translated.
func TestRemoteClientCancel(t *testing.T) {
	ts, vs := newStandinFront(t, standin.Options{}, Config{}, remote.Config{})
	cases := []struct {
		path string
		body map[string]any
	}{
		{"/v1/chat/completions", userChat("[[stall]]", map[string]any{"stream": true})},
		{"/v1/chat/completions", userChat("[[stall]]", nil)},
		{"/v1/messages", map[string]any{"max_tokens": 9, "stream": true, "messages": []any{map[string]any{"role": "user", "content": "[[stall]]"}}}},
		{"/v1/messages", map[string]any{"max_tokens": 9, "messages": []any{map[string]any{"role": "user", "content": "[[stall]]"}}}},
		{"/v1/completions", map[string]any{"prompt": "[[stall]]", "stream": true}},
		{"/v1/responses", map[string]any{"input": "[[stall]]", "stream": true}},
	}
	for i, tc := range cases {
		ctx, cancel := context.WithCancel(context.Background())
		b, _ := json.Marshal(tc.body)
		req, _ := http.NewRequestWithContext(ctx, "POST", ts.URL+tc.path, strings.NewReader(string(b)))
		req.Header.Set("Authorization", "Bearer "+frontKey)
		done := make(chan struct{})
		go func() {
			defer close(done)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				io.ReadAll(resp.Body)
				resp.Body.Close()
			}
		}()
		waitFor(t, func() bool { return vs.Active() == 1 }, tc.path+" to reach the remote")
		cancel()
		<-done
		waitFor(t, func() bool { return vs.Cancelled() == i+1 && vs.Active() == 0 }, tc.path+" to end at the remote")
		waitFor(t, func() bool { return ts.rc.Status().Active == 0 }, "the front to count the request ended")
		if o := ts.rc.Status().Last.Outcome; o != "cancelled" {
			t.Errorf("%s: outcome %s", tc.path, o)
		}
	}
}

// The security defaults stay: the key, the Host guard, CORS, the bind
// check; and the remote key reaches no client, log or event.
func TestRemoteSecurity(t *testing.T) {
	if _, err := NewRemote(Config{Host: "0.0.0.0"}, &remote.Client{}); err == nil {
		t.Fatal("a wildcard bind without a key was accepted")
	}
	echo := http.NewServeMux()
	echo.HandleFunc("/v1/models", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"data":[{"id":"m","max_model_len":100}]}`))
	})
	echo.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		// A remote that echoes the credentials it got, in every field,
		// a header, and in its stream's error events.
		auth := r.Header.Get("Authorization")
		w.Header().Set("X-Request-Id", auth)
		e := map[string]any{"error": map[string]any{"message": "bad auth " + auth, "param": auth, "code": auth, "type": auth}}
		if body, _ := io.ReadAll(r.Body); strings.Contains(string(body), `"stream":true`) {
			w.Header().Set("Content-Type", "text/event-stream")
			b, _ := json.Marshal(e)
			w.Write([]byte("data: " + string(b) + "\n\n"))
			return
		}
		w.WriteHeader(500)
		json.NewEncoder(w).Encode(e)
	})
	hs := httptest.NewServer(echo)
	defer hs.Close()
	ts := newRemoteFront(t, hs.URL, Config{APIKey: frontKey}, remote.Config{Key: remoteKey})
	ts.rc.Probe(context.Background())
	var seen strings.Builder
	check := func(status int, resp map[string]any, h http.Header) {
		b, _ := json.Marshal(resp)
		seen.Write(b)
		for k, v := range h {
			seen.WriteString(k + strings.Join(v, ","))
		}
	}
	check(ts.do(t, "POST", "/v1/chat/completions", userChat("hi", nil)))
	check(ts.do(t, "POST", "/v1/messages", map[string]any{"max_tokens": 5, "messages": []any{map[string]any{"role": "user", "content": "x"}}}))
	check(ts.do(t, "POST", "/v1/responses", map[string]any{"input": "x"}))
	check(ts.do(t, "GET", "/stats", nil))
	for _, req := range []struct {
		path string
		body any
	}{
		{"/v1/chat/completions", userChat("hi", map[string]any{"stream": true})},
		{"/v1/responses", map[string]any{"input": "x", "stream": true}},
		{"/v1/messages", map[string]any{"max_tokens": 5, "stream": true, "messages": []any{map[string]any{"role": "user", "content": "x"}}}},
	} {
		_, h, body := ts.raw(t, context.Background(), req.path, req.body)
		seen.WriteString(body)
		check(0, nil, h)
	}
	conn, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(ts.URL, "http")+eventsPath+"?api_key="+frontKey, nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		_, msg, err := conn.ReadMessage()
		if err != nil {
			t.Fatal(err)
		}
		seen.Write(msg)
	}
	conn.Close()
	if strings.Contains(seen.String(), remoteKey) {
		t.Fatalf("the remote key reached the client: %s", seen.String())
	}
	if !strings.Contains(seen.String(), "bad auth Bearer [remote key]") {
		t.Fatalf("the remote's message was not passed on: %s", seen.String())
	}

	// The front's own guards.
	anon := &testServer{Server: ts.Server}
	if status, _, _ := anon.do(t, "GET", "/v1/models", nil); status != 401 {
		t.Fatalf("no key: %d", status)
	}
	if status, _, _ := ts.do(t, "GET", "/v1/models", nil, "Host", "evil.example.com"); status != 403 {
		t.Fatalf("foreign host: %d", status)
	}
	if status, _, _ := ts.do(t, "GET", "/v1/models", nil, "Origin", "https://evil.example.com"); status != 403 {
		t.Fatalf("foreign origin: %d", status)
	}
	if _, _, h := ts.do(t, "GET", "/v1/models", nil, "Origin", "http://localhost:5173"); h.Get("Access-Control-Allow-Origin") != "http://localhost:5173" {
		t.Fatalf("loopback origin: %v", h)
	}
}

func TestRemoteEvents(t *testing.T) {
	ts, _ := newStandinFront(t, standin.Options{}, Config{}, remote.Config{})
	ts.rc.Probe(context.Background())
	conn, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(ts.URL, "http")+eventsPath+"?api_key="+frontKey, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var hello, state Event
	if conn.ReadJSON(&hello) != nil || conn.ReadJSON(&state) != nil {
		t.Fatal("no events")
	}
	if hello.Type != "hello" || jpath(hello.Data, "id") != "glm-5.2-fp8" || jpath(hello.Data, "engine") != "remote" || jpath(hello.Data, "context_length") != 131072.0 {
		t.Fatalf("hello %v", hello)
	}
	if state.Type != "state" || jpath(state.Data, "state") != "ready" || jpath(state.Data, "engine") != "remote" || jpath(state.Data, "remote", "reachable") != true ||
		jpath(state.Data, "model") != "glm-5.2-fp8" {
		t.Fatalf("state %v", state)
	}
	_, stats, _ := ts.do(t, "GET", "/stats", nil)
	if jpath(stats, "engine", "state") != "ready" || jpath(stats, "model", "id") != "glm-5.2-fp8" || stats["plan"] != nil || stats["experts"] != nil {
		t.Fatalf("%v", stats)
	}
}

// A request waiting on the remote holds no parse slot: with one slot, a
// second request is served while the first stalls.
func TestRemoteParseSlots(t *testing.T) {
	ts, vs := newStandinFront(t, standin.Options{}, Config{MaxParsing: 1}, remote.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	b, _ := json.Marshal(userChat("[[stall]]", map[string]any{"stream": true}))
	req, _ := http.NewRequestWithContext(ctx, "POST", ts.URL+"/v1/chat/completions", strings.NewReader(string(b)))
	req.Header.Set("Authorization", "Bearer "+frontKey)
	go func() {
		defer close(done)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			io.ReadAll(resp.Body)
			resp.Body.Close()
		}
	}()
	waitFor(t, func() bool { return vs.Active() == 1 }, "the stalled request to reach the remote")
	for _, path := range []string{"/v1/chat/completions", "/v1/messages"} {
		status, resp, _ := ts.do(t, "POST", path, map[string]any{"max_tokens": 5, "messages": []any{map[string]any{"role": "user", "content": "hi"}}})
		if status != 200 {
			t.Fatalf("%s while another waits: %d %v", path, status, resp)
		}
	}
	cancel()
	<-done
}
