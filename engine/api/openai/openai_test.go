package openai

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/spoolhq/spool/engine/apiwire"
	"github.com/spoolhq/spool/engine/turn"
)

func decodeChat(t *testing.T, body string) *ChatRequest {
	t.Helper()
	var r ChatRequest
	if err := apiwire.DecodeJSON([]byte(body), &r); err != nil {
		t.Fatal(err)
	}
	return &r
}

// TestChatTurn: a chat request's translation into a turn, and the refusals
// that name the field at fault.
func TestChatTurn(t *testing.T) {
	const msgs = `"messages":[{"role":"user","content":"hi"}]`
	tools := `"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}]`
	cases := []struct {
		body  string
		param string // the refused field; "" for a turn
		check func(*turn.Request) bool
	}{
		{`{` + msgs + `,"temperature":0.5,"seed":7,"stop":"x","max_tokens":5}`, "", func(r *turn.Request) bool {
			return *r.Sampling.Temperature == 0.5 && *r.Sampling.Seed == 7 && r.Stops[0] == "x" && *r.MaxTokens == 5 && r.ToolChoice.Mode == turn.ToolsAuto
		}},
		{`{` + msgs + `,"max_tokens":5,"max_completion_tokens":9}`, "", func(r *turn.Request) bool { return *r.MaxTokens == 9 }},
		{`{` + msgs + `,` + tools + `,"tool_choice":{"type":"function","function":{"name":"f"}}}`, "", func(r *turn.Request) bool {
			return r.ToolChoice == turn.ToolChoice{Mode: turn.ToolsFunction, Name: "f"} && len(r.Tools) == 1
		}},
		{`{` + msgs + `,"reasoning_effort":"high","chat_template_kwargs":{"x":1,"_y":2}}`, "", func(r *turn.Request) bool {
			return *r.Thinking && r.Vars["reasoning_effort"] == "high" && r.Vars["x"] == 1.0 && r.Vars["_y"] == nil
		}},
		{`{` + msgs + `,"response_format":{"type":"json_schema","json_schema":{"name":"n","schema":{"type":"object"}}}}`, "", func(r *turn.Request) bool {
			return r.Format.Type == turn.JSONSchema && r.Format.Param == "response_format" && string(r.Format.Schema) == `{"type":"object"}`
		}},
		{`{` + msgs + `,"logprobs":true,"top_logprobs":3}`, "", func(r *turn.Request) bool { return r.Logprobs && r.TopLogprobs == 3 }},
		{`{"messages":[]}`, "messages", nil},
		{`{"messages":[{"role":"robot","content":"x"}]}`, "messages[0].role", nil},
		{`{"messages":[{"role":"user","content":[{"type":"image_url"}]}]}`, "messages[0].content[0].type", nil},
		{`{` + msgs + `,"n":2}`, "n", nil},
		{`{` + msgs + `,"tool_choice":"required"}`, "tool_choice", nil},
		{`{` + msgs + `,` + tools + `,"tool_choice":{"type":"function","function":{"name":"g"}}}`, "tool_choice", nil},
		{`{` + msgs + `,"reasoning_effort":"huge"}`, "reasoning_effort", nil},
		{`{` + msgs + `,"top_logprobs":2}`, "top_logprobs", nil},
		{`{` + msgs + `,"stop":["a",""]}`, "stop", nil},
		{`{` + msgs + `,"max_completion_tokens":0}`, "max_completion_tokens", nil},
		{`{` + msgs + `,"response_format":{"type":"json_schema","json_schema":{"name":"bad name","schema":{}}}}`, "response_format.json_schema.name", nil},
		{`{` + msgs + `,"response_format":{"type":"yaml"}}`, "response_format.type", nil},
	}
	for _, c := range cases {
		r, err := decodeChat(t, c.body).Turn("chatcmpl-1")
		switch {
		case c.param != "":
			if err == nil || turn.Error(err).Param != c.param || turn.Error(err).Status != 400 {
				t.Errorf("%s: %v, want a 400 naming %s", c.body, err, c.param)
			}
		case err != nil:
			t.Errorf("%s: %v", c.body, err)
		case r.ID != "chatcmpl-1" || !c.check(r):
			t.Errorf("%s: %+v", c.body, r)
		}
	}
}

// sse is an event stream written to a recorder.
func sse(t *testing.T) (*apiwire.SSE, *httptest.ResponseRecorder) {
	t.Helper()
	rec := httptest.NewRecorder()
	s, err := apiwire.StartSSE(rec)
	if err != nil {
		t.Fatal(err)
	}
	return s, rec
}

// dataEvents are the data of a stream's events.
func dataEvents(body string) []string {
	var out []string
	for _, line := range strings.Split(body, "\n") {
		if d, ok := strings.CutPrefix(line, "data: "); ok {
			out = append(out, d)
		}
	}
	return out
}

