package server

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/spoolhq/spool/internal/ssecheck"
)

// TestErrorCases: every refused request answers the right status, the
// OpenAI envelope (Anthropic on /v1/messages) and names the parameter.
func TestErrorCases(t *testing.T) {
	ts := newTestServer(t, serverOpts{sched: scheduler3(), cfg: Config{MaxBodyBytes: 64 << 10}})
	long := strings.Repeat("word ", 300)
	cases := []struct {
		name   string
		method string
		path   string
		body   any
		status int
		param  string
		code   string
	}{
		{"not json", "POST", "/v1/chat/completions", "{nope", 400, "", ""},
		{"not an object", "POST", "/v1/chat/completions", "[1]", 400, "", ""},
		{"trailing data", "POST", "/v1/chat/completions", `{"messages":[]} {}`, 400, "", ""},
		{"wrong type", "POST", "/v1/chat/completions", chatBody(map[string]any{"temperature": "hot"}), 400, "temperature", ""},
		{"temperature range", "POST", "/v1/chat/completions", chatBody(map[string]any{"temperature": 3}), 400, "temperature", ""},
		{"top_p range", "POST", "/v1/chat/completions", chatBody(map[string]any{"top_p": 1.5}), 400, "top_p", ""},
		{"top_k negative", "POST", "/v1/chat/completions", chatBody(map[string]any{"top_k": -5}), 400, "top_k", ""},
		{"min_p range", "POST", "/v1/chat/completions", chatBody(map[string]any{"min_p": 1.5}), 400, "min_p", ""},
		{"min_p range on completions", "POST", "/v1/completions", map[string]any{"prompt": "x", "min_p": -1}, 400, "min_p", ""},
		{"penalty range", "POST", "/v1/chat/completions", chatBody(map[string]any{"presence_penalty": 9}), 400, "presence_penalty", ""},
		{"logit_bias key", "POST", "/v1/chat/completions", chatBody(map[string]any{"logit_bias": map[string]any{"x": 1}}), 400, "logit_bias", ""},
		{"logit_bias value", "POST", "/v1/chat/completions", chatBody(map[string]any{"logit_bias": map[string]any{"5": 500}}), 400, "logit_bias", ""},
		{"top_logprobs alone", "POST", "/v1/chat/completions", chatBody(map[string]any{"top_logprobs": 2}), 400, "top_logprobs", ""},
		{"max_tokens zero", "POST", "/v1/chat/completions", chatBody(map[string]any{"max_tokens": 0}), 400, "max_tokens", ""},
		{"n", "POST", "/v1/chat/completions", chatBody(map[string]any{"n": 2}), 400, "n", ""},
		{"stop type", "POST", "/v1/chat/completions", chatBody(map[string]any{"stop": 5}), 400, "stop", ""},
		{"empty stop", "POST", "/v1/chat/completions", chatBody(map[string]any{"stop": []string{""}}), 400, "stop", ""},
		{"no messages", "POST", "/v1/chat/completions", map[string]any{"messages": []any{}}, 400, "messages", ""},
		{"bad role", "POST", "/v1/chat/completions", map[string]any{"messages": []any{map[string]any{"role": "robot", "content": "hi"}}}, 400, "messages[0].role", ""},
		{"image part", "POST", "/v1/chat/completions", map[string]any{"messages": []any{map[string]any{"role": "user", "content": []any{map[string]any{"type": "image_url", "image_url": map[string]any{"url": "x"}}}}}}, 400, "messages[0].content[0].type", ""},
		{"bad tool", "POST", "/v1/chat/completions", chatBody(map[string]any{"tools": []any{map[string]any{"type": "retrieval"}}}), 400, "tools[0].type", ""},
		{"bad tool name", "POST", "/v1/chat/completions", chatBody(map[string]any{"tools": []any{map[string]any{"type": "function", "function": map[string]any{"name": "a b"}}}}), 400, "tools[0].function.name", ""},
		{"tool_choice unknown", "POST", "/v1/chat/completions", chatBody(map[string]any{"tool_choice": map[string]any{"type": "function", "function": map[string]any{"name": "nope"}}}), 400, "tool_choice", ""},
		{"tool_choice word", "POST", "/v1/chat/completions", chatBody(map[string]any{"tool_choice": "sometimes"}), 400, "tool_choice", ""},
		{"response_format type", "POST", "/v1/chat/completions", chatBody(map[string]any{"response_format": map[string]any{"type": "yaml"}}), 400, "response_format.type", ""},
		{"response_format schema", "POST", "/v1/chat/completions", chatBody(map[string]any{"response_format": map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "x", "schema": 5}}}), 400, "response_format.json_schema.schema", ""},
		{"reasoning_effort", "POST", "/v1/chat/completions", chatBody(map[string]any{"reasoning_effort": "extreme"}), 400, "reasoning_effort", ""},
		{"enable_thinking type", "POST", "/v1/chat/completions", chatBody(map[string]any{"chat_template_kwargs": map[string]any{"enable_thinking": "yes"}}), 400, "chat_template_kwargs.enable_thinking", ""},
		{"unknown model", "POST", "/v1/chat/completions", chatBody(map[string]any{"model": "gpt-9"}), 404, "", "model_not_found"},
		{"unknown model get", "GET", "/v1/models/gpt-9", nil, 404, "", "model_not_found"},
		{"context exceeded", "POST", "/v1/chat/completions", map[string]any{"messages": []any{map[string]any{"role": "user", "content": long}}}, 400, "messages", "context_length_exceeded"},
		{"body too large", "POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"` + strings.Repeat("x", 70<<10) + `"}]}`, 413, "", "request_too_large"},
		{"embeddings empty", "POST", "/v1/embeddings", map[string]any{"input": ""}, 400, "input", ""},
		{"unknown route", "GET", "/v2/whatever", nil, 404, "", "unknown_route"},
		{"completions suffix", "POST", "/v1/completions", map[string]any{"prompt": "def f(", "suffix": "return"}, 400, "suffix", ""},
		{"completions prompt ids", "POST", "/v1/completions", map[string]any{"prompt": []int{1, 999999}}, 400, "prompt", ""},
		{"completions no prompt", "POST", "/v1/completions", map[string]any{}, 400, "prompt", ""},
		{"responses no input", "POST", "/v1/responses", map[string]any{}, 400, "input", ""},
		{"responses previous", "POST", "/v1/responses", map[string]any{"input": "hi", "previous_response_id": "resp_nope"}, 404, "", "previous_response_not_found"},
		{"responses tool", "POST", "/v1/responses", map[string]any{"input": "hi", "tools": []any{5}}, 400, "tools[0]", ""},
		{"responses get unknown", "GET", "/v1/responses/resp_nope", nil, 404, "", "response_not_found"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status, body, _ := ts.do(t, c.method, c.path, c.body)
			if status != c.status {
				t.Fatalf("status %d, want %d: %v", status, c.status, body)
			}
			e, _ := body["error"].(map[string]any)
			if e == nil || e["message"] == "" || e["type"] == nil {
				t.Fatalf("no OpenAI error envelope: %v", body)
			}
			if c.param != "" && e["param"] != c.param {
				t.Errorf("param %v, want %q (%v)", e["param"], c.param, e["message"])
			}
			if c.code != "" && e["code"] != c.code {
				t.Errorf("code %v, want %q (%v)", e["code"], c.code, e["message"])
			}
		})
	}

	// /v1/messages answers in the Anthropic envelope.
	anth := []struct {
		name   string
		body   any
		status int
		typ    string
	}{
		{"missing max_tokens", map[string]any{"messages": []any{map[string]any{"role": "user", "content": "hi"}}}, 400, "invalid_request_error"},
		{"bad role", map[string]any{"max_tokens": 5, "messages": []any{map[string]any{"role": "robot", "content": "hi"}}}, 400, "invalid_request_error"},
		{"image block", map[string]any{"max_tokens": 5, "messages": []any{map[string]any{"role": "user", "content": []any{map[string]any{"type": "image"}}}}}, 400, "invalid_request_error"},
		{"unknown model", map[string]any{"model": "gpt-9", "max_tokens": 5, "messages": []any{map[string]any{"role": "user", "content": "hi"}}}, 404, "not_found_error"},
		{"temperature above 2", map[string]any{"max_tokens": 5, "temperature": 2.5, "messages": []any{map[string]any{"role": "user", "content": "hi"}}}, 400, "invalid_request_error"},
	}
	for _, c := range anth {
		t.Run("anthropic "+c.name, func(t *testing.T) {
			status, body, _ := ts.do(t, "POST", "/v1/messages", c.body)
			if status != c.status || body["type"] != "error" || jpath(body, "error", "type") != c.typ {
				t.Errorf("status %d body %v, want %d %s", status, body, c.status, c.typ)
			}
		})
	}
}

