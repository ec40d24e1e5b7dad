package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/spoolhq/spool/engine/api/ollama"
	"github.com/spoolhq/spool/engine/turn"
)

// ndjson posts body and reads the NDJSON lines to the end.
func (ts *testServer) ndjson(t *testing.T, path string, body any) []map[string]any {
	t.Helper()
	resp := ts.post(t, context.Background(), path, body)
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/x-ndjson" {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("stream %s: status %d %s %s", path, resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	return readNDJSON(t, resp.Body)
}

func readNDJSON(t *testing.T, r io.Reader) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		out = append(out, decode(t, sc.Text()))
	}
	return out
}

func ollamaChatBody(extra map[string]any) map[string]any {
	b := map[string]any{"model": "glm52-mini", "messages": []any{map[string]any{"role": "user", "content": question}},
		"stream": false, "options": map[string]any{"temperature": 0, "num_predict": 24}}
	for k, v := range extra {
		b[k] = v
	}
	return b
}

func TestOllamaDiscovery(t *testing.T) {
	fp := ModelFootprint{DiskBytes: 31 << 20, MemoryBytes: 600 << 20, GPUBytes: 100 << 20}
	ts := newTestServer(t, serverOpts{sched: schedulerConfig{ContextLength: 2048}, footprint: fp})
	status, v, _ := ts.do(t, "GET", "/api/version", nil)
	if status != 200 || v["version"] != ollama.Version {
		t.Errorf("version: %d %v", status, v)
	}
	status, tags, _ := ts.do(t, "GET", "/api/tags", nil)
	if status != 200 || jpath(tags, "models", 0, "name") != "glm52-mini" || jpath(tags, "models", 0, "model") != "glm52-mini" ||
		jpath(tags, "models", 0, "details", "format") == nil || jpath(tags, "models", 0, "digest") == "" ||
		jpath(tags, "models", 0, "size") != float64(fp.DiskBytes) {
		t.Errorf("tags: %d %v", status, tags)
	}
	for _, name := range []string{"glm52-mini", "glm52-mini:latest", "spool"} {
		status, show, _ := ts.do(t, "POST", "/api/show", map[string]any{"model": name})
		if status != 200 {
			t.Fatalf("show %s: %d %v", name, status, show)
		}
		arch, _ := jpath(show, "model_info", "general.architecture").(string)
		if arch == "" || jpath(show, "model_info", arch+".context_length") != float64(2048) {
			t.Errorf("show %s: model_info %v", name, show["model_info"])
		}
		caps, _ := show["capabilities"].([]any)
		if len(caps) != 3 || caps[0] != "completion" || caps[1] != "tools" || caps[2] != "thinking" {
			t.Errorf("show %s: capabilities %v", name, caps)
		}
		if jpath(show, "details", "family") != arch || !strings.Contains(show["template"].(string), "<|assistant|>") {
			t.Errorf("show %s: details %v template %.80q", name, show["details"], show["template"])
		}
	}
	// Older clients name the model "name".
	if status, _, _ := ts.do(t, "POST", "/api/show", map[string]any{"name": "glm52-mini"}); status != 200 {
		t.Errorf("show by name: %d", status)
	}
	status, ps, _ := ts.do(t, "GET", "/api/ps", nil)
	if status != 200 || jpath(ps, "models", 0, "name") != "glm52-mini" || jpath(ps, "models", 0, "context_length") != float64(2048) ||
		!strings.HasPrefix(jpath(ps, "models", 0, "expires_at").(string), "2") ||
		jpath(ps, "models", 0, "size") != float64(fp.MemoryBytes) || jpath(ps, "models", 0, "size_vram") != float64(fp.GPUBytes) {
		t.Errorf("ps: %d %v", status, ps)
	}
}

