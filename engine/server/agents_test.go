package server

import (
	"context"
	"encoding/json"
	"github.com/spoolhq/spool/engine/api/anthropic"
	"net/http"
	"strings"
	"testing"
	"time"
)

// Regression tests for what coding agents and SDKs send (issue 10).

// TestMessagesAsClaudeCode: system turns inside messages, adaptive
// thinking, server tools and Anthropic's overflow wording.
func TestMessagesAsClaudeCode(t *testing.T) {
	ts := newTestServer(t, serverOpts{sched: scheduler3()})
	user := map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": question, "cache_control": map[string]any{"type": "ephemeral"}}}}
	body := map[string]any{"model": "claude-sonnet-4-5", "max_tokens": 6,
		"system":   []any{map[string]any{"type": "text", "text": "You are terse."}},
		"messages": []any{user, map[string]any{"role": "assistant", "content": "Sure."}, map[string]any{"role": "system", "content": "Answer in one line."}, user},
		"thinking": map[string]any{"type": "adaptive", "display": "omitted"},
		"tools": []any{map[string]any{"name": "Read", "input_schema": map[string]any{"type": "object", "properties": map[string]any{"path": map[string]any{"type": "string"}}}},
			map[string]any{"type": "web_search_20250305", "name": "web_search", "max_uses": 5}},
		"context_management": map[string]any{"edits": []any{}}, "metadata": map[string]any{"user_id": "x"}}
	status, msg, _ := ts.do(t, "POST", "/v1/messages?beta=true", body)
	if status != 200 || msg["type"] != "message" {
		t.Fatalf("status %d %v", status, msg)
	}
	// The system turn is in place in the prompt, and adaptive thinking
	// opened the think block.
	var req anthropic.MessagesRequest
	raw, _ := json.Marshal(body)
	if err := json.Unmarshal(raw, &req); err != nil {
		t.Fatal(err)
	}
	tu, err := req.Turn("msg_1", false)
	if err != nil {
		t.Fatal(err)
	}
	ids, parse, err := ts.srv.local.Prompt(context.Background(), tu)
	if err != nil {
		t.Fatal(err)
	}
	prompt := loadDemo(t).tok.Decode(ids, false)
	if !strings.Contains(prompt, "Sure.<|system|>\nAnswer in one line.<|user|>") || !parse.InThink || strings.Contains(prompt, "web_search") {
		t.Errorf("prompt %q (in think %v)", prompt, parse.InThink)
	}
	if status, s, _ := ts.do(t, "POST", "/v1/messages?beta=true", stream(body)); status != 200 || s != nil {
		t.Errorf("streamed: %d %v", status, s)
	}
	// Over the context: Anthropic's wording, which Claude Code keys on.
	long := map[string]any{"max_tokens": 5, "messages": []any{map[string]any{"role": "user", "content": strings.Repeat("word ", 300)}}}
	status, e, _ := ts.do(t, "POST", "/v1/messages", long)
	msgText, _ := jpath(e, "error", "message").(string)
	if status != 400 || jpath(e, "error", "type") != "invalid_request_error" || !strings.HasPrefix(msgText, "prompt is too long: ") || !strings.HasSuffix(msgText, " tokens > 256 maximum") {
		t.Errorf("overflow: %d %v", status, e)
	}
	// count_tokens still counts such a prompt.
	status, n, _ := ts.do(t, "POST", "/v1/messages/count_tokens", long)
	if status != 200 || n["input_tokens"].(float64) <= 256 {
		t.Errorf("count_tokens over the context: %d %v", status, n)
	}
	// OpenAI keeps its code.
	status, e, _ = ts.do(t, "POST", "/v1/chat/completions", map[string]any{"messages": long["messages"]})
	if status != 400 || jpath(e, "error", "code") != "context_length_exceeded" {
		t.Errorf("openai overflow: %d %v", status, e)
	}
}

// stream returns body with stream: true.
func stream(body map[string]any) map[string]any {
	out := map[string]any{"stream": true}
	for k, v := range body {
		out[k] = v
	}
	return out
}

