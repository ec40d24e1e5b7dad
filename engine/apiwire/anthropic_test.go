package apiwire

import (
	"encoding/json"
	"testing"
)

func TestAnthropicStop(t *testing.T) {
	for _, tt := range []struct {
		finish, seq    string
		reason, gotSeq string
	}{
		{"stop", "", "end_turn", ""},
		{"", "", "end_turn", ""},
		{"stop", "END", "stop_sequence", "END"},
		{"tool_calls", "END", "stop_sequence", "END"}, // the local engine's: a stop string that ended a reply with calls
		{"length", "", "max_tokens", ""},
		{"tool_calls", "", "tool_use", ""},
	} {
		reason, seq := AnthropicStop(tt.finish, tt.seq)
		got := ""
		if seq != nil {
			got = *seq
		}
		if reason != tt.reason || got != tt.gotSeq || (seq == nil) != (tt.gotSeq == "") {
			t.Errorf("AnthropicStop(%q, %q) = %q, %v; want %q, %q", tt.finish, tt.seq, reason, seq, tt.reason, tt.gotSeq)
		}
	}
}

func TestAnthropicReplyMessage(t *testing.T) {
	usage := map[string]int{"input_tokens": 3, "output_tokens": 2}
	for _, tt := range []struct {
		name  string
		reply AnthropicReply
		want  string
	}{
		{"empty", AnthropicReply{ID: "msg_1", Model: "m", Finish: "stop", Usage: usage},
			`{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[{"text":"","type":"text"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":3,"output_tokens":2}}`},
		{"thinking and text, stopped", AnthropicReply{ID: "msg_2", Model: "m", Thinking: "hm", Text: "hi", Finish: "stop", StopSequence: "###", Usage: usage},
			`{"id":"msg_2","type":"message","role":"assistant","model":"m","content":[{"signature":"","thinking":"hm","type":"thinking"},{"text":"hi","type":"text"}],"stop_reason":"stop_sequence","stop_sequence":"###","usage":{"input_tokens":3,"output_tokens":2}}`},
		{"a call, no text", AnthropicReply{ID: "msg_3", Model: "m", Calls: []AnthropicToolUse{{ID: "toolu_a", Name: "f", Input: json.RawMessage(`{"x":1}`)}}, Finish: "tool_calls", Usage: usage},
			`{"id":"msg_3","type":"message","role":"assistant","model":"m","content":[{"id":"toolu_a","input":{"x":1},"name":"f","type":"tool_use"}],"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":3,"output_tokens":2}}`},
		{"text and a call, cut", AnthropicReply{ID: "msg_4", Model: "m", Text: "ok", Calls: []AnthropicToolUse{{ID: "toolu_b", Name: "g", Input: json.RawMessage(`{}`)}}, Finish: "length", Usage: usage},
			`{"id":"msg_4","type":"message","role":"assistant","model":"m","content":[{"text":"ok","type":"text"},{"id":"toolu_b","input":{},"name":"g","type":"tool_use"}],"stop_reason":"max_tokens","stop_sequence":null,"usage":{"input_tokens":3,"output_tokens":2}}`},
	} {
		got, err := json.Marshal(tt.reply.Message())
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != tt.want {
			t.Errorf("%s:\n got %s\nwant %s", tt.name, got, tt.want)
		}
	}
}
