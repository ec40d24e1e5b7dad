package anthropic

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/spoolhq/spool/engine/apiwire"
	"github.com/spoolhq/spool/engine/chat"
	"github.com/spoolhq/spool/engine/turn"
)

// MessagesRequest is an Anthropic /v1/messages request.
type MessagesRequest struct {
	Model         string          `json:"model"`
	MaxTokens     *int            `json:"max_tokens"`
	Messages      []wireMessage   `json:"messages"`
	System        json.RawMessage `json:"system"`
	Stream        bool            `json:"stream"`
	Temperature   *float64        `json:"temperature"`
	TopP          *float64        `json:"top_p"`
	TopK          *int            `json:"top_k"`
	StopSequences []string        `json:"stop_sequences"`
	Tools         []wireTool      `json:"tools"`
	ToolChoice    *struct {
		Type string `json:"type"`
		Name string `json:"name"`
	} `json:"tool_choice"`
	Thinking *struct {
		Type         string `json:"type"`
		BudgetTokens int    `json:"budget_tokens"`
	} `json:"thinking"`
	// OutputConfig.Format and the older OutputFormat constrain the reply
	// to a JSON schema (messages.parse, structured output).
	OutputConfig *struct {
		Format *wireFormat `json:"format"`
		Effort string      `json:"effort"`
	} `json:"output_config"`
	OutputFormat *wireFormat `json:"output_format"`

	// dropped lists the tool types left out of what the model sees.
	dropped []string
}

// wireFormat is {"type": "json_schema", "schema": {...}}.
type wireFormat struct {
	Type   string          `json:"type"`
	Schema json.RawMessage `json:"schema"`
}

type wireMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

