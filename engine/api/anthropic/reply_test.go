package anthropic

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/spoolhq/spool/engine/apiwire"
	"github.com/spoolhq/spool/engine/turn"
)

func TestStop(t *testing.T) {
	for _, tt := range []struct {
		finish, seq    string
		reason, gotSeq string
	}{
		{"stop", "", "end_turn", ""},
		{"", "", "end_turn", ""},
		{"stop", "END", "stop_sequence", "END"},
		{"tool_calls", "END", "stop_sequence", "END"}, // a stop string that ended a reply with calls
		{"length", "", "max_tokens", ""},
		{"tool_calls", "", "tool_use", ""},
	} {
		reason, seq := Stop(tt.finish, tt.seq)
		got := ""
		if seq != nil {
			got = *seq
		}
		if reason != tt.reason || got != tt.gotSeq || (seq == nil) != (tt.gotSeq == "") {
			t.Errorf("Stop(%q, %q) = %q, %v; want %q, %q", tt.finish, tt.seq, reason, seq, tt.reason, tt.gotSeq)
		}
	}
}

// TestReply: a whole reply's blocks, stop reason and usage: the local
// engine's usage with the cache it wrote and its report, a remote's with
// neither.
func TestReply(t *testing.T) {
	remote := turn.Usage{PromptTokens: 5, CachedTokens: 2, CompletionTokens: 2}
	local := turn.Usage{PromptTokens: 5, CachedTokens: 2, CacheCreationTokens: 1, CompletionTokens: 2, Engine: &turn.EngineUsage{Lane: "single"}}
	for _, tt := range []struct {
		name  string
		reply turn.Reply
		want  string
	}{
		{"empty", turn.Reply{End: turn.End{Finish: "stop", Model: "m", Usage: remote}},
			`{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[{"text":"","type":"text"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":3,"output_tokens":2,"cache_read_input_tokens":2}}`},
		{"thinking and text, stopped", turn.Reply{Reasoning: "hm", Text: "hi", End: turn.End{Finish: "stop", StopSequence: "###", Model: "m", Usage: local}},
			`{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[{"signature":"","thinking":"hm","type":"thinking"},{"text":"hi","type":"text"}],"stop_reason":"stop_sequence","stop_sequence":"###","usage":{"input_tokens":2,"output_tokens":2,"cache_read_input_tokens":2,"cache_creation_input_tokens":1,"lane":"single","peak_batch":0,"queue_ms":0,"prefill_ms":0,"decode_ms":0,"mtp_drafts_proposed":0,"mtp_drafts_accepted":0}}`},
		{"a call, no text", turn.Reply{Calls: []turn.Call{{ID: "call_a", Name: "f", Arguments: `{"x":1}`}}, End: turn.End{Finish: "tool_calls", Model: "m", Usage: remote}},
			`{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[{"id":"toolu_a","input":{"x":1},"name":"f","type":"tool_use"}],"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":3,"output_tokens":2,"cache_read_input_tokens":2}}`},
		{"text and a call of no object, cut", turn.Reply{Text: "ok", Calls: []turn.Call{{ID: "call_b", Name: "g", Arguments: `[1]`}}, End: turn.End{Finish: "length", Model: "m", Usage: remote}},
			`{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[{"text":"ok","type":"text"},{"id":"toolu_b","input":{},"name":"g","type":"tool_use"}],"stop_reason":"max_tokens","stop_sequence":null,"usage":{"input_tokens":3,"output_tokens":2,"cache_read_input_tokens":2}}`},
	} {
		got, err := json.Marshal(Reply("msg_1", &tt.reply))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != tt.want {
			t.Errorf("%s:\n got %s\nwant %s", tt.name, got, tt.want)
		}
	}
}

// TestError: a prompt over the context in Anthropic's words, with its size
// when known, whichever engine refused it.
func TestError(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want string
	}{
		{&turn.ContextError{Prompt: 300, Limit: 256, AtLeast: true}, "prompt is too long: 300 tokens > 256 maximum"},
		{apiwire.ContextLength(256, "the request has 300 messages"), "prompt is too long: this model's context length is 256 tokens, but the request has 300 messages"},
		{&apiwire.Error{Status: 400, Code: "context_length_exceeded", Message: "prompt is too long: already"}, "prompt is too long: already"},
		{apiwire.Invalid("x", "bad"), "bad"},
		{errors.New("boom /home/x"), "the server failed to answer this request (an internal error: the server's log has its cause)"},
		{apiwire.Public("expert 3 of layer 4 is damaged"), "the server failed to answer this request: expert 3 of layer 4 is damaged"},
	} {
		if got := Error(tt.err); got.Message != tt.want {
			t.Errorf("%v: %q, want %q", tt.err, got.Message, tt.want)
		}
	}
	if e := Error(&turn.ContextError{Prompt: 3, Limit: 2}); e.Status != 400 || e.Anthropic().Error.Type != "invalid_request_error" || !strings.HasPrefix(e.Message, "prompt is too long") {
		t.Errorf("%+v", e)
	}
}
