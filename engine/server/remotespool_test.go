package server

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/spoolhq/spool/engine/remote"
)

// A Spool on the demo model as the remote of another Spool: every
// endpoint through the front gives what the remote gives directly.
func newSpoolPair(t *testing.T) (front *remoteFront, inner *testServer) {
	t.Helper()
	inner = newTestServer(t, serverOpts{cfg: Config{APIKey: remoteKey}})
	front = newRemoteFront(t, inner.URL, Config{APIKey: frontKey}, remote.Config{Key: remoteKey})
	return front, inner
}

func TestRemoteSpoolPassThrough(t *testing.T) {
	front, inner := newSpoolPair(t)
	status, list, _ := front.do(t, "GET", "/v1/models", nil)
	if status != 200 || jpath(list, "data", 0, "id") != "glm52-mini" || jpath(list, "data", 0, "context_length") == nil {
		t.Fatalf("%d %v", status, list)
	}
	body := chatBody(map[string]any{"model": "spool"})
	_, direct, _ := inner.do(t, "POST", "/v1/chat/completions", body)
	status, via, _ := front.do(t, "POST", "/v1/chat/completions", body)
	want := jpath(direct, "choices", 0, "message", "content")
	if status != 200 || want == "" || jpath(via, "choices", 0, "message", "content") != want ||
		jpath(via, "usage", "completion_tokens") != jpath(direct, "usage", "completion_tokens") {
		t.Fatalf("direct %v\nvia the front %d %v", direct, status, via)
	}
	body["stream"] = true
	var streamed string
	for _, ev := range front.stream(t, "/v1/chat/completions", body) {
		if ev.data == "[DONE]" {
			continue
		}
		if c, ok := jpath(decode(t, ev.data), "choices", 0, "delta", "content").(string); ok {
			streamed += c
		}
		if u := decode(t, ev.data)["usage"]; u != nil {
			t.Fatalf("a usage chunk the client did not ask for: %v", u)
		}
	}
	if streamed != want {
		t.Fatalf("streamed %q, want %q", streamed, want)
	}
	if last := front.rc.Status().Last; last.CompletionTokens != int(jpath(direct, "usage", "completion_tokens").(float64)) || last.Outcome != "ok" {
		t.Fatalf("figures %+v", last)
	}

	cb := map[string]any{"prompt": "def add(a, b):", "max_tokens": 12, "temperature": 0}
	_, d, _ := inner.do(t, "POST", "/v1/completions", cb)
	if _, v, _ := front.do(t, "POST", "/v1/completions", cb); jpath(v, "choices", 0, "text") != jpath(d, "choices", 0, "text") || jpath(d, "choices", 0, "text") == "" {
		t.Fatalf("completions %v %v", d, v)
	}
	rb := map[string]any{"input": question, "max_output_tokens": 12, "temperature": 0}
	_, d, _ = inner.do(t, "POST", "/v1/responses", rb)
	_, v, _ := front.do(t, "POST", "/v1/responses", rb)
	if jpath(v, "output_text") == nil && jpath(v, "output") == nil {
		t.Fatalf("responses %v", v)
	}
	if a, b := responseText(d), responseText(v); a == "" || a != b {
		t.Fatalf("responses %q %q", a, b)
	}
	id, _ := v["id"].(string)
	if status, got, _ := front.do(t, "GET", "/v1/responses/"+id, nil); status != 200 || got["id"] != id {
		t.Fatalf("%d %v", status, got)
	}
}

func responseText(resp map[string]any) string {
	var b strings.Builder
	for _, item := range toSlice(resp["output"]) {
		for _, c := range toSlice(jpath(item, "content")) {
			if s, ok := jpath(c, "text").(string); ok {
				b.WriteString(s)
			}
		}
	}
	return b.String()
}