func TestOllamaErrors(t *testing.T) {
	ts := newTestServer(t, serverOpts{cfg: Config{APIKey: "k"}})
	for _, c := range []struct {
		method, path string
		body         any
		status       int
		want         string
	}{
		{"POST", "/api/show", map[string]any{"model": "llama3"}, 404, `model "llama3" not found`},
		{"POST", "/api/chat", map[string]any{"model": "nope:7b", "messages": []any{}}, 404, "not found"},
		{"POST", "/api/generate", map[string]any{"model": "glm52-mini", "prompt": "x", "options": map[string]any{"temperature": "hot"}}, 400, "options.temperature must be a number"},
		{"POST", "/api/chat", `{"model":"glm52-mini","messages":[{"role":"user","content":"x"}],"think":"very"}`, 400, "think must be"},
		{"POST", "/api/chat", `{"model":"glm52-mini","messages":[{"role":"user","content":"x"}],"keep_alive":"soon"}`, 400, "keep_alive"},
		{"POST", "/api/chat", `{"model":"glm52-mini","messages":[{"role":"user","content":"x"}],"format":"yaml"}`, 400, "format must be"},
		{"POST", "/api/chat", `{"model":"glm52-mini","messages":[{"role":"user","content":"x","images":["aGk="]}]}`, 400, "images"},
		{"POST", "/api/chat", `{"model":"glm52-mini","messages":[{"role":"user","content":"x"}],"options":{"num_ctx":3}}`, 400, "options.num_ctx"},
		{"POST", "/api/chat", `{"model":"glm52-mini","messages":"hi"}`, 400, "messages"},
		{"POST", "/api/chat", `not json`, 400, "JSON object"},
		{"POST", "/api/generate", map[string]any{"model": "glm52-mini", "prompt": "x", "suffix": "y"}, 400, "suffix"},
		{"POST", "/api/generate", map[string]any{"model": "glm52-mini", "prompt": "x", "context": []int{1 << 20}}, 400, "context token id"},
		{"POST", "/api/embed", map[string]any{"model": "glm52-mini", "input": []string{"x", ""}}, 400, "input[1] is empty"},
		{"POST", "/api/embed", map[string]any{"model": "bge-m3", "input": "x"}, 404, "not found"},
		{"POST", "/api/pull", map[string]any{"model": "llama3"}, 404, "spool pull"},
		{"GET", "/api/nothing", nil, 404, "no route"},
	} {
		status, body, _ := ts.do(t, c.method, c.path, c.body)
		msg, _ := body["error"].(string)
		if status != c.status || !strings.Contains(msg, c.want) {
			t.Errorf("%s %s %v: %d %v, want %d %q", c.method, c.path, c.body, status, body, c.status, c.want)
		}
	}
	// The guards answer in Ollama's shape too.
	req, _ := http.NewRequest("GET", ts.URL+"/api/tags", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 401 || !strings.Contains(decode(t, string(raw))["error"].(string), "API key") {
		t.Errorf("no key: %d %s", resp.StatusCode, raw)
	}
}

// TestOllamaChat: greedy streamed text equals the non-streamed answer and
// the /v1/chat/completions one (one pipeline), with Ollama's timings.
func TestOllamaChat(t *testing.T) {
	ts := newTestServer(t, serverOpts{})
	status, whole, _ := ts.do(t, "POST", "/api/chat", ollamaChatBody(nil))
	if status != 200 || whole["done"] != true || jpath(whole, "message", "role") != "assistant" {
		t.Fatalf("chat: %d %v", status, whole)
	}
	content := jpath(whole, "message", "content").(string)
	_, oa, _ := ts.do(t, "POST", "/v1/chat/completions", chatBody(nil))
	if content == "" {
		t.Fatalf("empty reply: %v", whole)
	}
	for _, k := range []string{"total_duration", "load_duration", "prompt_eval_count", "prompt_eval_duration", "eval_count", "eval_duration"} {
		if n, _ := whole[k].(float64); n <= 0 {
			t.Errorf("%s = %v", k, whole[k])
		}
	}
	if n := whole["eval_count"].(float64); n > 24 || (whole["done_reason"] == "length") != (n == 24) || (n < 24 && whole["done_reason"] != "stop") {
		t.Errorf("done_reason %v eval_count %v (num_predict 24)", whole["done_reason"], whole["eval_count"])
	}
	if jpath(oa, "choices", 0, "finish_reason") != whole["done_reason"] || jpath(oa, "usage", "completion_tokens") != whole["eval_count"] {
		t.Errorf("/v1 finish %v completion %v, /api done %v eval %v", jpath(oa, "choices", 0, "finish_reason"), jpath(oa, "usage", "completion_tokens"), whole["done_reason"], whole["eval_count"])
	}
	if got := jpath(oa, "choices", 0, "message", "content"); got != content {
		t.Errorf("/v1/chat/completions %q != /api/chat %q", got, content)
	}
	if jpath(oa, "usage", "prompt_tokens") != whole["prompt_eval_count"] {
		t.Errorf("prompt tokens %v != prompt_eval_count %v", jpath(oa, "usage", "prompt_tokens"), whole["prompt_eval_count"])
	}

	lines := ts.ndjson(t, "/api/chat", ollamaChatBody(map[string]any{"stream": true}))
	var streamed strings.Builder
	for i, l := range lines {
		last := i == len(lines)-1
		if l["done"] != last || l["model"] != "glm52-mini" || l["created_at"] == "" {
			t.Fatalf("line %d of %d: %v", i, len(lines), l)
		}
		streamed.WriteString(jpath(l, "message", "content").(string))
	}
	if streamed.String() != content {
		t.Errorf("streamed %q != whole %q", streamed.String(), content)
	}
	final := lines[len(lines)-1]
	if final["done_reason"] != whole["done_reason"] || final["eval_count"] != whole["eval_count"] || final["prompt_eval_count"] != whole["prompt_eval_count"] {
		t.Errorf("final line %v", final)
	}

	// Stop strings and the Ollama default of streaming.
	cut := content[:len(content)/2]
	stop := content[len(cut):min(len(content), len(cut)+3)]
	lines = ts.ndjson(t, "/api/chat", map[string]any{"model": "glm52-mini", "messages": []any{map[string]any{"role": "user", "content": question}},
		"options": map[string]any{"temperature": 0, "num_predict": 24, "stop": []string{stop}}})
	streamed.Reset()
	for _, l := range lines {
		streamed.WriteString(jpath(l, "message", "content").(string))
	}
	if strings.Contains(streamed.String(), stop) || !strings.HasPrefix(content, streamed.String()) || lines[len(lines)-1]["done_reason"] != "stop" {
		t.Errorf("stop %q: %q, %v", stop, streamed.String(), lines[len(lines)-1])
	}

	// A load request (no messages) answers at once.
	status, load, _ := ts.do(t, "POST", "/api/chat", map[string]any{"model": "glm52-mini", "messages": []any{}, "keep_alive": -1})
	if status != 200 || load["done"] != true || load["done_reason"] != "load" {
		t.Errorf("load: %d %v", status, load)
	}
}

// TestOllamaGenerate: through the chat template (with system) and raw;
// streamed equals whole; context continues a conversation.
func TestOllamaGenerate(t *testing.T) {
	ts := newTestServer(t, serverOpts{})
	body := map[string]any{"model": "glm52-mini", "prompt": question, "stream": false, "keep_alive": "5m",
		"options": map[string]any{"temperature": 0, "num_predict": 16, "repeat_penalty": 1.1, "num_gpu": 99}}
	status, whole, _ := ts.do(t, "POST", "/api/generate", body)
	if status != 200 || whole["done"] != true {
		t.Fatalf("generate: %d %v", status, whole)
	}
	// The same turn as /api/chat with one user message.
	_, chatted, _ := ts.do(t, "POST", "/api/chat", ollamaChatBody(map[string]any{"options": map[string]any{"temperature": 0, "num_predict": 16}}))
	if whole["response"] != jpath(chatted, "message", "content") {
		t.Errorf("generate %q != chat %q", whole["response"], jpath(chatted, "message", "content"))
	}
	ctx, _ := whole["context"].([]any)
	if len(ctx) != int(whole["prompt_eval_count"].(float64)+whole["eval_count"].(float64)) {
		t.Errorf("context has %d tokens, want prompt %v + output %v", len(ctx), whole["prompt_eval_count"], whole["eval_count"])
	}
	body["stream"] = true
	var streamed strings.Builder
	lines := ts.ndjson(t, "/api/generate", body)
	for _, l := range lines {
		streamed.WriteString(l["response"].(string))
	}
	if streamed.String() != whole["response"] || lines[len(lines)-1]["done"] != true {
		t.Errorf("streamed %q != whole %q", streamed.String(), whole["response"])
	}
	streamedCtx, _ := json.Marshal(lines[len(lines)-1]["context"])
	if wholeCtx, _ := json.Marshal(ctx); string(streamedCtx) != string(wholeCtx) {
		t.Errorf("streamed context %s, whole %s", streamedCtx, wholeCtx)
	}

	// A load request (no prompt) answers at once, with no context.
	status, load, _ := ts.do(t, "POST", "/api/generate", map[string]any{"model": "glm52-mini"})
	if status != 200 || load["done"] != true || load["done_reason"] != "load" || load["response"] != "" || load["context"] != nil {
		t.Errorf("load: %d %v", status, load)
	}

	// raw: the prompt as it is, like /v1/completions.
	status, raw, _ := ts.do(t, "POST", "/api/generate", map[string]any{"model": "glm52-mini", "prompt": "def join(", "raw": true, "stream": false,
		"options": map[string]any{"temperature": 0, "num_predict": 8}})
	_, comp, _ := ts.do(t, "POST", "/v1/completions", map[string]any{"model": "glm52-mini", "prompt": "def join(", "temperature": 0, "max_tokens": 8})
	if status != 200 || raw["response"] != jpath(comp, "choices", 0, "text") || raw["context"] != nil {
		t.Errorf("raw %d %v; completions %v", status, raw, jpath(comp, "choices", 0, "text"))
	}

	// With context, the prompt continues the earlier exchange.
	status, next, _ := ts.do(t, "POST", "/api/generate", map[string]any{"model": "glm52-mini", "prompt": "And os.path.split?", "context": ctx, "stream": false,
		"system": "Answer briefly.", "options": map[string]any{"temperature": 0, "num_predict": 4}})
	if status != 200 || next["prompt_eval_count"].(float64) <= float64(len(ctx)) {
		t.Errorf("continued: %d %v", status, next)
	}
}

// TestOllamaFormat: "json" and a JSON schema go through the grammar.
func TestOllamaFormat(t *testing.T) {
	ts := newTestServer(t, serverOpts{})
	schema := map[string]any{"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string", "maxLength": 12}, "n": map[string]any{"type": "integer"}}, "required": []string{"name", "n"}}
	validate := schemaValidator(t, schema)
	for _, format := range []any{"json", schema} {
		status, out, _ := ts.do(t, "POST", "/api/chat", ollamaChatBody(map[string]any{"format": format, "options": map[string]any{"temperature": 0.7, "seed": 4, "num_predict": 200}}))
		content, _ := jpath(out, "message", "content").(string)
		var v map[string]any
		if status != 200 || json.Unmarshal([]byte(content), &v) != nil {
			t.Errorf("format %v: %d %q is not a JSON object (%v)", format, status, content, out["done_reason"])
			continue
		}
		if _, ok := format.(map[string]any); ok {
			if err := validate(content); err != nil {
				t.Errorf("format schema: %q: %v", content, err)
			}
		}
	}
}

