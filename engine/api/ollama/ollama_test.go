package ollama

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/spoolhq/spool/engine/apiwire"
	"github.com/spoolhq/spool/engine/turn"
)

func TestOptions(t *testing.T) {
	o, err := ParseOptions(json.RawMessage(`{"temperature":0.5,"top_k":0,"top_p":0.9,"min_p":0.05,"seed":7,"stop":["\n\n"],"num_predict":-1,"num_ctx":4096,"num_gpu":1,"mirostat":2}`))
	if err != nil {
		t.Fatal(err)
	}
	if *o.Sampling.Temperature != 0.5 || *o.Sampling.TopK != -1 || *o.Sampling.TopP != 0.9 || *o.Sampling.Seed != 7 ||
		len(o.Stop) != 1 || *o.NumPredict != -1 || *o.NumCtx != 4096 || *o.Sampling.MinP != 0.05 {
		t.Errorf("parsed %+v", o)
	}
	if strings.Join(o.Ignored, ",") != "mirostat,num_gpu" {
		t.Errorf("ignored %v", o.Ignored)
	}
	for _, bad := range []string{`{"seed":1.5}`, `{"num_ctx":0}`, `{"stop":"x"}`, `{"stop":[""]}`, `{"min_p":"x"}`, `[1]`, `{"top_k":"4"}`} {
		if _, err := ParseOptions(json.RawMessage(bad)); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
	// num_predict 0 or below -2 is no limit, as Ollama's runner reads it.
	for _, n := range []string{"0", "-2", "-5"} {
		if o, err := ParseOptions(json.RawMessage(`{"num_predict":` + n + `}`)); err != nil || o.NumPredict == nil {
			t.Errorf("num_predict %s: %v", n, err)
		}
	}
}

// TestChatTurn: a chat request's translation, its options bounding the
// turn, and an empty role handed to the template as Ollama does.
func TestChatTurn(t *testing.T) {
	cases := []struct {
		body  string
		param string
		check func(*turn.Request, *Call) bool
	}{
		{`{"model":"m","messages":[{"role":"user","content":"hi"}],"options":{"num_ctx":64,"num_predict":500,"temperature":0}}`, "", func(r *turn.Request, c *Call) bool {
			return r.Context == 64 && *r.MaxTokens == 500 && *r.Sampling.Temperature == 0 && c.Stream && r.Stream
		}},
		{`{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"","content":"last answer"}],"stream":false,"options":{"num_predict":0}}`, "", func(r *turn.Request, c *Call) bool {
			return len(r.Messages) == 2 && r.Messages[1].Role == "" && r.MaxTokens == nil && !c.Stream
		}},
		{`{"model":"m","messages":[{"role":"assistant","tool_calls":[{"function":{"name":"f","arguments":"{\"a\":1}"}}]}],"think":"high","format":"json"}`, "", func(r *turn.Request, _ *Call) bool {
			return r.Messages[0].ToolCalls[0].Function.Arguments == `{"a":1}` && *r.Thinking && r.Vars["reasoning_effort"] == "high" && r.Format.Type == turn.JSONObject
		}},
		{`{"model":"m","messages":[{"role":"user","content":"x","images":["a"]}]}`, "messages[0].images", nil},
		{`{"model":"m","messages":[{"role":"user","content":"x"}],"think":"very"}`, "think", nil},
		{`{"model":"m","messages":[{"role":"user","content":"x"}],"keep_alive":"soon"}`, "keep_alive", nil},
		{`{"model":"m","messages":[{"role":"user","content":"x"}],"format":"yaml"}`, "format", nil},
		{`{"model":"m","messages":[{"role":"assistant","tool_calls":[{"function":{"name":"","arguments":{}}}]}]}`, "messages[0].tool_calls[0].function.name", nil},
	}
	for _, c := range cases {
		var r ChatRequest
		if err := apiwire.DecodeJSON([]byte(c.body), &r); err != nil {
			t.Fatal(err)
		}
		call := &Call{}
		got, err := r.Turn("ollama-1", call)
		switch {
		case c.param != "":
			if err == nil || turn.Error(err).Param != c.param {
				t.Errorf("%s: %v, want a refusal of %s", c.body, err, c.param)
			}
		case err != nil || got == nil:
			t.Errorf("%s: %v", c.body, err)
		case !c.check(got, call):
			t.Errorf("%s: %+v %+v", c.body, got, call)
		}
	}
	var load ChatRequest
	if got, err := load.Turn("x", &Call{}); got != nil || err != nil {
		t.Errorf("a load request: %v %v", got, err)
	}
}

func TestGenerateTurn(t *testing.T) {
	var r GenerateRequest
	apiwire.DecodeJSON([]byte(`{"model":"m","prompt":"hi","system":"s","context":[1,2]}`), &r)
	got, err := r.Turn("g", 10, &Call{})
	if err != nil || len(got.Messages) != 2 || got.Messages[0].Role != "system" || len(got.Prefix) != 2 || got.ToolChoice.Mode != turn.ToolsNone {
		t.Errorf("%+v %v", got, err)
	}
	r.Raw = true
	if got, err := r.Turn("g", 10, &Call{}); err != nil || got.Prompt == nil || got.Prompt.Text != "hi" || got.Messages != nil {
		t.Errorf("raw: %+v %v", got, err)
	}
	r.Context = []int{11}
	if _, err := r.Turn("g", 10, &Call{}); err == nil || turn.Error(err).Param != "context" {
		t.Errorf("a context token outside the vocabulary: %v", err)
	}
	if e := Error(&turn.ContextError{Prompt: 70, Limit: 64, Requested: true}).(*apiwire.Error); e.Param != "options.num_ctx" || !strings.Contains(e.Message, "70 tokens (options.num_ctx)") {
		t.Errorf("%+v", e)
	}
}
