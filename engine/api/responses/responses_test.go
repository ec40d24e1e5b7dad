package responses

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/spoolhq/spool/engine/apiwire"
	"github.com/spoolhq/spool/engine/chat"
	"github.com/spoolhq/spool/engine/turn"
)

func request(t *testing.T, body string) *Request {
	t.Helper()
	var r Request
	if err := apiwire.DecodeJSON([]byte(body), &r); err != nil {
		t.Fatal(err)
	}
	return &r
}

// TestTurn: input items, flattened tools and a previous response become
// the turn's conversation and tools; refusals name the field.
func TestTurn(t *testing.T) {
	prev := &State{History: []chat.Message{{Role: "user", Content: "before"}, {Role: "assistant", Content: "ok"}}}
	cases := []struct {
		body  string
		prev  *State
		param string
		check func(*Request, *turn.Request) bool
	}{
		{`{"input":"hi","instructions":"be brief","max_output_tokens":4}`, nil, "", func(_ *Request, t *turn.Request) bool {
			return len(t.Messages) == 2 && t.Messages[0].Role == "system" && t.Messages[1].Content == "hi" && *t.MaxTokens == 4
		}},
		{`{"input":"again","previous_response_id":"resp_1"}`, prev, "", func(_ *Request, t *turn.Request) bool {
			return len(t.Messages) == 3 && t.Messages[0].Content == "before" && t.Messages[2].Content == "again"
		}},
		{`{"input":[{"role":"user","content":[{"type":"input_text","text":"q"}]},{"type":"function_call","call_id":"c","name":"g","namespace":"n","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":"r"},{"type":"web_search_call","id":"w"}],
		  "tools":[{"type":"namespace","name":"n","tools":[{"type":"function","name":"g"},{"type":"custom","name":"p"}]},{"type":"web_search"}],"tool_choice":{"type":"function","namespace":"n","name":"g"}}`, nil, "",
			func(r *Request, t *turn.Request) bool {
				return len(t.Messages) == 3 && t.Messages[1].ToolCalls[0].Function.Name == "n.g" && t.Messages[2].Role == "tool" &&
					len(t.Tools) == 2 && t.ToolChoice == turn.ToolChoice{Mode: turn.ToolsFunction, Name: "n.g"} && strings.Join(r.Dropped(), ",") == "web_search"
			}},
		{`{"input":"x","text":{"format":{"type":"json_schema","name":"o","schema":{"type":"object"}}},"reasoning":{"effort":"low"}}`, nil, "", func(_ *Request, t *turn.Request) bool {
			return t.Format.Param == "text.format" && *t.Thinking && t.Vars["reasoning_effort"] == "low"
		}},
		{`{"input":"x","previous_response_id":"resp_gone"}`, nil, "", nil},
		{`{"input":[]}`, nil, "input", nil},
		{`{"input":[{"type":"message","role":"tool","content":"x"}]}`, nil, "input[0].role", nil},
		{`{"input":[{"type":"image_generation"}]}`, nil, "input[0].type", nil},
		{`{"input":"x","reasoning":{"effort":"giant"}}`, nil, "reasoning_effort", nil},
		{`{"input":"x","max_output_tokens":0}`, nil, "max_output_tokens", nil},
	}
	for _, c := range cases {
		r := request(t, c.body)
		got, err := r.Turn("resp_2", c.prev)
		switch {
		case c.check == nil && c.param == "":
			if err == nil || turn.Error(err).Code != "previous_response_not_found" {
				t.Errorf("%s: %v, want previous_response_not_found", c.body, err)
			}
		case c.param != "":
			if err == nil || turn.Error(err).Param != c.param {
				t.Errorf("%s: %v, want a refusal of %s", c.body, err, c.param)
			}
		case err != nil:
			t.Errorf("%s: %v", c.body, err)
		case !c.check(r, got):
			t.Errorf("%s: %+v", c.body, got)
		}
	}
}

// TestAnswerStream: the pieces of a turn become the response's items and
// the events that describe them, numbered; the end sets the status and
// usage, and Complete sends the terminal event.
func TestAnswerStream(t *testing.T) {
	r := request(t, `{"input":"q","tools":[{"type":"custom","name":"p"}]}`)
	if _, err := r.Turn("resp_1", nil); err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	sse, _ := apiwire.StartSSE(rec)
	a := r.Answer("resp_1", "m", 7, 1, 0.9, sse)
	steps := []turn.Piece{
		{Reasoning: "hm"}, {Idle: true}, {Text: "Hi"},
		{Calls: []turn.Call{{ID: "call_1", Name: "p", Arguments: `{"input":"ls"}`}}},
		{End: &turn.End{Finish: turn.FinishLength, Usage: turn.Usage{PromptTokens: 5, CachedTokens: 1, CompletionTokens: 3}}},
	}
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	for _, p := range steps {
		if err := a.Piece(p); err != nil {
			t.Fatal(err)
		}
	}
	a.Complete()
	var names []string
	for _, line := range strings.Split(rec.Body.String(), "\n") {
		if n, ok := strings.CutPrefix(line, "event: "); ok {
			names = append(names, n)
		}
	}
	want := "response.created response.in_progress response.output_item.added response.reasoning_text.delta response.in_progress " +
		"response.reasoning_text.done response.output_item.done response.output_item.added response.content_part.added response.output_text.delta " +
		"response.output_text.done response.content_part.done response.output_item.done response.output_item.added response.custom_tool_call_input.delta " +
		"response.custom_tool_call_input.done response.output_item.done response.incomplete"
	if got := strings.Join(names, " "); got != want {
		t.Errorf("events\n%s\nwant\n%s", got, want)
	}
	resp := a.Response()
	if resp.Status != "incomplete" || resp.OutputText != "Hi" || len(resp.Output) != 3 || resp.Output[2]["type"] != "custom_tool_call" ||
		resp.Output[2]["input"] != "ls" || resp.Usage.TotalTokens != 8 || resp.Usage.InputTokensDetails.CachedTokens != 1 || resp.Temperature != 1 {
		raw, _ := json.Marshal(resp)
		t.Errorf("response %s", raw)
	}
	st := a.State()
	if last := st.History[len(st.History)-1]; last.Role != "assistant" || last.Content != "Hi" || last.ToolCalls[0].Function.Name != "p" {
		t.Errorf("stored reply %+v", last)
	}
}

func TestFrame(t *testing.T) {
	body, err := Frame([]byte(`{"type":"response.create","input":"x","stream":false}`))
	if err != nil || !strings.Contains(string(body), `"stream":true`) || strings.Contains(string(body), "response.create") {
		t.Errorf("%s %v", body, err)
	}
	if _, err := Frame([]byte(`{"type":"response.cancel"}`)); err == nil || turn.Error(err).Param != "type" {
		t.Errorf("another event: %v", err)
	}
}