// TestOllamaToolCalls: tools reach the template, tool turns (tool_name)
// render, and calls come back in Ollama's shape (arguments an object),
// streamed and not.
func TestOllamaToolCalls(t *testing.T) {
	ts := newTestServer(t, serverOpts{})
	tools := []any{map[string]any{"type": "function", "function": map[string]any{"name": "forecast", "description": "Weather", "parameters": forecastParams}}}
	history := []any{
		map[string]any{"role": "user", "content": "Weather in Oslo?"},
		map[string]any{"role": "assistant", "content": "", "thinking": "I should call it", "tool_calls": []any{
			map[string]any{"function": map[string]any{"name": "forecast", "arguments": map[string]any{"city": "Oslo", "unit": "c", "kind": "forecast"}}}}},
		map[string]any{"role": "tool", "tool_name": "forecast", "content": "sunny, 21 degrees"},
	}
	req := ollama.ChatRequest{Model: "glm52-mini"}
	raw, _ := json.Marshal(map[string]any{"model": "glm52-mini", "messages": history, "tools": tools, "options": map[string]any{"temperature": 0, "num_predict": 40}})
	if err := decodeJSON(raw, &req); err != nil {
		t.Fatal(err)
	}
	c := &ollama.Call{}
	tu, err := req.Turn("ollama-1", c)
	if err != nil {
		t.Fatal(err)
	}
	ids, parse, err := ts.srv.local.Prompt(context.Background(), tu)
	if err != nil {
		t.Fatal(err)
	}
	prompt := ts.srv.eng.Tokenizer.Decode(ids, false)
	for _, want := range []string{"forecast", "Oslo", "sunny, 21 degrees", "Weather"} {
		if !strings.Contains(prompt, want) {
			t.Errorf("prompt lacks %q:\n%s", want, prompt)
		}
	}
	if !c.Stream || len(parse.Tools) == 0 {
		t.Errorf("stream %v tools %v", c.Stream, parse.Tools)
	}

	// Calls out: the turn is forced to call forecast (the demo model does
	// not call tools by itself), then answered by Ollama's writer.
	validate := schemaValidator(t, forecastParams)
	for _, stream := range []bool{false, true} {
		raw, _ := json.Marshal(map[string]any{"model": "glm52-mini", "messages": history[:1], "tools": tools, "stream": stream,
			"options": map[string]any{"temperature": 0, "num_predict": 120}})
		var req ollama.ChatRequest
		if err := decodeJSON(raw, &req); err != nil {
			t.Fatal(err)
		}
		c := &ollama.Call{}
		forced, err := req.Turn("ollama-1", c)
		if err != nil {
			t.Fatal(err)
		}
		forced.ToolChoice = turn.ToolChoice{Mode: turn.ToolsFunction, Name: "forecast"}
		rec := httptest.NewRecorder()
		r := httptest.NewRequest("POST", "/api/chat", nil)
		ts.srv.ollamaAnswer(rec, r, c, forced, ollama.ChatAnswer("glm52-mini", c))
		var lines []map[string]any
		if stream {
			lines = readNDJSON(t, rec.Body)
		} else {
			lines = []map[string]any{decode(t, rec.Body.String())}
		}
		var calls []any
		for _, l := range lines {
			if cs, ok := jpath(l, "message", "tool_calls").([]any); ok {
				calls = append(calls, cs...)
			}
		}
		final := lines[len(lines)-1]
		if len(calls) != 1 || final["done"] != true || final["done_reason"] != "stop" {
			t.Fatalf("stream %v: calls %v, final %v", stream, calls, final)
		}
		if jpath(calls[0], "function", "name") != "forecast" || jpath(calls[0], "id") == "" {
			t.Errorf("call %v", calls[0])
		}
		args, ok := jpath(calls[0], "function", "arguments").(map[string]any)
		if !ok {
			t.Fatalf("arguments %#v are not an object", jpath(calls[0], "function", "arguments"))
		}
		b, _ := json.Marshal(args)
		if err := validate(string(b)); err != nil {
			t.Errorf("arguments %s: %v", b, err)
		}
	}
}

