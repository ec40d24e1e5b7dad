package chat

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Message is one chat message in the OpenAI chat-completions shape. It
// decodes directly from a request's messages array.
type Message struct {
	// Role is system, developer, user, assistant or tool.
	Role string `json:"role"`
	// Content is nil, a string, or a []ContentPart. Decoding JSON yields
	// one of these three.
	Content any `json:"content"`
	// ReasoningContent is an assistant turn's thinking.
	ReasoningContent string     `json:"reasoning_content,omitempty"`
	ToolCalls        []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID       string     `json:"tool_call_id,omitempty"`
	Name             string     `json:"name,omitempty"`
}

// ContentPart is one element of an array-valued message content. Only
// text parts carry text; templates decide what to do with other types.
type ContentPart struct {
	Type string `json:"type"`
	Text string `json:"text,omitempty"`
}

// ToolCall is one function call made by an assistant turn.
type ToolCall struct {
	ID       string       `json:"id,omitempty"`
	Type     string       `json:"type,omitempty"`
	Function FunctionCall `json:"function"`
}

// FunctionCall names the called function and its arguments.
type FunctionCall struct {
	Name string `json:"name"`
	// Arguments is a JSON object text (string, the OpenAI wire form), a
	// map[string]any, or a json.RawMessage holding an object. Decoding
	// JSON keeps a string as a string and an object as a json.RawMessage,
	// so the rendered prompt keeps the client's key order.
	Arguments any `json:"arguments,omitempty"`
}

// Tool is one OpenAI tool definition as decoded from JSON, for example
// {"type": "function", "function": {"name": ..., "parameters": {...}}}.
type Tool = map[string]any

// Options control one rendering.
type Options struct {
	Tools               []Tool
	AddGenerationPrompt bool
	// EnableThinking, when non-nil, is passed to the template as
	// enable_thinking; nil leaves it undefined (the template's default).
	EnableThinking *bool
	// Extra holds other chat_template_kwargs (for example
	// reasoning_effort). The fixed variables above take precedence.
	Extra map[string]any
	// Limits bound the render; zero fields take DefaultLimits.
	Limits Limits
}

// UnmarshalJSON decodes a message, accepting content as null, a string or
// an array of parts.
func (m *Message) UnmarshalJSON(data []byte) error {
	type plain Message
	var raw struct {
		plain
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return fmt.Errorf("chat: decoding message: %w", err)
	}
	*m = Message(raw.plain)
	content, err := decodeContent(raw.Content)
	if err != nil {
		return fmt.Errorf("chat: decoding %s message content: %w", m.Role, err)
	}
	m.Content = content
	return nil
}

func decodeContent(raw json.RawMessage) (any, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, nil
	}
	switch raw[0] {
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, err
		}
		return s, nil
	case '[':
		var parts []ContentPart
		if err := json.Unmarshal(raw, &parts); err != nil {
			return nil, err
		}
		return parts, nil
	}
	return nil, fmt.Errorf("content must be null, a string or an array of parts, found %.20s", raw)
}

// UnmarshalJSON decodes a function call, keeping string arguments as a
// string and object arguments as a json.RawMessage.
func (f *FunctionCall) UnmarshalJSON(data []byte) error {
	var raw struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return fmt.Errorf("chat: decoding function call: %w", err)
	}
	f.Name = raw.Name
	f.Arguments = nil
	args := bytes.TrimSpace(raw.Arguments)
	switch {
	case len(args) == 0 || bytes.Equal(args, []byte("null")):
	case args[0] == '"':
		var s string
		if err := json.Unmarshal(args, &s); err != nil {
			return fmt.Errorf("chat: decoding arguments of %q: %w", raw.Name, err)
		}
		f.Arguments = s
	case args[0] == '{':
		f.Arguments = json.RawMessage(bytes.Clone(args))
	default:
		return fmt.Errorf("chat: arguments of %q must be a JSON string or object, found %.20s", raw.Name, args)
	}
	return nil
}
