package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/spoolhq/spool/engine/chat"
	"github.com/spoolhq/spool/engine/generate"
)

// greedyText is what generate.Generate gives for the demo question.
func greedyText(t *testing.T, maxTokens int) string {
	t.Helper()
	d := loadDemo(t)
	think := false
	_ = think
	text, err := d.tmpl.Render([]chat.Message{{Role: "user", Content: question}}, chat.Options{AddGenerationPrompt: true})
	if err != nil {
		t.Fatal(err)
	}
	m := d.dir.Model
	res, err := generate.Generate(context.Background(), m, m.NewSequence(0), d.tok.Encode(text), generate.Params{MaxTokens: maxTokens, StopTokens: m.Config().EOSTokenIDs}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(d.tok.Decode(res.Tokens, true))
}

// TestModelsAnthropicShape: an Anthropic client (the anthropic-version
// header its SDKs send) lists and retrieves models in Anthropic's shape,
// and is told of an unknown model in Anthropic's envelope.
func TestModelsAnthropicShape(t *testing.T) {
	ts := newTestServer(t, serverOpts{sched: schedulerConfig{ContextLength: 512}, cfg: Config{MaxTokens: 100}})
	av := []string{"anthropic-version", "2023-06-01"}
	status, body, _ := ts.do(t, "GET", "/v1/models", nil, av...)
	m, _ := jpath(body, "data", 0).(map[string]any)
	if status != 200 || body["has_more"] != false || body["first_id"] != "glm52-mini" || body["last_id"] != "glm52-mini" || body["object"] != nil || len(toSlice(body["data"])) != 1 {
		t.Fatalf("/v1/models: %d %v", status, body)
	}
	checkModel := func(m map[string]any, id string) {
		t.Helper()
		created, err := time.Parse(time.RFC3339, fmt.Sprint(m["created_at"]))
		if m["id"] != id || m["type"] != "model" || m["display_name"] != "glm52-mini" || err != nil || created.Unix() != ts.srv.created ||
			m["max_input_tokens"] != 512.0 || m["max_tokens"] != 100.0 || m["lifecycle"] != "active" || m["object"] != nil {
			t.Errorf("model %v (created: %v)", m, err)
		}
	}
	checkModel(m, "glm52-mini")
	status, body, _ = ts.do(t, "GET", "/v1/models/spool", nil, av...)
	if status != 200 {
		t.Fatalf("/v1/models/spool: %d %v", status, body)
	}
	checkModel(body, "glm52-mini")
	// A Claude name is served, as /v1/messages serves it.
	status, body, _ = ts.do(t, "GET", "/v1/models/claude-sonnet-4-6", nil, av...)
	if status != 200 {
		t.Fatalf("/v1/models/claude-sonnet-4-6: %d %v", status, body)
	}
	checkModel(body, "claude-sonnet-4-6")
	status, body, _ = ts.do(t, "GET", "/v1/models/gpt-9", nil, av...)
	if status != 404 || body["type"] != "error" || jpath(body, "error", "type") != "not_found_error" {
		t.Errorf("/v1/models/gpt-9: %d %v", status, body)
	}
	// Without the header, OpenAI's shape.
	if status, body, _ = ts.do(t, "GET", "/v1/models/claude-sonnet-4-6", nil); status != 404 || jpath(body, "error", "code") != "model_not_found" {
		t.Errorf("OpenAI /v1/models/claude-sonnet-4-6: %d %v", status, body)
	}
}

func TestModelsAndHealth(t *testing.T) {
	ts := newTestServer(t, serverOpts{})
	status, body, _ := ts.do(t, "GET", "/v1/models", nil)
	if status != 200 || body["object"] != "list" || jpath(body, "data", 0, "id") != "glm52-mini" || jpath(body, "data", 0, "object") != "model" {
		t.Fatalf("/v1/models: %d %v", status, body)
	}
	caps := jpath(body, "data", 0, "capabilities").(map[string]any)
	if caps["mtp"] != true || caps["structured_output"] != true || caps["tools"] != true {
		t.Errorf("capabilities %v", caps)
	}
	for _, id := range []string{"glm52-mini", "spool"} {
		if status, body, _ := ts.do(t, "GET", "/v1/models/"+id, nil); status != 200 || body["id"] != "glm52-mini" {
			t.Errorf("/v1/models/%s: %d %v", id, status, body)
		}
	}
	if status, body, _ := ts.do(t, "GET", "/health", nil); status != 200 || body["status"] != "ok" || len(body) != 1 {
		t.Errorf("/health: %d %v", status, body)
	}
	ts.do(t, "POST", "/v1/chat/completions", chatBody(nil))
	status, body, _ = ts.do(t, "GET", "/stats", nil)
	if status != 200 || jpath(body, "engine", "state") == nil || jpath(body, "last_turn", "lane") != "single" {
		t.Errorf("/stats: %d %v", status, body)
	}
	// The turn speculated: its gate's choice and each mode's cost per
	// token, for the turn and summed over the scheduler's turns.
	for _, at := range [][]any{{"last_turn", "drafting"}, {"engine", "scheduler", "drafting"}} {
		d, _ := jpath(body, at...).(map[string]any)
		if d == nil || d["choice"] == nil || d["acceptance"] == nil || jpath(d, "draft", "expert_bytes_per_token") == nil || jpath(d, "plain", "seconds_per_token") == nil {
			t.Errorf("/stats %v: %v, want the gate's choice, acceptance and each mode's cost", at, d)
		}
	}
}

func TestChatCompletion(t *testing.T) {
	ts := newTestServer(t, serverOpts{})
	want := greedyText(t, 24)
	status, body, _ := ts.do(t, "POST", "/v1/chat/completions", chatBody(nil))
	if status != 200 {
		t.Fatalf("status %d %v", status, body)
	}
	if got := jpath(body, "choices", 0, "message", "content"); got != want {
		t.Errorf("content %q, want generate's %q", got, want)
	}
	if body["object"] != "chat.completion" || jpath(body, "choices", 0, "message", "role") != "assistant" {
		t.Errorf("shape: %v", body)
	}
	u := body["usage"].(map[string]any)
	if u["prompt_tokens"].(float64) == 0 || u["total_tokens"].(float64) != u["prompt_tokens"].(float64)+u["completion_tokens"].(float64) || u["lane"] != "single" {
		t.Errorf("usage %v", u)
	}

	// Streaming gives the same text in deltas, then finish, usage, [DONE].
	evs := ts.stream(t, "/v1/chat/completions", chatBody(map[string]any{"stream": true, "stream_options": map[string]any{"include_usage": true}}))
	if len(evs) < 4 || evs[len(evs)-1].data != "[DONE]" {
		t.Fatalf("stream events %v", evs)
	}
	first := decode(t, evs[0].data)
	if jpath(first, "choices", 0, "delta", "role") != "assistant" {
		t.Errorf("first chunk %v", first)
	}
	var text string
	var finish any
	for _, ev := range evs[1 : len(evs)-2] {
		c := decode(t, ev.data)
		if s, ok := jpath(c, "choices", 0, "delta", "content").(string); ok {
			text += s
		}
		if f := jpath(c, "choices", 0, "finish_reason"); f != nil {
			finish = f
		}
	}
	if text != want || finish != jpath(body, "choices", 0, "finish_reason") {
		t.Errorf("streamed %q (%v), want %q", text, finish, want)
	}
	usage := decode(t, evs[len(evs)-2].data)
	if cs, _ := usage["choices"].([]any); cs == nil || len(cs) != 0 || jpath(usage, "usage", "completion_tokens") != u["completion_tokens"] {
		t.Errorf("usage chunk %v", usage)
	}
}

func TestStopStringsAndLogprobs(t *testing.T) {
	ts := newTestServer(t, serverOpts{})
	want := greedyText(t, 24)
	words := strings.Fields(want)
	if len(words) < 3 {
		t.Fatalf("greedy reply %q has fewer than three words: the test needs a longer one", want)
	}
	stop := words[2]
	_, body, _ := ts.do(t, "POST", "/v1/chat/completions", chatBody(map[string]any{"stop": []string{stop, "zzz"}}))
	got := jpath(body, "choices", 0, "message", "content").(string)
	if got != strings.TrimSpace(want[:strings.Index(want, stop)]) || jpath(body, "choices", 0, "finish_reason") != "stop" {
		t.Errorf("stop %q: %q (%v), reply %q", stop, got, jpath(body, "choices", 0, "finish_reason"), want)
	}
	_, body, _ = ts.do(t, "POST", "/v1/chat/completions", chatBody(map[string]any{"logprobs": true, "top_logprobs": 3, "max_tokens": 5}))
	lps, _ := jpath(body, "choices", 0, "logprobs", "content").([]any)
	if len(lps) == 0 {
		t.Fatalf("no logprobs: %v", body)
	}
	for _, lp := range lps {
		top, _ := jpath(lp, "top_logprobs").([]any)
		if len(top) != 3 || jpath(top[0], "token") != jpath(lp, "token") || jpath(lp, "logprob").(float64) > 0 {
			t.Errorf("logprob entry %v", lp)
		}
	}
}

func TestJSONSchema(t *testing.T) {
	ts := newTestServer(t, serverOpts{})
	schema := map[string]any{"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}, "n": map[string]any{"type": "integer"}}, "required": []string{"name", "n"}}
	for _, rf := range []map[string]any{
		{"type": "json_object"},
		{"type": "json_schema", "json_schema": map[string]any{"name": "thing", "schema": schema}},
	} {
		_, body, _ := ts.do(t, "POST", "/v1/chat/completions", chatBody(map[string]any{"response_format": rf, "max_tokens": 200, "temperature": 0.7, "seed": 4}))
		content, _ := jpath(body, "choices", 0, "message", "content").(string)
		var v map[string]any
		if err := json.Unmarshal([]byte(content), &v); err != nil {
			t.Errorf("%v: %q is not a JSON object (%v; finish %v)", rf["type"], content, err, jpath(body, "choices", 0, "finish_reason"))
			continue
		}
		if rf["type"] == "json_schema" {
			if _, ok := v["name"].(string); !ok {
				t.Errorf("schema output %v lacks a string name", v)
			}
			if n, ok := v["n"].(float64); !ok || n != float64(int64(n)) {
				t.Errorf("schema output %v lacks an integer n", v)
			}
		}
	}
	// Without a constrained decoder the formats are refused.
	plain := newTestServer(t, serverOpts{noAccess: true})
	if status, _, _ := plain.do(t, "POST", "/v1/chat/completions", chatBody(map[string]any{"response_format": map[string]any{"type": "json_object"}})); status != 400 {
		t.Errorf("json_object without a decoder: %d", status)
	}
}

func TestToolCalls(t *testing.T) {
	ts := newTestServer(t, serverOpts{})
	tools := []any{
		map[string]any{"type": "function", "function": map[string]any{"name": "get_weather", "parameters": map[string]any{
			"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string", "maxLength": 16}, "days": map[string]any{"type": "integer"}}, "required": []string{"city", "days"}}}},
		map[string]any{"type": "function", "function": map[string]any{"name": "now", "parameters": map[string]any{"type": "object", "properties": map[string]any{}}}},
	}
	for _, choice := range []any{"required", map[string]any{"type": "function", "function": map[string]any{"name": "get_weather"}}} {
		body := chatBody(map[string]any{"tools": tools, "tool_choice": choice, "max_tokens": 120})
		_, resp, _ := ts.do(t, "POST", "/v1/chat/completions", body)
		calls, _ := jpath(resp, "choices", 0, "message", "tool_calls").([]any)
		if len(calls) != 1 {
			t.Fatalf("tool_choice %v: %v", choice, resp)
		}
		finish := jpath(resp, "choices", 0, "finish_reason")
		if finish != "tool_calls" && finish != "length" {
			t.Errorf("finish %v", finish)
		}
		id, _ := jpath(calls[0], "id").(string)
		name := jpath(calls[0], "function", "name")
		var args map[string]any
		if err := json.Unmarshal([]byte(jpath(calls[0], "function", "arguments").(string)), &args); err != nil || !strings.HasPrefix(id, "call_") {
			t.Errorf("call %v: %v", calls[0], err)
		}
		if _, ok := choice.(map[string]any); ok && name != "get_weather" {
			t.Errorf("forced get_weather, called %v", name)
		}
		// The streamed form carries the call with index and id.
		body["stream"] = true
		var deltas []any
		for _, ev := range ts.stream(t, "/v1/chat/completions", body) {
			if ev.data == "[DONE]" {
				continue
			}
			if tc, ok := jpath(decode(t, ev.data), "choices", 0, "delta", "tool_calls").([]any); ok {
				deltas = append(deltas, tc...)
			}
		}
		if len(deltas) != 1 || jpath(deltas[0], "index") != 0.0 || jpath(deltas[0], "function", "name") == nil {
			t.Errorf("streamed tool calls %v", deltas)
		}
	}
	// The round trip: the call and its result go back in.
	msgs := []any{
		map[string]any{"role": "user", "content": "Weather in Paris?"},
		map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"id": "call_1", "type": "function", "function": map[string]any{"name": "get_weather", "arguments": `{"city":"Paris","days":1}`}}}},
		map[string]any{"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
	}
	status, resp, _ := ts.do(t, "POST", "/v1/chat/completions", map[string]any{"messages": msgs, "tools": tools, "max_tokens": 10, "temperature": 0})
	if status != 200 || jpath(resp, "choices", 0, "message", "role") != "assistant" {
		t.Errorf("round trip: %d %v", status, resp)
	}
}