// TestMessagesOutputFormat: output_config.format and output_format are
// enforced, other types refused (regression: they were ignored).
func TestMessagesOutputFormat(t *testing.T) {
	ts := newTestServer(t, serverOpts{})
	schema := map[string]any{"type": "object", "properties": map[string]any{"answer": map[string]any{"type": "string", "maxLength": 40}, "sure": map[string]any{"type": "boolean"}},
		"required": []any{"answer", "sure"}, "additionalProperties": false}
	validate := schemaValidator(t, schema)
	format := map[string]any{"type": "json_schema", "schema": schema}
	for _, extra := range []map[string]any{{"output_config": map[string]any{"format": format, "effort": "low"}}, {"output_format": format}} {
		body := map[string]any{"model": "claude-x", "max_tokens": 200, "temperature": 1, "messages": []any{map[string]any{"role": "user", "content": question}},
			"thinking": map[string]any{"type": "adaptive"}}
		for k, v := range extra {
			body[k] = v
		}
		status, msg, _ := ts.do(t, "POST", "/v1/messages", body)
		text, _ := jpath(msg, "content", 0, "text").(string)
		if status != 200 || msg["stop_reason"] != "end_turn" {
			t.Fatalf("%v: %d %v", extra, status, msg)
		}
		if err := validate(text); err != nil {
			t.Errorf("%v: %q: %v", extra, text, err)
		}
	}
	for _, bad := range []map[string]any{
		{"output_config": map[string]any{"format": map[string]any{"type": "yaml"}}},
		{"output_format": map[string]any{"type": "json_schema"}},
		{"output_config": map[string]any{"format": format}, "tool_choice": map[string]any{"type": "any"},
			"tools": []any{map[string]any{"name": "f", "input_schema": map[string]any{"type": "object"}}}},
	} {
		body := map[string]any{"max_tokens": 20, "messages": []any{map[string]any{"role": "user", "content": "hi"}}}
		for k, v := range bad {
			body[k] = v
		}
		if status, e, _ := ts.do(t, "POST", "/v1/messages", body); status != 400 || jpath(e, "error", "type") != "invalid_request_error" {
			t.Errorf("%v: %d %v", bad, status, e)
		}
	}
}

// codexTools are tools as Codex sends them: a function, a namespace of
// functions, a custom tool and a hosted one.
var codexTools = []any{
	map[string]any{"type": "function", "name": "exec_command", "strict": false, "parameters": map[string]any{"type": "object",
		"properties": map[string]any{"cmd": map[string]any{"type": "string", "maxLength": 20}}, "required": []any{"cmd"}, "additionalProperties": false}},
	map[string]any{"type": "namespace", "name": "multi_agent_v1", "description": "Sub-agents.", "tools": []any{
		map[string]any{"type": "function", "name": "close_agent", "parameters": map[string]any{"type": "object",
			"properties": map[string]any{"target": map[string]any{"type": "string", "enum": []any{"a1", "a2"}}}, "required": []any{"target"}}},
	}},
	map[string]any{"type": "custom", "name": "apply_patch", "description": "Apply a patch.", "format": map[string]any{"type": "text"}},
	map[string]any{"type": "web_search", "external_web_access": false},
}

