package server

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// forecastParams has every string constraint a forced call must honour.
var forecastParams = map[string]any{
	"type": "object",
	"properties": map[string]any{
		"city":  map[string]any{"type": "string", "minLength": 1, "maxLength": 10},
		"unit":  map[string]any{"type": "string", "enum": []any{"c", "f"}},
		"kind":  map[string]any{"const": "forecast"},
		"days":  map[string]any{"type": "integer", "minimum": 1},
		"where": map[string]any{"$ref": "#/$defs/place"},
	},
	"required":             []any{"city", "unit", "kind"},
	"additionalProperties": false,
	"$defs":                map[string]any{"place": map[string]any{"type": "object", "properties": map[string]any{"lat": map[string]any{"type": "number"}}, "required": []any{"lat"}}},
}

// schemaValidator checks documents with an independent JSON Schema
// implementation.
func schemaValidator(t *testing.T, schema any) func(string) error {
	t.Helper()
	raw, _ := json.Marshal(schema)
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(string(raw)))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("params.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("params.json")
	if err != nil {
		t.Fatal(err)
	}
	return func(args string) error {
		v, err := jsonschema.UnmarshalJSON(strings.NewReader(args))
		if err != nil {
			return err
		}
		return sch.Validate(v)
	}
}

// TestForcedToolCallSchema: forced calls on every endpoint decode their
// arguments under the whole parameters schema (regression: enum, const and
// maxLength strings came back as free text, required keys missing).
func TestForcedToolCallSchema(t *testing.T) {
	ts := newTestServer(t, serverOpts{})
	validate := schemaValidator(t, forecastParams)
	openaiTools := []any{
		map[string]any{"type": "function", "function": map[string]any{"name": "forecast", "parameters": forecastParams}},
		map[string]any{"type": "function", "function": map[string]any{"name": "now", "parameters": map[string]any{"type": "object", "properties": map[string]any{}}}},
	}
	named := map[string]any{"type": "function", "function": map[string]any{"name": "forecast"}}
	for seed := range 4 {
		for _, choice := range []any{named, "required"} {
			_, resp, _ := ts.do(t, "POST", "/v1/chat/completions", chatBody(map[string]any{
				"tools": openaiTools, "tool_choice": choice, "max_tokens": 200, "temperature": 1, "seed": seed}))
			if jpath(resp, "choices", 0, "finish_reason") != "tool_calls" {
				t.Fatalf("seed %d %v: %v", seed, choice, resp)
			}
			call := jpath(resp, "choices", 0, "message", "tool_calls", 0, "function").(map[string]any)
			if call["name"] == "now" && choice == "required" {
				continue
			}
			if err := validate(call["arguments"].(string)); call["name"] != "forecast" || err != nil {
				t.Errorf("seed %d %v: %v: %v", seed, choice, call, err)
			}
		}
		// Anthropic tool_choice tool, streamed and not.
		body := map[string]any{"model": "claude-x", "max_tokens": 200, "temperature": 1, "top_k": 50 + seed,
			"messages":    []any{map[string]any{"role": "user", "content": question}},
			"tools":       []any{map[string]any{"name": "forecast", "input_schema": forecastParams}},
			"tool_choice": map[string]any{"type": "tool", "name": "forecast"}}
		_, msg, _ := ts.do(t, "POST", "/v1/messages", body)
		input, _ := json.Marshal(jpath(msg, "content", 0, "input"))
		if msg["stop_reason"] != "tool_use" || jpath(msg, "content", 0, "type") != "tool_use" {
			t.Fatalf("anthropic: %v", msg)
		}
		if err := validate(string(input)); err != nil {
			t.Errorf("anthropic input %s: %v", input, err)
		}
	}
	// Responses, forced.
	_, resp, _ := ts.do(t, "POST", "/v1/responses", map[string]any{"input": question, "max_output_tokens": 200, "tool_choice": "required",
		"tools": []any{map[string]any{"type": "function", "name": "forecast", "parameters": forecastParams}}})
	if jpath(resp, "output", 0, "type") != "function_call" || resp["status"] != "completed" {
		t.Fatalf("responses: %v", resp)
	}
	if err := validate(jpath(resp, "output", 0, "arguments").(string)); err != nil {
		t.Errorf("responses arguments: %v", err)
	}
	// A schema the compiler refuses is a 400 naming the tool, not free text.
	bad := map[string]any{"type": "function", "function": map[string]any{"name": "re", "parameters": map[string]any{
		"type": "object", "properties": map[string]any{"p": map[string]any{"type": "string", "pattern": "^a+$"}}}}}
	status, errBody, _ := ts.do(t, "POST", "/v1/chat/completions", chatBody(map[string]any{"tools": []any{bad}, "tool_choice": "required"}))
	if msg, _ := jpath(errBody, "error", "message").(string); status != 400 || !strings.Contains(msg, `"re"`) || !strings.Contains(msg, "pattern") {
		t.Errorf("uncompilable tool schema: %d %v", status, errBody)
	}
}

// TestForcedToolCallCut: a forced call the token budget cuts short is
// reported as incomplete (length / max_tokens / incomplete), never as a
// call with required arguments missing.
func TestForcedToolCallCut(t *testing.T) {
	ts := newTestServer(t, serverOpts{})
	tools := []any{map[string]any{"type": "function", "function": map[string]any{"name": "forecast", "parameters": forecastParams}}}
	for _, n := range []int{1, 4, 9} {
		body := chatBody(map[string]any{"tools": tools, "tool_choice": "required", "max_tokens": n})
		_, resp, _ := ts.do(t, "POST", "/v1/chat/completions", body)
		if jpath(resp, "choices", 0, "finish_reason") != "length" || jpath(resp, "choices", 0, "message", "tool_calls") != nil {
			t.Errorf("max_tokens %d: %v", n, resp)
		}
		body["stream"] = true
		var finish any
		for _, ev := range ts.stream(t, "/v1/chat/completions", body) {
			if ev.data == "[DONE]" {
				continue
			}
			d := decode(t, ev.data)
			if jpath(d, "choices", 0, "delta", "tool_calls") != nil {
				t.Errorf("max_tokens %d: streamed a cut call: %s", n, ev.data)
			}
			if f := jpath(d, "choices", 0, "finish_reason"); f != nil {
				finish = f
			}
		}
		if finish != "length" {
			t.Errorf("max_tokens %d: streamed finish %v", n, finish)
		}
	}
	_, msg, _ := ts.do(t, "POST", "/v1/messages", map[string]any{"model": "claude-x", "max_tokens": 5,
		"messages":    []any{map[string]any{"role": "user", "content": question}},
		"tools":       []any{map[string]any{"name": "forecast", "input_schema": forecastParams}},
		"tool_choice": map[string]any{"type": "any"}})
	if msg["stop_reason"] != "max_tokens" || strings.Contains(fmt.Sprint(msg["content"]), "tool_use") {
		t.Errorf("anthropic cut: %v", msg)
	}
	_, resp, _ := ts.do(t, "POST", "/v1/responses", map[string]any{"input": question, "max_output_tokens": 5, "tool_choice": "required",
		"tools": []any{map[string]any{"type": "function", "name": "forecast", "parameters": forecastParams}}})
	if resp["status"] != "incomplete" || strings.Contains(fmt.Sprint(resp["output"]), "function_call") {
		t.Errorf("responses cut: %v", resp)
	}
}
