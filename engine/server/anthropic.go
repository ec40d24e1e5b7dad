package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/spoolhq/spool/engine/apiwire"
	"github.com/spoolhq/spool/engine/chat"
	"github.com/spoolhq/spool/engine/turn"
)

// messagesRequest is an Anthropic /v1/messages request.
type messagesRequest struct {
	Model         string             `json:"model"`
	MaxTokens     *int               `json:"max_tokens"`
	Messages      []anthropicMessage `json:"messages"`
	System        json.RawMessage    `json:"system"`
	Stream        bool               `json:"stream"`
	Temperature   *float64           `json:"temperature"`
	TopP          *float64           `json:"top_p"`
	TopK          *int               `json:"top_k"`
	StopSequences []string           `json:"stop_sequences"`
	Tools         []anthropicTool    `json:"tools"`
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
		Format *anthropicFormat `json:"format"`
		Effort string           `json:"effort"`
	} `json:"output_config"`
	OutputFormat *anthropicFormat `json:"output_format"`

	// dropped lists the tool types left out of what the model sees.
	dropped []string
	// count: the request is only measured (count_tokens), so a prompt
	// over the context is no error.
	count bool
}

// anthropicFormat is {"type": "json_schema", "schema": {...}}.
type anthropicFormat struct {
	Type   string          `json:"type"`
	Schema json.RawMessage `json:"schema"`
}

type anthropicMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

type anthropicBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	Thinking  string          `json:"thinking,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   json.RawMessage `json:"content,omitempty"`
}

type anthropicTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
	Type        string          `json:"type"`
}

// blocks reads content that is a string or an array of blocks.
func blocks(param string, raw json.RawMessage) ([]anthropicBlock, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, invalid(param, "%s: %v", param, err)
		}
		return []anthropicBlock{{Type: "text", Text: s}}, nil
	}
	var out []anthropicBlock
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, invalid(param, "%s must be a string or an array of content blocks", param)
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
			return "", invalid(fmt.Sprintf("%s[%d].type", param, i), "content blocks of type %q are not supported here", blk.Type)
		}
		b.WriteString(blk.Text)
	}
	return b.String(), nil
}

// toChat translates an Anthropic conversation into chat messages.
func (req *messagesRequest) toChat() ([]chat.Message, []chat.Tool, error) {
	var msgs []chat.Message
	if sys, err := blockText("system", req.System); err != nil {
		return nil, nil, err
	} else if sys != "" {
		msgs = append(msgs, chat.Message{Role: "system", Content: sys})
	}
	if len(req.Messages) == 0 {
		return nil, nil, invalid("messages", "messages must hold at least one message")
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
					return nil, nil, invalid(fmt.Sprintf("%s[%d].type", param, j), "content blocks of type %q are not supported: this model reads text only", b.Type)
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
						return nil, nil, invalid(fmt.Sprintf("%s[%d].input", param, j), "tool_use input must be a JSON object")
					}
					am.ToolCalls = append(am.ToolCalls, chat.ToolCall{ID: b.ID, Type: "function", Function: chat.FunctionCall{Name: b.Name, Arguments: json.RawMessage(input)}})
				default:
					return nil, nil, invalid(fmt.Sprintf("%s[%d].type", param, j), "content blocks of type %q are not supported in assistant turns", b.Type)
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
			return nil, nil, invalid(fmt.Sprintf("messages[%d].role", i), "message %d has the role %q; expected user, assistant or system", i, m.Role)
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
		if !validName(t.Name) {
			return nil, nil, invalid(fmt.Sprintf("tools[%d].name", i), "the tool name %q must be 1-64 characters of a-z, A-Z, 0-9, _, . and -", t.Name)
		}
		fn := map[string]any{"name": t.Name}
		if t.Description != "" {
			fn["description"] = t.Description
		}
		if len(t.InputSchema) > 0 {
			var schema map[string]any
			if err := json.Unmarshal(t.InputSchema, &schema); err != nil {
				return nil, nil, invalid(fmt.Sprintf("tools[%d].input_schema", i), "input_schema must be a JSON Schema object")
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
func anthropicToolChoice(typ, name string, tools []chat.Tool) (turn.ToolChoice, error) {
	switch typ {
	case "auto", "":
		return turn.ToolChoice{Mode: turn.ToolsAuto}, nil
	case "none":
		return turn.ToolChoice{Mode: turn.ToolsNone}, nil
	case "any":
		if len(tools) == 0 {
			return turn.ToolChoice{}, invalid("tool_choice", `tool_choice "any" needs tools`)
		}
		return turn.ToolChoice{Mode: turn.ToolsRequired}, nil
	case "tool":
		if toolNamed(tools, name) == nil {
			return turn.ToolChoice{}, invalid("tool_choice.name", "tool_choice names the tool %q, which is not among the tools", name)
		}
		return turn.ToolChoice{Mode: turn.ToolsFunction, Name: name}, nil
	}
	return turn.ToolChoice{}, invalid("tool_choice.type", "tool_choice type %q must be auto, any, tool or none", typ)
}

// anthropicThinking reads an Anthropic thinking type as the template's
// thinking switch (adaptive thinking is on: the switch is all there is).
func anthropicThinking(typ string) (bool, error) {
	switch typ {
	case "enabled", "adaptive":
		return true, nil
	case "disabled":
		return false, nil
	}
	return false, invalid("thinking.type", "thinking type %q must be enabled, adaptive or disabled", typ)
}

// messagesTurn validates a messages request and translates it into a
// turn.
func (s *Server) messagesTurn(req *messagesRequest) (*turn.Request, error) {
	if err := s.checkModel(req.Model, true); err != nil {
		return nil, err
	}
	if req.MaxTokens == nil {
		return nil, invalid("max_tokens", "max_tokens is required")
	}
	msgs, tools, err := req.toChat()
	if err != nil {
		return nil, err
	}
	if err := checkTools("tools", tools); err != nil {
		return nil, err
	}
	t := &turn.Request{ID: newID("msg_"), Model: req.Model, AnyModel: strings.HasPrefix(req.Model, "claude-"), Messages: msgs, Tools: tools,
		ToolChoice: turn.ToolChoice{Mode: turn.ToolsAuto}, Measure: true, Stream: req.Stream,
		Sampling: turn.Sampling{Temperature: req.Temperature, TopP: req.TopP, TopK: req.TopK}}
	if tc := req.ToolChoice; tc != nil {
		if t.ToolChoice, err = anthropicToolChoice(tc.Type, tc.Name, tools); err != nil {
			return nil, err
		}
	}
	if th := req.Thinking; th != nil {
		on, err := anthropicThinking(th.Type)
		if err != nil {
			return nil, err
		}
		t.Thinking = &on
	}
	if t.Stops, err = checkStops("stop_sequences", req.StopSequences); err != nil {
		return nil, err
	}
	rf, param, err := req.responseFormat()
	if err != nil {
		return nil, err
	}
	if t.Format, err = format(param, rf); err != nil {
		return nil, err
	}
	if len(req.dropped) > 0 {
		s.logf("/v1/messages: left out tools the model cannot call: %s", strings.Join(req.dropped, ", "))
	}
	if !req.count {
		if t.MaxTokens, err = maxTokens("max_tokens", req.MaxTokens); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// responseFormat reads output_config.format (or the older output_format)
// as the chat response format, with the parameter it came from; nil
// without one.
func (req *messagesRequest) responseFormat() (*responseFormat, string, error) {
	f, param := req.OutputFormat, "output_format"
	if req.OutputConfig != nil && req.OutputConfig.Format != nil {
		f, param = req.OutputConfig.Format, "output_config.format"
	}
	if f == nil {
		return nil, param, nil
	}
	if f.Type != "json_schema" {
		return nil, param, invalid(param+".type", "%s type %q must be json_schema", param, f.Type)
	}
	if schema := bytes.TrimSpace(f.Schema); len(schema) == 0 || schema[0] != '{' {
		return nil, param, invalid(param+".schema", "%s.schema must be a JSON Schema object", param)
	}
	return &responseFormat{Type: "json_schema", JSONSchema: &struct {
		Name   string          `json:"name"`
		Schema json.RawMessage `json:"schema"`
		Strict *bool           `json:"strict"`
	}{Name: "output", Schema: f.Schema}}, param, nil
}

// promptTooLong is Anthropic's wording for a prompt over the context,
// which clients such as Claude Code recognise (and then compact).
func promptTooLong(prompt, limit int) *apiError {
	e := contextLength(limit, "the prompt has %d tokens", prompt)
	e.Param, e.Message = "", fmt.Sprintf("prompt is too long: %d tokens > %d maximum", prompt, limit)
	return e
}

func (s *Server) handleCountTokens(w http.ResponseWriter, r *http.Request) {
	var req messagesRequest
	if err := decodeBody(r, &req); err != nil {
		writeError(w, r, err)
		return
	}
	if req.MaxTokens == nil {
		req.MaxTokens = new(1)
	}
	req.count = true
	t, err := s.messagesTurn(&req)
	if err != nil {
		writeError(w, r, err)
		return
	}
	n, err := s.local.CountTokens(r.Context(), t)
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]int{"input_tokens": n})
}

// Response shapes.

// anthropicUsage counts the prompt in three parts, as Anthropic does:
// tokens read from the prompt cache, tokens whose blocks this request
// wrote to it, and the rest (input_tokens); their sum is the prompt.
type anthropicUsage struct {
	InputTokens              int `json:"input_tokens"`
	OutputTokens             int `json:"output_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	*turn.EngineUsage
}