// TestResponsesAsCodex: namespace tools are flattened and their calls
// mapped back, custom tools become custom_tool_call items, hosted tools
// are left out (regression: all three were refused).
func TestResponsesAsCodex(t *testing.T) {
	ts := newTestServer(t, serverOpts{})
	input := []any{map[string]any{"type": "message", "role": "developer", "content": []any{map[string]any{"type": "input_text", "text": "You are Codex."}}},
		map[string]any{"type": "message", "role": "user", "content": []any{map[string]any{"type": "input_text", "text": question}}}}
	base := map[string]any{"model": "glm52-mini", "input": input, "tools": codexTools, "max_output_tokens": 60, "store": false,
		"reasoning": map[string]any{"summary": "auto"}, "include": []any{"reasoning.encrypted_content"}, "parallel_tool_calls": true, "prompt_cache_key": "k"}
	status, resp, _ := ts.do(t, "POST", "/v1/responses", base)
	if status != 200 || resp["object"] != "response" {
		t.Fatalf("auto: %d %v", status, resp)
	}
	// Forced calls come back as the items Codex expects.
	forced := func(name string) map[string]any {
		b := stream(base)
		delete(b, "stream")
		b["tool_choice"] = map[string]any{"type": "function", "name": name}
		status, resp, _ := ts.do(t, "POST", "/v1/responses", b)
		if status != 200 {
			t.Fatalf("%s: %d %v", name, status, resp)
		}
		item, _ := jpath(resp, "output", 0).(map[string]any)
		return item
	}
	for _, choice := range []any{map[string]any{"type": "function", "name": "close_agent", "namespace": "multi_agent_v1"}, map[string]any{"type": "custom", "name": "apply_patch"}} {
		b := stream(base)
		delete(b, "stream")
		b["tool_choice"], b["max_output_tokens"] = choice, 4
		if status, resp, _ := ts.do(t, "POST", "/v1/responses", b); status != 200 {
			t.Errorf("tool_choice %v: %d %v", choice, status, resp)
		}
	}
	if it := forced("multi_agent_v1.close_agent"); it["type"] != "function_call" || it["name"] != "close_agent" || it["namespace"] != "multi_agent_v1" ||
		(it["arguments"] != `{"target":"a1"}` && it["arguments"] != `{"target":"a2"}`) {
		t.Errorf("namespaced call: %v", it)
	}
	// A custom tool's input is free text that no budget bounds: its
	// mapping is engine/api/responses' TestAnswerStream.
	if it := forced("exec_command"); it["type"] != "function_call" || it["name"] != "exec_command" || it["namespace"] != nil {
		t.Errorf("function call: %v", it)
	}
	// The next turn sends those calls back with their outputs.
	next := stream(base)
	next["input"] = append(append([]any{}, input...),
		map[string]any{"type": "function_call", "call_id": "c1", "name": "close_agent", "namespace": "multi_agent_v1", "arguments": `{"target":"a1"}`},
		map[string]any{"type": "function_call_output", "call_id": "c1", "output": "closed"},
		map[string]any{"type": "custom_tool_call", "call_id": "c2", "name": "apply_patch", "input": "*** Begin Patch"},
		map[string]any{"type": "custom_tool_call_output", "call_id": "c2", "output": "done"},
		map[string]any{"type": "web_search_call", "id": "ws_1", "status": "completed"},
		map[string]any{"type": "reasoning", "id": "rs_1", "summary": []any{}, "encrypted_content": "x"})
	var names []string
	for _, ev := range ts.stream(t, "/v1/responses", next) {
		names = append(names, ev.name)
	}
	if len(names) == 0 || names[len(names)-1] != "response.completed" && names[len(names)-1] != "response.incomplete" {
		t.Errorf("next turn events %v", names)
	}
	// The streamed forced call carries the namespace on both item events.
	b := stream(base)
	b["tool_choice"] = map[string]any{"type": "function", "name": "multi_agent_v1.close_agent"}
	for _, ev := range ts.stream(t, "/v1/responses", b) {
		if ev.name == "response.output_item.added" || ev.name == "response.output_item.done" {
			if item := decode(t, ev.data)["item"].(map[string]any); item["namespace"] != "multi_agent_v1" || item["name"] != "close_agent" {
				t.Errorf("%s: %v", ev.name, item)
			}
		}
	}
}

func mustRaw(t *testing.T, tools []any) []json.RawMessage {
	t.Helper()
	var out []json.RawMessage
	for _, tool := range tools {
		b, err := json.Marshal(tool)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

// TestModelsContext: /v1/models reports the served context under both
// names, and the root answers HEAD (Claude Code's first request).
func TestModelsContext(t *testing.T) {
	ts := newTestServer(t, serverOpts{sched: scheduler3()})
	_, body, _ := ts.do(t, "GET", "/v1/models", nil)
	if jpath(body, "data", 0, "context_length") != 256.0 || jpath(body, "data", 0, "max_model_len") != 256.0 {
		t.Errorf("models: %v", body)
	}
	for _, method := range []string{http.MethodHead, http.MethodGet} {
		req, _ := http.NewRequest(method, ts.URL+"/", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("%s /: %d", method, resp.StatusCode)
		}
	}
}

// TestResponsesKeepAliveEvents: while a Responses stream waits (queue,
// prefill) it repeats response.in_progress, an event, since Codex drops a
// stream that sends no event for five minutes (comments do not count).
func TestResponsesKeepAliveEvents(t *testing.T) {
	ts := newTestServer(t, serverOpts{sched: schedulerConfig{MaxBatch: 1, MaxQueue: 2}, noRun: true, cfg: Config{KeepAlive: 20 * time.Millisecond}})
	req, _ := http.NewRequest("POST", ts.URL+"/v1/responses", strings.NewReader(`{"input":"hi","stream":true}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var buf []byte
	for strings.Count(string(buf), "event: response.in_progress") < 3 {
		chunk := make([]byte, 256)
		n, err := resp.Body.Read(chunk)
		if err != nil {
			t.Fatalf("reading: %v after %q", err, buf)
		}
		buf = append(buf, chunk[:n]...)
	}
}
