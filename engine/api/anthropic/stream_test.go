package anthropic

import (
	"context"
	"strings"
	"testing"

	"github.com/spoolhq/spool/engine/turn"
)

// stub is a turn.Stream's identity, for StartStream.
type stub struct{ prompt int }

func (stub) ID() string                               { return "msg_1" }
func (stub) Model() string                            { return "m" }
func (s stub) PromptTokens() int                      { return s.prompt }
func (stub) Next(context.Context) (turn.Piece, error) { return turn.Piece{}, turn.ErrEnded }
func (stub) Close()                                   {}

// TestStream: the pieces of a turn become the message's events: blocks
// opened one at a time, a call whole (the local engine's) or in parts (a
// remote's), a ping for a keep-alive, the stop reason and usage.
func TestStream(t *testing.T) {
	cases := []struct {
		name   string
		prompt int
		pieces []turn.Piece
		want   []string
	}{
		{"local: thinking, text, a whole call", 7, []turn.Piece{
			{Reasoning: "hm"}, {Idle: true}, {Text: "Let me look."},
			{Calls: []turn.Call{{Index: 0, ID: "call_1", Name: "f", Arguments: `{"a":1}`}}},
			{End: &turn.End{Finish: turn.FinishToolCalls, Usage: turn.Usage{PromptTokens: 7, CompletionTokens: 4, Engine: &turn.EngineUsage{}}}},
		}, []string{
			`message_start {"message":{"content":[],"id":"msg_1","model":"m","role":"assistant","stop_reason":null,"stop_sequence":null,"type":"message","usage":{"input_tokens":7,"output_tokens":0}},"type":"message_start"}`,
			`content_block_start {"content_block":{"signature":"","thinking":"","type":"thinking"},"index":0,"type":"content_block_start"}`,
			`content_block_delta {"delta":{"thinking":"hm","type":"thinking_delta"},"index":0,"type":"content_block_delta"}`,
			`ping {"type":"ping"}`,
			`content_block_stop {"index":0,"type":"content_block_stop"}`,
			`content_block_start {"content_block":{"text":"","type":"text"},"index":1,"type":"content_block_start"}`,
			`content_block_delta {"delta":{"text":"Let me look.","type":"text_delta"},"index":1,"type":"content_block_delta"}`,
			`content_block_stop {"index":1,"type":"content_block_stop"}`,
			`content_block_start {"content_block":{"id":"toolu_1","input":{},"name":"f","type":"tool_use"},"index":2,"type":"content_block_start"}`,
			`content_block_delta {"delta":{"partial_json":"{\"a\":1}","type":"input_json_delta"},"index":2,"type":"content_block_delta"}`,
			`content_block_stop {"index":2,"type":"content_block_stop"}`,
			`message_delta {"delta":{"stop_reason":"tool_use","stop_sequence":null},"type":"message_delta","usage":{"input_tokens":7,"output_tokens":4,"cache_read_input_tokens":0,"cache_creation_input_tokens":0,"lane":"","peak_batch":0,"queue_ms":0,"prefill_ms":0,"decode_ms":0,"mtp_drafts_proposed":0,"mtp_drafts_accepted":0}}`,
			`message_stop {"type":"message_stop"}`,
		}},
		{"remote: a call in parts, no name yet", -1, []turn.Piece{
			{Calls: []turn.Call{{Index: 0, ID: "call_2"}}},
			{Calls: []turn.Call{{Index: 0, Name: "g", Arguments: `{"b"`}}},
			{Calls: []turn.Call{{Index: 0, Arguments: `:2}`}}},
			{End: &turn.End{Finish: turn.FinishToolCalls, Usage: turn.Usage{PromptTokens: 3, CachedTokens: 1, CompletionTokens: 2}}},
		}, []string{
			`message_start {"message":{"content":[],"id":"msg_1","model":"m","role":"assistant","stop_reason":null,"stop_sequence":null,"type":"message","usage":{"input_tokens":0,"output_tokens":0,"cache_read_input_tokens":0}},"type":"message_start"}`,
			`content_block_start {"content_block":{"id":"toolu_2","input":{},"name":"g","type":"tool_use"},"index":0,"type":"content_block_start"}`,
			`content_block_delta {"delta":{"partial_json":"{\"b\"","type":"input_json_delta"},"index":0,"type":"content_block_delta"}`,
			`content_block_delta {"delta":{"partial_json":":2}","type":"input_json_delta"},"index":0,"type":"content_block_delta"}`,
			`content_block_stop {"index":0,"type":"content_block_stop"}`,
			`message_delta {"delta":{"stop_reason":"tool_use","stop_sequence":null},"type":"message_delta","usage":{"input_tokens":2,"output_tokens":2,"cache_read_input_tokens":1}}`,
			`message_stop {"type":"message_stop"}`,
		}},
		{"remote: interleaved calls", -1, []turn.Piece{
			{Calls: []turn.Call{{Index: 0, ID: "a", Name: "f"}, {Index: 1, ID: "b", Name: "g"}, {Index: 0, Arguments: "{}"}}},
		}, []string{
			`message_start {"message":{"content":[],"id":"msg_1","model":"m","role":"assistant","stop_reason":null,"stop_sequence":null,"type":"message","usage":{"input_tokens":0,"output_tokens":0,"cache_read_input_tokens":0}},"type":"message_start"}`,
			`content_block_start {"content_block":{"id":"toolu_a","input":{},"name":"f","type":"tool_use"},"index":0,"type":"content_block_start"}`,
			`content_block_stop {"index":0,"type":"content_block_stop"}`,
			`content_block_start {"content_block":{"id":"toolu_b","input":{},"name":"g","type":"tool_use"},"index":1,"type":"content_block_start"}`,
			`error {"type":"error","error":{"type":"api_error","message":"the remote engine interleaved the deltas of two tool calls, which Anthropic content blocks cannot carry"}}`,
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := &recorder{}
			s, err := StartStream(r, stub{prompt: c.prompt})
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range c.pieces {
				if err := s.Piece(p); err != nil {
					break
				}
			}
			if got := strings.Join(r.lines, "\n"); got != strings.Join(c.want, "\n") {
				t.Errorf("events\n%s\nwant\n%s", got, strings.Join(c.want, "\n"))
			}
		})
	}
}
