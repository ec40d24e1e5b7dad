package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/spoolhq/spool/engine/remote"
	"github.com/spoolhq/spool/engine/remote/standin"
)

var weatherTool = map[string]any{"name": "get_weather", "description": "Current weather", "input_schema": map[string]any{
	"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}, "days": map[string]any{"type": "integer"}}, "required": []string{"city", "days"}}}

func TestRemoteMessagesRequest(t *testing.T) {
	ts, vs := newStandinFront(t, standin.Options{}, Config{}, remote.Config{})
	status, resp, _ := ts.do(t, "POST", "/v1/messages", map[string]any{
		"model": "claude-sonnet-4-5", "max_tokens": 64, "system": []any{map[string]any{"type": "text", "text": "Be brief."}},
		"temperature": 0.2, "top_p": 0.9, "top_k": 40, "stop_sequences": []string{"###"},
		"thinking": map[string]any{"type": "disabled"},
		"tools":    []any{weatherTool}, "tool_choice": map[string]any{"type": "tool", "name": "get_weather"},
		"messages": []any{map[string]any{"role": "user", "content": "Weather in Paris?"}},
	})
	if status != 200 {
		t.Fatalf("%d %v", status, resp)
	}
	got, _ := vs.Last("/v1/chat/completions")
	b := got.Body
	if b["model"] != "glm-5.2-fp8" || b["max_tokens"] != 64.0 || b["temperature"] != 0.2 || b["top_p"] != 0.9 || b["top_k"] != 40.0 ||
		jpath(b, "stop", 0) != "###" || jpath(b, "chat_template_kwargs", "enable_thinking") != false ||
		jpath(b, "messages", 0, "role") != "system" || jpath(b, "messages", 0, "content") != "Be brief." ||
		jpath(b, "messages", 1, "content") != "Weather in Paris?" ||
		jpath(b, "tools", 0, "function", "name") != "get_weather" || jpath(b, "tools", 0, "function", "parameters", "required", 0) != "city" ||
		jpath(b, "tool_choice", "function", "name") != "get_weather" || b["stream"] != nil {
		t.Fatalf("the remote got %v", b)
	}
	// The reply: one tool_use block with the parsed input.
	if resp["type"] != "message" || resp["stop_reason"] != "tool_use" || jpath(resp, "content", 0, "type") != "tool_use" ||
		jpath(resp, "content", 0, "name") != "get_weather" || jpath(resp, "content", 0, "input", "city") != "Paris" || jpath(resp, "content", 0, "input", "days") != 3.0 ||
		!strings.HasPrefix(jpath(resp, "content", 0, "id").(string), "toolu_") || jpath(resp, "usage", "output_tokens") == 0.0 || jpath(resp, "usage", "input_tokens") == 0.0 {
		t.Fatalf("%v", resp)
	}
	id := jpath(resp, "content", 0, "id").(string)

	// The round trip: tool_use and tool_result go back as the OpenAI call
	// and tool message.
	status, resp, _ = ts.do(t, "POST", "/v1/messages", map[string]any{
		"max_tokens": 64, "tools": []any{weatherTool},
		"messages": []any{
			map[string]any{"role": "user", "content": "Weather in Paris?"},
			map[string]any{"role": "assistant", "content": []any{
				map[string]any{"type": "thinking", "thinking": "I should call the tool.", "signature": ""},
				map[string]any{"type": "tool_use", "id": id, "name": "get_weather", "input": map[string]any{"city": "Paris", "days": 1}}}},
			map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": id, "content": "sunny"}}},
		},
	})
	got, _ = vs.Last("/v1/chat/completions")
	if jpath(got.Body, "messages", 1, "tool_calls", 0, "function", "arguments") != `{"city": "Paris", "days": 1}` && jpath(got.Body, "messages", 1, "tool_calls", 0, "function", "arguments") != `{"city":"Paris","days":1}` {
		t.Fatalf("arguments are not a JSON text: %v", jpath(got.Body, "messages", 1))
	}
	if jpath(got.Body, "messages", 1, "tool_calls", 0, "id") != id || jpath(got.Body, "messages", 1, "reasoning_content") != "I should call the tool." ||
		jpath(got.Body, "messages", 2, "role") != "tool" || jpath(got.Body, "messages", 2, "tool_call_id") != id || jpath(got.Body, "messages", 2, "content") != "sunny" {
		t.Fatalf("the remote got %v", got.Body["messages"])
	}
	if status != 200 || jpath(resp, "content", 0, "text") != "The tool said: sunny" || resp["stop_reason"] != "end_turn" {
		t.Fatalf("%d %v", status, resp)
	}

	// Thinking, a stop sequence, and max_tokens.
	status, resp, _ = ts.do(t, "POST", "/v1/messages", map[string]any{"max_tokens": 64, "stop_sequences": []string{"c d"}, "thinking": map[string]any{"type": "enabled", "budget_tokens": 1024},
		"messages": []any{map[string]any{"role": "user", "content": "a b c d e [[think]]"}}})
	if status != 200 || jpath(resp, "content", 0, "type") != "thinking" || jpath(resp, "content", 0, "thinking") != "Let me think about that." ||
		jpath(resp, "content", 1, "text") != "You said: a b" || resp["stop_reason"] != "stop_sequence" || resp["stop_sequence"] != "c d" {
		t.Fatalf("%d %v", status, resp)
	}
	// Structured output asks the remote for the schema.
	schema := map[string]any{"type": "object", "properties": map[string]any{"answer": map[string]any{"type": "string"}}, "required": []string{"answer"}}
	status, _, _ = ts.do(t, "POST", "/v1/messages", map[string]any{"max_tokens": 9, "output_config": map[string]any{"format": map[string]any{"type": "json_schema", "schema": schema}},
		"messages": []any{map[string]any{"role": "user", "content": "x"}}})
	got, _ = vs.Last("/v1/chat/completions")
	if status != 200 || jpath(got.Body, "response_format", "type") != "json_schema" || jpath(got.Body, "response_format", "json_schema", "schema", "required", 0) != "answer" {
		t.Fatalf("%d %v", status, got.Body)
	}
	status, resp, _ = ts.do(t, "POST", "/v1/messages", map[string]any{"max_tokens": 2, "messages": []any{map[string]any{"role": "user", "content": "a b c"}}})
	if status != 200 || resp["stop_reason"] != "max_tokens" || jpath(resp, "content", 0, "text") != "You said:" {
		t.Fatalf("%d %v", status, resp)
	}
	for _, bad := range []map[string]any{
		{"messages": []any{map[string]any{"role": "user", "content": "x"}}},
		{"max_tokens": 5, "messages": []any{}},
		{"max_tokens": 5, "model": "gpt-9", "messages": []any{map[string]any{"role": "user", "content": "x"}}},
		{"max_tokens": 5, "tool_choice": map[string]any{"type": "tool", "name": "nope"}, "tools": []any{weatherTool}, "messages": []any{map[string]any{"role": "user", "content": "x"}}},
		{"max_tokens": 5, "thinking": map[string]any{"type": "maybe"}, "messages": []any{map[string]any{"role": "user", "content": "x"}}},
		{"max_tokens": 5, "output_format": map[string]any{"type": "regex"}, "messages": []any{map[string]any{"role": "user", "content": "x"}}},
	} {
		status, resp, _ := ts.do(t, "POST", "/v1/messages", bad)
		if status/100 != 4 || resp["type"] != "error" {
			t.Errorf("%v: %d %v", bad, status, resp)
		}
	}
}

// messagesEvents reads an Anthropic stream into its events.
func messagesEvents(t *testing.T, ts *testServer, body map[string]any) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, ev := range ts.stream(t, "/v1/messages", body) {
		d := decode(t, ev.data)
		if d["type"] != ev.name {
			t.Fatalf("event %s carries type %v", ev.name, d["type"])
		}
		out = append(out, d)
	}
	return out
}

func TestRemoteMessagesStream(t *testing.T) {
	ts, _ := newStandinFront(t, standin.Options{}, Config{}, remote.Config{})
	evs := messagesEvents(t, ts.testServer, map[string]any{"max_tokens": 64, "stream": true, "messages": []any{map[string]any{"role": "user", "content": "x y [[think]]"}}})
	var kinds []string
	var thinking, text string
	for _, e := range evs {
		kinds = append(kinds, e["type"].(string))
		switch jpath(e, "delta", "type") {
		case "thinking_delta":
			thinking += jpath(e, "delta", "thinking").(string)
		case "text_delta":
			text += jpath(e, "delta", "text").(string)
		}
	}
	want := "message_start content_block_start content_block_delta content_block_delta content_block_delta content_block_delta content_block_delta content_block_stop " +
		"content_block_start content_block_delta content_block_delta content_block_delta content_block_delta content_block_stop message_delta message_stop"
	if strings.Join(kinds, " ") != want || thinking != "Let me think about that. " || text != "You said: x y" {
		t.Fatalf("%s\n%q %q", kinds, thinking, text)
	}
	if jpath(evs[1], "content_block", "type") != "thinking" || jpath(evs[8], "index") != 1.0 || jpath(evs[len(evs)-2], "delta", "stop_reason") != "end_turn" ||
		jpath(evs[len(evs)-2], "usage", "output_tokens") != 9.0 || jpath(evs[0], "message", "model") != "glm-5.2-fp8" {
		t.Fatalf("%v", evs)
	}

	// Two tool calls, their arguments split across chunks.
	evs = messagesEvents(t, ts.testServer, map[string]any{"max_tokens": 64, "stream": true, "tools": []any{weatherTool, map[string]any{"name": "now", "input_schema": map[string]any{"type": "object"}}},
		"messages": []any{map[string]any{"role": "user", "content": "both [[two-tools]]"}}})
	inputs := map[float64]string{}
	var names []string
	for _, e := range evs {
		if jpath(e, "content_block", "type") == "tool_use" {
			names = append(names, jpath(e, "content_block", "name").(string))
		}
		if jpath(e, "delta", "type") == "input_json_delta" {
			inputs[jpath(e, "index").(float64)] += jpath(e, "delta", "partial_json").(string)
		}
	}
	if strings.Join(names, ",") != "get_weather,now" || inputs[0] != `{"city":"Paris","days":3}` || inputs[1] != `{}` ||
		jpath(evs[len(evs)-2], "delta", "stop_reason") != "tool_use" {
		t.Fatalf("%v %v %v", names, inputs, evs)
	}
}

// A remote that interleaves two calls' deltas, or never names a call,
// ends the Anthropic stream with an error rather than a wrong block.
func TestRemoteMessagesBadToolStreams(t *testing.T) {
	chunks := map[string][]string{
		"interleaved": {
			`{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"f","arguments":"{\"x\""}}]}}]}`,
			`{"choices":[{"delta":{"tool_calls":[{"index":1,"id":"b","function":{"name":"g","arguments":"{"}}]}}]}`,
			`{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":":1}"}}]}}]}`,
		},
		"nameless": {`{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{}"}}]}}]}`, `{"choices":[{"delta":{},"finish_reason":"tool_calls"}]}`},
		"not json": {`{"choices":[`},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/models", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(`{"data":[{"id":"m"}]}`)) })
	mux.HandleFunc("/v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Messages []struct{ Content string }
		}
		json.NewDecoder(r.Body).Decode(&body)
		w.Header().Set("Content-Type", "text/event-stream")
		for _, c := range chunks[body.Messages[0].Content] {
			fmt.Fprintf(w, "data: %s\n\n", c)
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
	})
	hs := httptest.NewServer(mux)
	defer hs.Close()
	ts := newRemoteFront(t, hs.URL, Config{}, remote.Config{})
	for name, want := range map[string]string{"interleaved": "interleaved", "nameless": "without its name", "not json": "not JSON"} {
		evs := messagesEvents(t, ts.testServer, map[string]any{"max_tokens": 9, "stream": true, "messages": []any{map[string]any{"role": "user", "content": name}}})
		last := evs[len(evs)-1]
		if last["type"] != "error" || !strings.Contains(jpath(last, "error", "message").(string), want) {
			t.Errorf("%s: %v", name, evs)
		}
	}
}

func TestRemoteCountTokens(t *testing.T) {
	ts, vs := newStandinFront(t, standin.Options{}, Config{}, remote.Config{})
	status, resp, _ := ts.do(t, "POST", "/v1/messages/count_tokens", map[string]any{"model": "claude-haiku-4", "system": "Be brief.",
		"messages": []any{map[string]any{"role": "user", "content": "one two three"}}})
	if status != 200 || resp["input_tokens"] != 13.0 {
		t.Fatalf("%d %v", status, resp)
	}
	if got, _ := vs.Last("/tokenize"); got.Body["add_generation_prompt"] != true || jpath(got.Body, "messages", 0, "role") != "system" {
		t.Fatalf("%v", got.Body)
	}
}

// An output limit over the remote's context is capped to the rest of it,
// as the local engine does; a prompt over it is "prompt is too long" with
// its figures, which Claude Code compacts on.
func TestRemoteMessagesContext(t *testing.T) {
	ts, vs := newStandinFront(t, standin.Options{MaxModelLen: 1000}, Config{}, remote.Config{})
	before := len(vs.Requests())
	status, resp, _ := ts.do(t, "POST", "/v1/messages", map[string]any{"max_tokens": 32000, "messages": []any{map[string]any{"role": "user", "content": "a b c"}}})
	var reqs []standin.Request
	for _, r := range vs.Requests()[before:] {
		if r.Path == "/v1/chat/completions" {
			reqs = append(reqs, r)
		}
	}
	if status != 200 || resp["stop_reason"] != "end_turn" || len(reqs) != 2 || reqs[0].Body["max_tokens"] != 32000.0 || reqs[1].Body["max_tokens"] != 993.0 {
		t.Fatalf("%d %v %d requests", status, resp, len(reqs))
	}
	evs := messagesEvents(t, ts.testServer, map[string]any{"max_tokens": 32000, "stream": true, "messages": []any{map[string]any{"role": "user", "content": "a b c"}}})
	if jpath(evs[len(evs)-2], "delta", "stop_reason") != "end_turn" {
		t.Fatalf("%v", evs)
	}
	long := strings.Repeat("word ", 1200)
	status, resp, _ = ts.do(t, "POST", "/v1/messages", map[string]any{"max_tokens": 10, "messages": []any{map[string]any{"role": "user", "content": long}}})
	if status != 400 || jpath(resp, "error", "type") != "invalid_request_error" || jpath(resp, "error", "message") != "prompt is too long: 1204 tokens > 1000 maximum" {
		t.Fatalf("%d %v", status, resp)
	}
}