// toolUseID turns a call id into Anthropic's form.
func toolUseID(id string) string { return apiwire.ToolUseID(id) }

func toolInput(c turn.Call) json.RawMessage {
	if c.Arguments != "" {
		return json.RawMessage(c.Arguments)
	}
	return json.RawMessage("{}")
}

func (s *Server) handleMessages(w http.ResponseWriter, r *http.Request) {
	var req messagesRequest
	st, ok := startTurn(s, w, r, &req, s.messagesTurn)
	if !ok {
		return
	}
	if req.Stream {
		s.streamMessages(w, r, st)
		return
	}
	rep, ok := s.generateReply(w, r, st)
	if !ok {
		return
	}
	calls := make([]apiwire.AnthropicToolUse, len(rep.Calls))
	for i, c := range rep.Calls {
		calls[i] = apiwire.AnthropicToolUse{ID: toolUseID(c.ID), Name: c.Name, Input: toolInput(c)}
	}
	writeJSON(w, http.StatusOK, apiwire.AnthropicReply{
		ID: st.ID(), Model: s.cfg.ModelID, Thinking: rep.Reasoning, Text: rep.Text, Calls: calls,
		Finish: rep.End.Finish, StopSequence: rep.End.StopSequence, Usage: anthropicUsageOf(rep.End.Usage),
	}.Message())
}

func anthropicUsageOf(u turn.Usage) anthropicUsage {
	out := anthropicUsage{OutputTokens: u.CompletionTokens, CacheReadInputTokens: u.CachedTokens,
		CacheCreationInputTokens: u.CacheCreationTokens, EngineUsage: u.Engine}
	out.InputTokens = max(u.PromptTokens-u.CachedTokens-u.CacheCreationTokens, 0)
	return out
}