// TestChatStream: each piece of a turn becomes its chunks, in order:
// reasoning, text with its logprobs, tool calls numbered across the
// reply; a keep-alive is a comment; the end gives the finish, the usage
// and [DONE].
func TestChatStream(t *testing.T) {
	s, rec := sse(t)
	w := NewChatStream(s, Answer{ID: "c1", Model: "m", Created: 5}, true, true)
	end := &turn.End{Finish: turn.FinishToolCalls, Usage: turn.Usage{PromptTokens: 3, CompletionTokens: 2, Engine: &turn.EngineUsage{Lane: "single"}}}
	steps := []turn.Piece{
		{Reasoning: "hm"},
		{Idle: true},
		{Text: "Hi", Tokens: []turn.Token{{ID: 1, Text: "Hi", Logprob: -0.5}}},
		{Calls: []turn.Call{{Index: 0, ID: "call_1", Name: "f", Arguments: "{}"}}},
		{End: end},
	}
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	for _, p := range steps {
		if err := w.Piece(p); err != nil {
			t.Fatal(err)
		}
	}
	body := rec.Body.String()
	if !strings.Contains(body, ": keep-alive") {
		t.Errorf("no keep-alive comment in %q", body)
	}
	events := dataEvents(body)
	want := []string{`"role":"assistant","content":""`, `"reasoning_content":"hm"`, `"content":"Hi"`, `"tool_calls":[{"index":0,"id":"call_1"`, `"finish_reason":"tool_calls"`, `"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5`, `[DONE]`}
	if len(events) != len(want) {
		t.Fatalf("%d events, want %d:\n%s", len(events), len(want), body)
	}
	for i, w := range want {
		if !strings.Contains(events[i], w) {
			t.Errorf("event %d %s lacks %s", i, events[i], w)
		}
	}
	var c ChatCompletion
	json.Unmarshal([]byte(events[2]), &c)
	if lp := c.Choices[0].Logprobs; lp == nil || lp.Content[0].Token != "Hi" || lp.Content[0].Bytes[0] != 'H' {
		t.Errorf("logprobs %+v", lp)
	}
	if !strings.Contains(events[5], `"lane":"single"`) {
		t.Errorf("usage without the engine's report: %s", events[5])
	}
}

// TestChatReply: a whole reply's message: no content beside calls alone,
// the reasoning apart, the finish and usage.
func TestChatReply(t *testing.T) {
	rep := &turn.Reply{Reasoning: "r", Calls: []turn.Call{{ID: "call_1", Name: "f", Arguments: `{"a":1}`}},
		End: turn.End{Finish: turn.FinishToolCalls, Usage: turn.Usage{PromptTokens: 4, CachedTokens: 2, CompletionTokens: 3}}}
	c := ChatReply(Answer{ID: "c", Model: "m", Created: 1}, rep, false)
	m := c.Choices[0].Message
	if m.Content != nil || *m.ReasoningContent != "r" || m.ToolCalls[0].Index != nil || m.ToolCalls[0].Function.Arguments != `{"a":1}` ||
		*c.Choices[0].FinishReason != "tool_calls" || c.Usage.TotalTokens != 7 || c.Usage.PromptTokensDetails.CachedTokens != 2 || c.Object != "chat.completion" {
		t.Errorf("%+v %+v", c, m)
	}
}

func TestCompletionTurn(t *testing.T) {
	cases := []struct {
		prompt string
		want   turn.Prompt
		param  string
	}{
		{`"def f("`, turn.Prompt{Text: "def f("}, ""},
		{`["x"]`, turn.Prompt{Text: "x"}, ""},
		{`[1,2,3]`, turn.Prompt{Tokens: []int{1, 2, 3}}, ""},
		{`[[4]]`, turn.Prompt{Tokens: []int{4}}, ""},
		{`["a","b"]`, turn.Prompt{}, "prompt"},
		{`[100]`, turn.Prompt{}, "prompt"},
		{`""`, turn.Prompt{}, "prompt"},
		{`null`, turn.Prompt{}, "prompt"},
	}
	for _, c := range cases {
		var r CompletionRequest
		apiwire.DecodeJSON([]byte(`{"prompt":`+c.prompt+`}`), &r)
		got, err := r.Turn("cmpl-1", 100)
		if c.param != "" {
			if err == nil || turn.Error(err).Param != c.param {
				t.Errorf("%s: %v, want a refusal of %s", c.prompt, err, c.param)
			}
			continue
		}
		if err != nil || got.Prompt.Text != c.want.Text || len(got.Prompt.Tokens) != len(c.want.Tokens) || *got.MaxTokens != CompletionMaxTokens {
			t.Errorf("%s: %+v %v", c.prompt, got, err)
		}
	}
}

func TestEmbeddingsInputs(t *testing.T) {
	cases := []struct {
		input string
		texts int
		ids   int
		param string
	}{
		{`"x"`, 1, 0, ""}, {`["a","b"]`, 2, 0, ""}, {`[1,2]`, 0, 1, ""}, {`[[1],[2,3]]`, 0, 2, ""},
		{`[]`, 0, 0, "input"}, {`[[]]`, 0, 0, "input"}, {`[[1,2,3,4,5]]`, 0, 0, "input"}, {`[99]`, 0, 0, "input"}, {`{}`, 0, 0, "input"},
	}
	for _, c := range cases {
		r := EmbeddingsRequest{Input: json.RawMessage(c.input)}
		texts, ids, err := r.Inputs(50, 4)
		if c.param != "" {
			if err == nil || turn.Error(err).Param != c.param {
				t.Errorf("%s: %v", c.input, err)
			}
			continue
		}
		if err != nil || len(texts) != c.texts || len(ids) != c.ids {
			t.Errorf("%s: %v %v %v", c.input, texts, ids, err)
		}
	}
	r := EmbeddingsRequest{EncodingFormat: "base64"}
	if out := r.Reply("m", [][]float32{{1}}, 3); out.Data[0].Embedding != "AACAPw==" || out.Usage.TotalTokens != 3 || out.Model != "m" {
		t.Errorf("%+v", out)
	}
}
