package server

import (
	"context"
	"errors"
	"testing"

	"github.com/spoolhq/spool/engine/api/anthropic"
	"github.com/spoolhq/spool/engine/api/openai"
	"github.com/spoolhq/spool/engine/api/responses"
	"github.com/spoolhq/spool/engine/apiwire"
	"github.com/spoolhq/spool/engine/turn"
)

// fuzzDecode checks that a request body either prepares a turn or is
// refused with a 4xx apiError, never a panic or a server error.
func fuzzDecode(f *testing.F, seeds []string, prepare func(s *Server, body []byte) error) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	var srv *Server
	f.Fuzz(func(t *testing.T, body []byte) {
		if srv == nil {
			srv = newTestServer(t, serverOpts{noRun: true, sched: schedulerConfig{ContextLength: 512}}).srv
		}
		err := prepare(srv, body)
		if err == nil {
			return
		}
		var ae *apiwire.Error
		if !errors.As(err, &ae) || ae.Status < 400 || ae.Status >= 500 || ae.Message == "" {
			t.Fatalf("body %q: error %#v", body, err)
		}
	})
}

func FuzzChatRequest(f *testing.F) {
	fuzzDecode(f, []string{
		`{"messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"spool","messages":[{"role":"system","content":[{"type":"text","text":"x"}]},{"role":"user","content":"hi"}],"temperature":0.5,"top_p":0.9,"top_k":4,"seed":-3,"stop":["a","b"],"logit_bias":{"5":-100},"logprobs":true,"top_logprobs":2}`,
		`{"messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]},{"role":"tool","tool_call_id":"c","content":"ok"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"a":{"type":"integer"}}}}}],"tool_choice":"required"}`,
		`{"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema","json_schema":{"name":"n","schema":{"type":"object"}}},"reasoning_effort":"high","chat_template_kwargs":{"enable_thinking":true}}`,
		`{"messages":[{"role":"user","content":"x"}],"max_tokens":-1,"n":2,"stop":7}`,
	}, func(s *Server, body []byte) error {
		var req openai.ChatRequest
		if err := decodeJSON(body, &req); err != nil {
			return err
		}
		return s.prompt(req.Turn("chatcmpl-1"))
	})
}

func FuzzMessagesRequest(f *testing.F) {
	fuzzDecode(f, []string{
		`{"model":"claude-x","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`,
		`{"max_tokens":5,"system":[{"type":"text","text":"s"}],"messages":[{"role":"user","content":[{"type":"text","text":"q"}]},{"role":"assistant","content":[{"type":"thinking","thinking":"t"},{"type":"tool_use","id":"toolu_1","name":"f","input":{"a":1}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"r"}]}],"tools":[{"name":"f","input_schema":{"type":"object"}}],"tool_choice":{"type":"any"},"thinking":{"type":"enabled","budget_tokens":100},"stop_sequences":["x"]}`,
		`{"max_tokens":5,"messages":[{"role":"user","content":"q"},{"role":"system","content":"s"}],"thinking":{"type":"adaptive"},"output_config":{"format":{"type":"json_schema","schema":{"type":"object","properties":{"a":{"enum":["x"]}}}}},"tools":[{"type":"web_search_20250305","name":"web_search"}]}`,
		`{"max_tokens":9,"messages":[{"role":"user","content":"q"}],"tools":[{"name":"f","input_schema":{"type":"object","properties":{"u":{"type":"string","enum":["c","f"]},"n":{"type":"integer","maximum":3}},"required":["u"]}}],"tool_choice":{"type":"tool","name":"f"},"output_format":{"type":"json_schema","schema":{}}}`,
	}, func(s *Server, body []byte) error {
		var req anthropic.MessagesRequest
		if err := decodeJSON(body, &req); err != nil {
			return err
		}
		return s.prompt(req.Turn("msg_1", false))
	})
}

func FuzzResponsesRequest(f *testing.F) {
	fuzzDecode(f, []string{
		`{"input":"hi","instructions":"be brief","max_output_tokens":4}`,
		`{"input":[{"role":"user","content":[{"type":"input_text","text":"q"}]},{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":"r"}],"tools":[{"type":"function","name":"f","parameters":{"type":"object"}}],"text":{"format":{"type":"json_object"}},"reasoning":{"effort":"low"}}`,
		`{"input":[{"type":"function_call","call_id":"c","name":"g","namespace":"n","arguments":"{}"},{"type":"custom_tool_call","call_id":"d","name":"p","input":"x"},{"type":"custom_tool_call_output","call_id":"d","output":"ok"},{"type":"web_search_call","id":"w"}],"tools":[{"type":"namespace","name":"n","tools":[{"type":"function","name":"g"},{"type":"custom","name":"p"}]},{"type":"web_search"},{"type":"custom","name":"q"}],"tool_choice":{"type":"function","name":"n.g"}}`,
	}, func(s *Server, body []byte) error {
		var req responses.Request
		if err := decodeJSON(body, &req); err != nil {
			return err
		}
		return s.prompt(req.Turn("resp_1", nil))
	})
}

func FuzzCompletionRequest(f *testing.F) {
	fuzzDecode(f, []string{
		`{"prompt":"def f(","max_tokens":4,"logprobs":2,"echo":true}`,
		`{"prompt":[1,2,3]}`, `{"prompt":[[1,2]]}`, `{"prompt":["a"]}`,
	}, func(s *Server, body []byte) error {
		var req openai.CompletionRequest
		if err := decodeJSON(body, &req); err != nil {
			return err
		}
		return s.prompt(req.Turn("cmpl-1", s.local.ModelConfig().VocabSize))
	})
}

// prompt prepares a translated turn's prompt, as Submit would (err: the
// translation's refusal).
func (s *Server) prompt(t *turn.Request, err error) error {
	if err != nil {
		return err
	}
	_, _, err = s.local.Prompt(context.Background(), t)
	return err
}