// TestConcurrentClients: 16 clients at once are batched and each gets the
// reply it gets alone (greedy).
func TestConcurrentClients(t *testing.T) {
	ts := newTestServer(t, serverOpts{sched: schedulerConfig{MaxBatch: 8, MaxQueue: 16, IdleSequences: -1}})
	questions := []string{"os.path.join", "json.dumps", "re.sub", "itertools.chain", "math.floor", "str.split", "list.append", "dict.get"}
	body := func(i int) map[string]any {
		return map[string]any{"messages": []any{map[string]any{"role": "user", "content": "What does the function " + questions[i%len(questions)] + " do?"}}, "temperature": 0, "max_tokens": 16 + i}
	}
	alone := make([]string, 16)
	for i := range alone {
		_, resp, _ := ts.do(t, "POST", "/v1/chat/completions", body(i))
		alone[i] = fmt.Sprint(jpath(resp, "choices", 0, "message", "content"))
	}
	var wg sync.WaitGroup
	got := make([]map[string]any, 16)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			raw, _ := json.Marshal(body(i))
			resp, err := http.Post(ts.URL+"/v1/chat/completions", "application/json", strings.NewReader(string(raw)))
			if err != nil {
				return
			}
			defer resp.Body.Close()
			json.NewDecoder(resp.Body).Decode(&got[i])
		}()
	}
	wg.Wait()
	var lanes []string
	for i, resp := range got {
		if c := fmt.Sprint(jpath(resp, "choices", 0, "message", "content")); c != alone[i] {
			t.Errorf("client %d: batched %q, alone %q", i, c, alone[i])
		}
		lanes = append(lanes, fmt.Sprint(jpath(resp, "usage", "lane")))
	}
	if !slices.Contains(lanes, "batched") {
		t.Errorf("no request was batched: %v", lanes)
	}
}