// TestOllamaMinPIsCarried: options.min_p reaches the sampler, checked
// against the one set of ranges the other APIs use.
func TestOllamaMinPIsCarried(t *testing.T) {
	ts := newTestServer(t, serverOpts{noRun: true})
	build := func(body string) (*turn.Request, error) {
		var req ollama.ChatRequest
		if err := decodeJSON([]byte(body), &req); err != nil {
			t.Fatal(err)
		}
		return req.Turn("ollama-1", &ollama.Call{})
	}
	tu, err := build(`{"model":"glm52-mini","messages":[{"role":"user","content":"hi"}],"options":{"temperature":0.7,"min_p":0.05}}`)
	if err != nil {
		t.Fatal(err)
	}
	if tu.Sampling.MinP == nil || *tu.Sampling.MinP != 0.05 {
		t.Errorf("sampling %+v, want min_p 0.05", tu.Sampling)
	}
	if s := ts.srv.local.Sampling(tu.Sampling); s.MinP != 0.05 {
		t.Errorf("the engine's sampling %+v, want min_p 0.05", s)
	}
	if err := ts.srv.prompt(build(`{"model":"glm52-mini","messages":[{"role":"user","content":"hi"}],"options":{"min_p":2}}`)); err == nil || !strings.Contains(err.Error(), "min_p 2 is out of range") {
		t.Errorf("min_p 2: %v", err)
	}
}

