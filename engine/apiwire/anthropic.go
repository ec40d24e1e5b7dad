package apiwire

import "encoding/json"

// AnthropicMessage is a whole (not streamed) reply of Anthropic's Messages
// API, as the local engine and the remote front answer it. Usage is the
// front's own usage object.
type AnthropicMessage struct {
	ID           string           `json:"id"`
	Type         string           `json:"type"`
	Role         string           `json:"role"`
	Model        string           `json:"model"`
	Content      []map[string]any `json:"content"`
	StopReason   *string          `json:"stop_reason"`
	StopSequence *string          `json:"stop_sequence"`
	Usage        any              `json:"usage"`
}

// AnthropicToolUse is a tool call of a reply: its id in Anthropic's form
// (ToolUseID), the tool's name and its input, a JSON object.
type AnthropicToolUse struct {
	ID, Name string
	Input    json.RawMessage
}

// AnthropicReply is what a whole reply says, in the fronts' terms.
type AnthropicReply struct {
	ID, Model string
	// Thinking is the reasoning, Text the visible text.
	Thinking, Text string
	Calls          []AnthropicToolUse
	// Finish and StopSequence are AnthropicStop's.
	Finish, StopSequence string
	// Usage is the front's usage object.
	Usage any
}

// Message is r in Anthropic's shape: a thinking block when there is
// reasoning, a text block when there is text or no tool call, then a
// tool_use block per call.
func (r AnthropicReply) Message() AnthropicMessage {
	content := []map[string]any{}
	if r.Thinking != "" {
		content = append(content, map[string]any{"type": "thinking", "thinking": r.Thinking, "signature": ""})
	}
	if r.Text != "" || len(r.Calls) == 0 {
		content = append(content, map[string]any{"type": "text", "text": r.Text})
	}
	for _, c := range r.Calls {
		content = append(content, map[string]any{"type": "tool_use", "id": c.ID, "name": c.Name, "input": c.Input})
	}
	reason, seq := AnthropicStop(r.Finish, r.StopSequence)
	return AnthropicMessage{ID: r.ID, Type: "message", Role: "assistant", Model: r.Model, Content: content,
		StopReason: &reason, StopSequence: seq, Usage: r.Usage}
}

// AnthropicStop maps a reply's OpenAI-style finish reason ("stop",
// "length", "tool_calls") and the stop sequence that ended it ("" for
// none) to Anthropic's stop_reason and stop_sequence (nil unless a stop
// sequence matched).
func AnthropicStop(finish, stopSequence string) (reason string, sequence *string) {
	switch {
	case stopSequence != "":
		return "stop_sequence", &stopSequence
	case finish == "length":
		return "max_tokens", nil
	case finish == "tool_calls":
		return "tool_use", nil
	}
	return "end_turn", nil
}