// /v1/messages through the translation gives the tokens the remote's own
// chat endpoint gives for the same conversation.
func TestRemoteSpoolMessages(t *testing.T) {
	front, inner := newSpoolPair(t)
	msgs := []any{map[string]any{"role": "user", "content": question}}
	_, direct, _ := inner.do(t, "POST", "/v1/chat/completions", map[string]any{"messages": []any{
		map[string]any{"role": "system", "content": "You answer questions about Python."}, msgs[0]}, "max_tokens": 24, "temperature": 0})
	wantText, _ := jpath(direct, "choices", 0, "message", "content").(string)
	wantThinking, _ := jpath(direct, "choices", 0, "message", "reasoning_content").(string)
	mb := map[string]any{"model": "claude-sonnet-4-5", "system": "You answer questions about Python.", "messages": msgs, "max_tokens": 24, "temperature": 0}
	status, resp, _ := front.do(t, "POST", "/v1/messages", mb)
	if status != 200 {
		t.Fatalf("%d %v", status, resp)
	}
	var text, thinking string
	for _, b := range toSlice(resp["content"]) {
		text += str(jpath(b, "text"))
		thinking += str(jpath(b, "thinking"))
	}
	if text != wantText || thinking != wantThinking || wantText+wantThinking == "" || resp["model"] != "glm52-mini" ||
		jpath(resp, "usage", "output_tokens") != jpath(direct, "usage", "completion_tokens") {
		t.Fatalf("direct %v\nvia the translation %v", direct, resp)
	}
	mb["stream"] = true
	text, thinking = "", ""
	for _, e := range messagesEvents(t, front.testServer, mb) {
		text += str(jpath(e, "delta", "text"))
		thinking += str(jpath(e, "delta", "thinking"))
	}
	if text != wantText || thinking != wantThinking {
		t.Fatalf("streamed %q %q, want %q %q", text, thinking, wantText, wantThinking)
	}

	// A forced tool: the remote's constrained call becomes a tool_use
	// whose input follows the schema.
	level := map[string]any{"name": "set_level", "input_schema": map[string]any{"type": "object",
		"properties": map[string]any{"level": map[string]any{"type": "integer"}}, "required": []string{"level"}}}
	tb := map[string]any{"messages": msgs, "max_tokens": 60, "tools": []any{level}, "tool_choice": map[string]any{"type": "tool", "name": "set_level"}}
	status, resp, _ = front.do(t, "POST", "/v1/messages", tb)
	blocks := toSlice(resp["content"])
	last := blocks[len(blocks)-1]
	if status != 200 || jpath(last, "type") != "tool_use" || jpath(last, "name") != "set_level" || resp["stop_reason"] != "tool_use" {
		t.Fatalf("%d %v", status, resp)
	}
	if _, ok := jpath(last, "input", "level").(float64); !ok {
		t.Fatalf("input %v", jpath(last, "input"))
	}
	tb["stream"] = true
	var partial string
	var sawStart bool
	evs := messagesEvents(t, front.testServer, tb)
	for _, e := range evs {
		sawStart = sawStart || jpath(e, "content_block", "type") == "tool_use"
		partial += str(jpath(e, "delta", "partial_json"))
	}
	var input map[string]any
	if !sawStart || json.Unmarshal([]byte(partial), &input) != nil || input["level"] == nil || jpath(evs[len(evs)-2], "delta", "stop_reason") != "tool_use" {
		t.Fatalf("streamed tool use %q %v", partial, evs)
	}

	// Structured output: the remote's constrained decoding makes the text
	// follow the schema.
	schema := map[string]any{"type": "object", "properties": map[string]any{"answer": map[string]any{"type": "string", "maxLength": 40}}, "required": []string{"answer"}}
	status, resp, _ = front.do(t, "POST", "/v1/messages", map[string]any{"messages": msgs, "max_tokens": 200, "temperature": 0,
		"thinking": map[string]any{"type": "disabled"}, "output_config": map[string]any{"format": map[string]any{"type": "json_schema", "schema": schema}}})
	var out map[string]any
	if status != 200 || json.Unmarshal([]byte(str(jpath(resp, "content", 0, "text"))), &out) != nil || out["answer"] == nil {
		t.Fatalf("structured output %d %v", status, resp)
	}

	// Spool has no /tokenize: count_tokens says so.
	status, resp, _ = front.do(t, "POST", "/v1/messages/count_tokens", map[string]any{"messages": msgs})
	if status != 404 || jpath(resp, "error", "type") != "not_found_error" || !strings.Contains(jpath(resp, "error", "message").(string), "/tokenize") {
		t.Fatalf("%d %v", status, resp)
	}
}

func str(v any) string { s, _ := v.(string); return s }