func FuzzOllamaChatRequest(f *testing.F) {
	fuzzDecode(f, []string{
		`{"model":"glm52-mini","messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"spool:latest","messages":[{"role":"system","content":"s"},{"role":"user","content":"hi"},{"role":"assistant","content":"","thinking":"t","tool_calls":[{"function":{"name":"f","arguments":{"a":1}}}]},{"role":"tool","tool_name":"f","content":"ok"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],"think":"high","keep_alive":"5m","stream":false}`,
		`{"model":"glm52-mini","messages":[{"role":"user","content":"x"}],"format":{"type":"object","properties":{"a":{"type":"string","maxLength":3}}},"options":{"temperature":0.2,"top_k":4,"top_p":0.5,"min_p":0.1,"seed":-3,"stop":["a"],"num_predict":-2,"num_ctx":100}}`,
		`{"model":"glm52-mini","messages":[{"role":"user","content":"x"}],"format":"json","keep_alive":0,"think":false}`,
		`{"model":"glm52-mini","messages":[{"role":"assistant","tool_calls":[{"function":{"name":"f","arguments":"{\"a\":1}"}}]}]}`,
	}, func(s *Server, body []byte) error {
		var req ollama.ChatRequest
		if err := decodeJSON(body, &req); err != nil {
			return err
		}
		t, err := s.ollamaTurn(context.Background(), req.Model, &ollama.Call{}, func() (*turn.Request, error) { return req.Turn("ollama-1", &ollama.Call{}) })
		if t == nil {
			return err
		}
		return s.prompt(t, err)
	})
}