// scheduler3 is a small scheduler configuration for tests.
func scheduler3() schedulerConfig {
	return schedulerConfig{MaxBatch: 3, MaxQueue: 8, ContextLength: 256}
}

// TestQueueFull: with every slot taken and the queue full, a request is
// answered 429 with Retry-After at once.
func TestQueueFull(t *testing.T) {
	ts := newTestServer(t, serverOpts{sched: schedulerConfig{MaxBatch: 1, MaxQueue: 1}, noRun: true})
	// The first request waits in the queue (the scheduler is stopped);
	// its headers arrive at once.
	req, _ := http.NewRequest("POST", ts.URL+"/v1/chat/completions", strings.NewReader(`{"messages":[{"role":"user","content":"hi"}],"stream":true}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("queued stream: status %d", resp.StatusCode)
	}
	status, body, h := ts.do(t, "POST", "/v1/chat/completions", chatBody(nil))
	if status != http.StatusTooManyRequests || h.Get("Retry-After") == "" || jpath(body, "error", "code") != "queue_full" {
		t.Errorf("second request: %d %v (Retry-After %q)", status, body, h.Get("Retry-After"))
	}
	status, body, _ = ts.do(t, "POST", "/v1/messages", map[string]any{"max_tokens": 5, "messages": []any{map[string]any{"role": "user", "content": "hi"}}})
	if status != http.StatusTooManyRequests || jpath(body, "error", "type") != "rate_limit_error" {
		t.Errorf("anthropic queue full: %d %v", status, body)
	}
}

// TestKeepAlive: a stream waiting in the queue gets headers at once and
// keep-alive comment lines.
func TestKeepAlive(t *testing.T) {
	ts := newTestServer(t, serverOpts{sched: schedulerConfig{MaxBatch: 1, MaxQueue: 2}, noRun: true, cfg: Config{KeepAlive: 20 * time.Millisecond}})
	req, _ := http.NewRequest("POST", ts.URL+"/v1/chat/completions", strings.NewReader(`{"messages":[{"role":"user","content":"hi"}],"stream":true}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	buf := make([]byte, 0, 256)
	for strings.Count(string(buf), "keep-alive") < 2 {
		chunk := make([]byte, 64)
		n, err := resp.Body.Read(chunk)
		if err != nil {
			t.Fatalf("reading: %v after %q", err, buf)
		}
		buf = append(buf, chunk[:n]...)
	}
	// Comment lines alone: no blank line, which a client that
	// dispatches every blank line would read as an empty event.
	if _, err := ssecheck.Check(buf); err != nil || !strings.Contains(string(buf), "}\n\n: keep-alive\n: keep-alive\n") {
		t.Errorf("stream %q: %v", buf, err)
	}
}

// TestQueuedClientsGiveUp: clients that hang up while their requests wait
// in the queue take their places with them: /stats stops counting them
// and the next request is queued, not refused with queue_full (issue 33:
// 16 that gave up kept every later request out until a generation ended).
func TestQueuedClientsGiveUp(t *testing.T) {
	ts := newTestServer(t, serverOpts{sched: schedulerConfig{MaxBatch: 1, MaxQueue: 2}, noRun: true})
	queue := func(ctx context.Context) *http.Response {
		req, _ := http.NewRequestWithContext(ctx, "POST", ts.URL+"/v1/chat/completions", strings.NewReader(`{"messages":[{"role":"user","content":"hi"}],"stream":true}`))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 200 {
			t.Fatalf("queued stream: status %d", resp.StatusCode)
		}
		return resp
	}
	for range 2 {
		ctx, hangUp := context.WithCancel(context.Background())
		resp := queue(ctx)
		hangUp()
		resp.Body.Close()
	}
	for ts.sched.Stats().Queued != 0 {
		time.Sleep(time.Millisecond)
	}
	if status, body, _ := ts.do(t, "GET", "/stats", nil); status != 200 || jpath(body, "engine", "scheduler", "queued") != 0.0 {
		t.Errorf("/stats after the clients gave up: %d %v", status, jpath(body, "engine", "scheduler"))
	}
	for range 2 {
		resp := queue(context.Background())
		defer resp.Body.Close()
	}
	if status, body, _ := ts.do(t, "POST", "/v1/chat/completions", chatBody(nil)); status != http.StatusTooManyRequests {
		t.Errorf("past the bound again: %d %v", status, body)
	}
}
