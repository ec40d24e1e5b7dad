package anthropic

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/spoolhq/spool/engine/apiwire"
	"github.com/spoolhq/spool/engine/turn"
)

// MessageReply is a whole (not streamed) reply of the Messages API.
type MessageReply struct {
	ID           string           `json:"id"`
	Type         string           `json:"type"`
	Role         string           `json:"role"`
	Model        string           `json:"model"`
	Content      []map[string]any `json:"content"`
	StopReason   *string          `json:"stop_reason"`
	StopSequence *string          `json:"stop_sequence"`
	Usage        Usage            `json:"usage"`
}

// Usage counts the prompt in parts, as Anthropic does: tokens read from
// the prompt cache, and the rest (input_tokens). The local engine adds the
// tokens whose blocks this request wrote to the cache (they leave
// input_tokens too: the parts sum to the prompt) and Spool's report of the
// turn; a remote engine's usage has neither.
type Usage struct {
	InputTokens          int `json:"input_tokens"`
	OutputTokens         int `json:"output_tokens"`
	CacheReadInputTokens int `json:"cache_read_input_tokens"`
	*localUsage
}

type localUsage struct {
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	*turn.EngineUsage
}

// UsageOf is the usage of u.
func UsageOf(u turn.Usage) Usage {
	cached := min(u.CachedTokens, u.PromptTokens)
	out := Usage{InputTokens: max(u.PromptTokens-cached-u.CacheCreationTokens, 0), OutputTokens: u.CompletionTokens, CacheReadInputTokens: cached}
	if u.Engine != nil {
		out.localUsage = &localUsage{CacheCreationInputTokens: u.CacheCreationTokens, EngineUsage: u.Engine}
	}
	return out
}

// Reply is the answer of a whole reply rep of message id: a thinking block
// when there is reasoning, a text block when there is text or no tool
// call, then a tool_use block per call.
func Reply(id string, rep *turn.Reply) MessageReply {
	content := []map[string]any{}
	if rep.Reasoning != "" {
		content = append(content, map[string]any{"type": "thinking", "thinking": rep.Reasoning, "signature": ""})
	}
	if rep.Text != "" || len(rep.Calls) == 0 {
		content = append(content, map[string]any{"type": "text", "text": rep.Text})
	}
	for _, c := range rep.Calls {
		content = append(content, map[string]any{"type": "tool_use", "id": ToolUseID(c.ID), "name": c.Name, "input": toolInput(c.Arguments)})
	}
	reason, seq := Stop(rep.End.Finish, rep.End.StopSequence)
	return MessageReply{ID: id, Type: "message", Role: "assistant", Model: rep.End.Model, Content: content,
		StopReason: &reason, StopSequence: seq, Usage: UsageOf(rep.End.Usage)}
}

// ToolUseID is a call's id in Anthropic's form (toolu_...); a call without
// one gets a new one.
func ToolUseID(id string) string {
	if id == "" {
		return apiwire.NewID("toolu_")
	}
	return "toolu_" + strings.TrimPrefix(id, "call_")
}

// toolInput is a call's input: its arguments when they are a JSON object,
// else an empty object (Anthropic's input must be one).
func toolInput(args string) json.RawMessage {
	a := bytes.TrimSpace([]byte(args))
	if len(a) > 0 && a[0] == '{' && json.Valid(a) {
		return a
	}
	return json.RawMessage("{}")
}

// Stop maps a reply's finish reason (turn's: stop, length, tool_calls)
// and the stop sequence that ended it ("" for none) to Anthropic's
// stop_reason and stop_sequence (nil unless a stop sequence matched).
func Stop(finish, stopSequence string) (reason string, sequence *string) {
	switch {
	case stopSequence != "":
		return "stop_sequence", &stopSequence
	case finish == turn.FinishLength:
		return "max_tokens", nil
	case finish == turn.FinishToolCalls:
		return "tool_use", nil
	}
	return "end_turn", nil
}

// Error is err as answered to an Anthropic client. A prompt over the
// context is worded "prompt is too long", which clients such as Claude
// Code recognise (and then compact): with its size and the limit when
// they are known.
func Error(err error) *apiwire.Error {
	var ce *turn.ContextError
	if errors.As(err, &ce) {
		e := apiwire.ContextLength(ce.Limit, "the prompt has %d tokens", ce.Prompt)
		e.Param, e.Message = "", fmt.Sprintf("prompt is too long: %d tokens > %d maximum", ce.Prompt, ce.Limit)
		return e
	}
	e := turn.Error(err)
	if e.Code != "context_length_exceeded" || strings.HasPrefix(e.Message, "prompt is too long") {
		return e
	}
	c := *e
	c.Message = "prompt is too long: " + e.Message
	return &c
}