func FuzzOllamaGenerateRequest(f *testing.F) {
	fuzzDecode(f, []string{
		`{"model":"glm52-mini","prompt":"hi","system":"s","options":{"num_predict":3}}`,
		`{"model":"glm52-mini","prompt":"def f(","raw":true,"context":[1,2,3],"format":"json"}`,
		`{"model":"glm52-mini","prompt":"x","suffix":"y","images":["a"],"template":"t","think":true}`,
	}, func(s *Server, body []byte) error {
		var req ollama.GenerateRequest
		if err := decodeJSON(body, &req); err != nil {
			return err
		}
		t, err := s.ollamaTurn(context.Background(), req.Model, &ollama.Call{}, func() (*turn.Request, error) {
			return req.Turn("ollama-1", s.local.ModelConfig().VocabSize, &ollama.Call{})
		})
		if t == nil {
			return err
		}
		return s.prompt(t, err)
	})
}

// TestOllamaLenient: /api/chat is as lenient as Ollama where clients
// depend on it. Ollama does not validate roles: a message whose role the
// chat template does not know (mods sends its last answer back with an
// empty role) renders as the template renders it, here to nothing. Any
// num_predict of 0 or less is no limit, as Ollama's runner reads it.
func TestOllamaLenient(t *testing.T) {
	ts := newTestServer(t, serverOpts{noRun: true, sched: schedulerConfig{ContextLength: 512}})
	prompt := func(body string) ([]int, *turn.Request) {
		t.Helper()
		var req ollama.ChatRequest
		if err := decodeJSON([]byte(body), &req); err != nil {
			t.Fatal(err)
		}
		tu, err := req.Turn("ollama-1", &ollama.Call{})
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		ids, _, err := ts.srv.local.Prompt(context.Background(), tu)
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		return ids, tu
	}
	mods, _ := prompt(`{"model":"glm52-mini","messages":[{"role":"user","content":"q1"},{"role":"","content":"a1"},{"role":"robot","content":"r"},{"role":"user","content":"q2"}]}`)
	plain, _ := prompt(`{"model":"glm52-mini","messages":[{"role":"user","content":"q1"},{"role":"user","content":"q2"}]}`)
	if !slices.Equal(mods, plain) {
		t.Errorf("unknown roles rendered %q, want the template's %q", ts.srv.eng.Tokenizer.Decode(mods, false), ts.srv.eng.Tokenizer.Decode(plain, false))
	}
	for _, n := range []int{0, -1, -2, -7} {
		if _, tu := prompt(fmt.Sprintf(`{"model":"glm52-mini","messages":[{"role":"user","content":"hi"}],"options":{"num_predict":%d}}`, n)); tu.MaxTokens != nil {
			t.Errorf("num_predict %d: max tokens %d, want none (the rest of the context)", n, *tu.MaxTokens)
		}
	}
	// Over HTTP, the answer of a follow-up with an empty role.
	run := newTestServer(t, serverOpts{})
	status, body, _ := run.do(t, "POST", "/api/chat", `{"model":"glm52-mini","stream":false,"options":{"num_predict":2},"messages":[{"role":"user","content":"q1"},{"role":"","content":"a1"},{"role":"user","content":"q2"}]}`)
	if status != 200 || jpath(body, "message", "role") != "assistant" {
		t.Errorf("follow-up with an empty role: %d %v", status, body)
	}
}