type block struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	Thinking  string          `json:"thinking,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   json.RawMessage `json:"content,omitempty"`
}

type wireTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
	Type        string          `json:"type"`
}

// blocks reads content that is a string or an array of blocks.
func blocks(param string, raw json.RawMessage) ([]block, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, apiwire.Invalid(param, "%s: %v", param, err)
		}
		return []block{{Type: "text", Text: s}}, nil
	}
	var out []block
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, apiwire.Invalid(param, "%s must be a string or an array of content blocks", param)
	}
	return out, nil
}

// blockText joins the text blocks of content (tool results).
func blockText(param string, raw json.RawMessage) (string, error) {
	bs, err := blocks(param, raw)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for i, blk := range bs {
		if blk.Type != "text" {
			return "", apiwire.Invalid(fmt.Sprintf("%s[%d].type", param, i), "content blocks of type %q are not supported here", blk.Type)
		}
		b.WriteString(blk.Text)
	}
	return b.String(), nil
}

// toChat translates an Anthropic conversation into chat messages.
func (req *MessagesRequest) toChat() ([]chat.Message, []chat.Tool, error) {
	var msgs []chat.Message
	if sys, err := blockText("system", req.System); err != nil {
		return nil, nil, err
	} else if sys != "" {
		msgs = append(msgs, chat.Message{Role: "system", Content: sys})
	}
	if len(req.Messages) == 0 {
		return nil, nil, apiwire.Invalid("messages", "messages must hold at least one message")
	}
	for i, m := range req.Messages {
		param := fmt.Sprintf("messages[%d].content", i)
		bs, err := blocks(param, m.Content)
		if err != nil {
			return nil, nil, err
		}
		switch m.Role {
		case "user":
			var text strings.Builder
			flush := func() {
				if text.Len() > 0 {
					msgs = append(msgs, chat.Message{Role: "user", Content: text.String()})
					text.Reset()
				}
			}
			for j, b := range bs {
				switch b.Type {
				case "text":
					text.WriteString(b.Text)
				case "tool_result":
					flush()
					out, err := blockText(fmt.Sprintf("%s[%d].content", param, j), b.Content)
					if err != nil {
						return nil, nil, err
					}
					msgs = append(msgs, chat.Message{Role: "tool", Content: out, ToolCallID: b.ToolUseID})
				default:
					return nil, nil, apiwire.Invalid(fmt.Sprintf("%s[%d].type", param, j), "content blocks of type %q are not supported: this model reads text only", b.Type)
				}
			}
			flush()
		case "assistant":
			am := chat.Message{Role: "assistant"}
			var text strings.Builder
			for j, b := range bs {
				switch b.Type {
				case "text":
					text.WriteString(b.Text)
				case "thinking":
					am.ReasoningContent += b.Thinking
				case "redacted_thinking":
				case "tool_use":
					input := bytes.TrimSpace(b.Input)
					if len(input) == 0 {
						input = []byte("{}")
					}
					if input[0] != '{' {
						return nil, nil, apiwire.Invalid(fmt.Sprintf("%s[%d].input", param, j), "tool_use input must be a JSON object")
					}
					am.ToolCalls = append(am.ToolCalls, chat.ToolCall{ID: b.ID, Type: "function", Function: chat.FunctionCall{Name: b.Name, Arguments: json.RawMessage(input)}})
				default:
					return nil, nil, apiwire.Invalid(fmt.Sprintf("%s[%d].type", param, j), "content blocks of type %q are not supported in assistant turns", b.Type)
				}
			}
			am.Content = text.String()
			msgs = append(msgs, am)
		case "system":
			// A system turn in place (Claude Code sends them).
			text, err := blockText(param, m.Content)
			if err != nil {
				return nil, nil, err
			}
			msgs = append(msgs, chat.Message{Role: "system", Content: text})
		default:
			return nil, nil, apiwire.Invalid(fmt.Sprintf("messages[%d].role", i), "message %d has the role %q; expected user, assistant or system", i, m.Role)
		}
	}
	var tools []chat.Tool
	for i, t := range req.Tools {
		if t.Type != "" && t.Type != "custom" {
			// Server tools (web_search_*, code_execution_*, ...) and
			// Anthropic-defined client tools have no schema the model
			// can call: they are left out, not refused.
			req.dropped = append(req.dropped, t.Type)
			continue
		}
		if !turn.ValidName(t.Name) {
			return nil, nil, apiwire.Invalid(fmt.Sprintf("tools[%d].name", i), "the tool name %q must be 1-64 characters of a-z, A-Z, 0-9, _, . and -", t.Name)
		}
		fn := map[string]any{"name": t.Name}
		if t.Description != "" {
			fn["description"] = t.Description
		}
		if len(t.InputSchema) > 0 {
			var schema map[string]any
			if err := json.Unmarshal(t.InputSchema, &schema); err != nil {
				return nil, nil, apiwire.Invalid(fmt.Sprintf("tools[%d].input_schema", i), "input_schema must be a JSON Schema object")
			}
			fn["parameters"] = schema
		}
		tools = append(tools, chat.Tool{"type": "function", "function": fn})
	}
	return msgs, tools, nil
}

// anthropicToolChoice reads an Anthropic tool_choice (auto, any, tool with
// its name, none) as the chat tool choice, for the local and the remote
// /v1/messages.
func toolChoice(typ, name string, tools []chat.Tool) (turn.ToolChoice, error) {
	switch typ {
	case "auto", "":
		return turn.ToolChoice{Mode: turn.ToolsAuto}, nil
	case "none":
		return turn.ToolChoice{Mode: turn.ToolsNone}, nil
	case "any":
		if len(tools) == 0 {
			return turn.ToolChoice{}, apiwire.Invalid("tool_choice", `tool_choice "any" needs tools`)
		}
		return turn.ToolChoice{Mode: turn.ToolsRequired}, nil
	case "tool":
		if turn.ToolNamed(tools, name) == nil {
			return turn.ToolChoice{}, apiwire.Invalid("tool_choice.name", "tool_choice names the tool %q, which is not among the tools", name)
		}
		return turn.ToolChoice{Mode: turn.ToolsFunction, Name: name}, nil
	}
	return turn.ToolChoice{}, apiwire.Invalid("tool_choice.type", "tool_choice type %q must be auto, any, tool or none", typ)
}

// anthropicThinking reads an Anthropic thinking type as the template's
// thinking switch (adaptive thinking is on: the switch is all there is).
func thinking(typ string) (bool, error) {
	switch typ {
	case "enabled", "adaptive":
		return true, nil
	case "disabled":
		return false, nil
	}
	return false, apiwire.Invalid("thinking.type", "thinking type %q must be enabled, adaptive or disabled", typ)
}

// format reads output_config.format (or the older output_format): a JSON
// schema the reply must follow; nil without one.
func (req *MessagesRequest) format() (*turn.Format, error) {
	f, param := req.OutputFormat, "output_format"
	if req.OutputConfig != nil && req.OutputConfig.Format != nil {
		f, param = req.OutputConfig.Format, "output_config.format"
	}
	if f == nil {
		return nil, nil
	}
	if f.Type != "json_schema" {
		return nil, apiwire.Invalid(param+".type", "%s type %q must be json_schema", param, f.Type)
	}
	schema := bytes.TrimSpace(f.Schema)
	if len(schema) == 0 || schema[0] != '{' {
		return nil, apiwire.Invalid(param+".schema", "%s.schema must be a JSON Schema object", param)
	}
	return &turn.Format{Param: param, Type: turn.JSONSchema, Name: "output", Schema: schema}, nil
}

// Dropped are the tool types left out of what the model sees (server
// tools, Anthropic-defined client tools: they have no schema the model
// can call).
func (req *MessagesRequest) Dropped() []string { return req.dropped }

// Turn checks the request and translates it into a turn of id. count
// makes max_tokens optional (count_tokens). A Claude model name (Claude
// Code sends one) stands for the served model.
func (req *MessagesRequest) Turn(id string, count bool) (*turn.Request, error) {
	if req.MaxTokens == nil && !count {
		return nil, apiwire.Invalid("max_tokens", "max_tokens is required")
	}
	msgs, tools, err := req.toChat()
	if err != nil {
		return nil, err
	}
	if err := turn.CheckTools("tools", tools); err != nil {
		return nil, err
	}
	t := &turn.Request{ID: id, Model: req.Model, AnyModel: strings.HasPrefix(req.Model, "claude-"), Messages: msgs, Tools: tools,
		ToolChoice: turn.ToolChoice{Mode: turn.ToolsAuto}, Measure: true, Stream: req.Stream,
		Sampling: turn.Sampling{Temperature: req.Temperature, TopP: req.TopP, TopK: req.TopK}}
	if tc := req.ToolChoice; tc != nil {
		if t.ToolChoice, err = toolChoice(tc.Type, tc.Name, tools); err != nil {
			return nil, err
		}
	}
	if th := req.Thinking; th != nil {
		on, err := thinking(th.Type)
		if err != nil {
			return nil, err
		}
		t.Thinking = &on
	}
	if t.Stops, err = turn.CheckStops("stop_sequences", req.StopSequences); err != nil {
		return nil, err
	}
	if t.Format, err = req.format(); err != nil {
		return nil, err
	}
	if !count {
		if t.MaxTokens, err = turn.CheckMaxTokens("max_tokens", req.MaxTokens); err != nil {
			return nil, err
		}
	}
	return t, nil
}