// TestCancelOnDisconnect: a client that goes away frees its slot.
func TestCancelOnDisconnect(t *testing.T) {
	ts := newTestServer(t, serverOpts{sched: schedulerConfig{MaxBatch: 1, MaxQueue: 1}})
	ctx, cancel := context.WithCancel(context.Background())
	raw, _ := json.Marshal(chatBody(map[string]any{"stream": true, "max_tokens": 100000, "temperature": 1, "stop": nil}))
	req, _ := http.NewRequestWithContext(ctx, "POST", ts.URL+"/v1/chat/completions", strings.NewReader(string(raw)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	for n := 0; n < 3; {
		k, err := resp.Body.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		n += strings.Count(string(buf[:k]), "data:")
	}
	cancel()
	resp.Body.Close()
	// The slot frees: a new request is served (it would wait forever, or
	// be refused, if the first still held the only slot and queue).
	status, body, _ := ts.do(t, "POST", "/v1/chat/completions", chatBody(map[string]any{"max_tokens": 3}))
	if status != 200 {
		t.Fatalf("after disconnect: %d %v", status, body)
	}
	if r := ts.sched.Stats().LastRequest; r == nil || r.CompletionTokens != 3 {
		t.Errorf("last request %+v", r)
	}
}

func TestAnthropicMessages(t *testing.T) {
	ts := newTestServer(t, serverOpts{})
	want := greedyText(t, 24)
	req := map[string]any{"model": "claude-sonnet-4-5", "max_tokens": 24, "temperature": 0, "messages": []any{map[string]any{"role": "user", "content": question}}}
	status, body, _ := ts.do(t, "POST", "/v1/messages", req, "anthropic-version", "2023-06-01")
	if status != 200 || body["type"] != "message" || jpath(body, "content", 0, "type") != "text" || jpath(body, "content", 0, "text") != want {
		t.Fatalf("%d %v, want %q", status, body, want)
	}
	if r := body["stop_reason"]; r != "end_turn" && r != "max_tokens" {
		t.Errorf("stop_reason %v", r)
	}
	req["stream"] = true
	evs := ts.stream(t, "/v1/messages", req)
	var names []string
	var text string
	for _, ev := range evs {
		names = append(names, ev.name)
		if ev.name == "content_block_delta" {
			text += jpath(decode(t, ev.data), "delta", "text").(string)
		}
	}
	if names[0] != "message_start" || names[len(names)-1] != "message_stop" || names[len(names)-2] != "message_delta" || text != want {
		t.Errorf("events %v, text %q", names, text)
	}
	// Tools: a forced tool gives a tool_use block.
	req = map[string]any{"max_tokens": 80, "messages": []any{map[string]any{"role": "user", "content": "Weather?"}},
		"tools":       []any{map[string]any{"name": "get_weather", "input_schema": map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string", "maxLength": 16}}, "required": []string{"city"}}}},
		"tool_choice": map[string]any{"type": "tool", "name": "get_weather"}}
	_, body, _ = ts.do(t, "POST", "/v1/messages", req)
	blocks, _ := body["content"].([]any)
	last := blocks[len(blocks)-1]
	if jpath(last, "type") != "tool_use" || jpath(last, "name") != "get_weather" || !strings.HasPrefix(jpath(last, "id").(string), "toolu_") {
		t.Errorf("tool_use: %v", body)
	}
	// count_tokens.
	status, body, _ = ts.do(t, "POST", "/v1/messages/count_tokens", map[string]any{"messages": []any{map[string]any{"role": "user", "content": question}}})
	if status != 200 || body["input_tokens"].(float64) < 5 {
		t.Errorf("count_tokens %d %v", status, body)
	}
}

func TestResponses(t *testing.T) {
	ts := newTestServer(t, serverOpts{})
	want := greedyText(t, 24)
	status, body, _ := ts.do(t, "POST", "/v1/responses", map[string]any{"input": question, "max_output_tokens": 24, "temperature": 0})
	if status != 200 || body["object"] != "response" || body["output_text"] != want || jpath(body, "output", 0, "content", 0, "type") != "output_text" {
		t.Fatalf("%d %v, want %q", status, body, want)
	}
	id := body["id"].(string)
	// previous_response_id continues the conversation.
	status, body2, _ := ts.do(t, "POST", "/v1/responses", map[string]any{"input": "And os.path.split?", "previous_response_id": id, "max_output_tokens": 8, "temperature": 0})
	if status != 200 || jpath(body2, "usage", "input_tokens").(float64) <= jpath(body, "usage", "input_tokens").(float64) {
		t.Errorf("continuation: %d %v", status, body2)
	}
	if status, got, _ := ts.do(t, "GET", "/v1/responses/"+id, nil); status != 200 || got["id"] != id {
		t.Errorf("GET stored response: %d", status)
	}
	evs := ts.stream(t, "/v1/responses", map[string]any{"input": question, "max_output_tokens": 24, "temperature": 0, "stream": true})
	var text string
	for i, ev := range evs {
		d := decode(t, ev.data)
		if d["type"] != ev.name || d["sequence_number"] != float64(i) {
			t.Errorf("event %d: %s %v", i, ev.name, d)
		}
		if ev.name == "response.output_text.delta" {
			text += d["delta"].(string)
		}
	}
	if evs[0].name != "response.created" || evs[len(evs)-1].name != "response.completed" && evs[len(evs)-1].name != "response.incomplete" || text != want {
		t.Errorf("stream %v, text %q", evs, text)
	}
}

func TestCompletions(t *testing.T) {
	ts := newTestServer(t, serverOpts{})
	status, body, _ := ts.do(t, "POST", "/v1/completions", map[string]any{"prompt": "def join(a, b):", "max_tokens": 8, "temperature": 0, "logprobs": 2, "echo": true})
	text, _ := jpath(body, "choices", 0, "text").(string)
	if status != 200 || body["object"] != "text_completion" || !strings.HasPrefix(text, "def join(a, b):") || len(text) <= len("def join(a, b):") {
		t.Fatalf("%d %v", status, body)
	}
	if toks, _ := jpath(body, "choices", 0, "logprobs", "tokens").([]any); len(toks) == 0 {
		t.Errorf("no logprobs: %v", body)
	}
	evs := ts.stream(t, "/v1/completions", map[string]any{"prompt": "def join(a, b):", "max_tokens": 8, "temperature": 0, "stream": true})
	var streamed string
	for _, ev := range evs[:len(evs)-1] {
		streamed += jpath(decode(t, ev.data), "choices", 0, "text").(string)
	}
	if "def join(a, b):"+streamed != text || evs[len(evs)-1].data != "[DONE]" {
		t.Errorf("streamed %q, non-streamed %q", streamed, text)
	}
}

func TestEventsWebsocket(t *testing.T) {
	ts := newTestServer(t, serverOpts{cfg: Config{APIKey: "k"}})
	url := "ws" + strings.TrimPrefix(ts.URL, "http") + eventsPath
	if _, resp, err := websocket.DefaultDialer.Dial(url, nil); err == nil || resp.StatusCode != 401 {
		t.Fatalf("websocket without a key: %v", err)
	}
	if _, resp, err := websocket.DefaultDialer.Dial(url+"?api_key=k", http.Header{"Origin": {"https://evil.example.com"}}); err == nil || resp.StatusCode != 403 {
		t.Fatalf("websocket from a foreign origin: %v", err)
	}
	conn, _, err := websocket.DefaultDialer.Dial(url+"?api_key=k", http.Header{"Origin": {"wails://wails"}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var hello Event
	if err := conn.ReadJSON(&hello); err != nil || hello.Type != "hello" {
		t.Fatalf("hello: %v %v", hello, err)
	}
	raw, _ := json.Marshal(chatBody(nil))
	go func() {
		req, _ := http.NewRequest("POST", ts.URL+"/v1/chat/completions", strings.NewReader(string(raw)))
		req.Header.Set("Authorization", "Bearer k")
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	var text string
	for !strings.Contains(greedyText(t, 24), text) || text == "" {
		var ev Event
		if err := conn.ReadJSON(&ev); err != nil {
			t.Fatal(err)
		}
		if ev.Type == "token" {
			text += ev.Data.(map[string]any)["content"].(string)
		}
	}
	ts.srv.Publish(Event{Type: "download", Data: map[string]int{"done": 1}})
	for {
		var ev Event
		if err := conn.ReadJSON(&ev); err != nil {
			t.Fatal(err)
		}
		if ev.Type == "download" {
			break
		}
	}
}
