package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/spoolhq/spool/engine/chat"
)

// chatInput is a chat turn in the form every endpoint translates to.
type chatInput struct {
	messages []chat.Message
	tools    []chat.Tool
	choice   toolChoice
	// thinking is enable_thinking (nil: the template's default).
	thinking *bool
	extra    map[string]any
	// constrained says a response format constrains the whole output, so
	// the reply must not start with reasoning.
	constrained bool
	// ctx, when set, cancels the template's render (the request's).
	ctx context.Context
	// countTokens, when past the context, is how many tokens to count
	// before giving up: /v1/messages reports (and count_tokens returns)
	// the size of a prompt over the context.
	countTokens int
	// tooLong words the refusal of a prompt of more than countTokens
	// tokens (default contextExceededAtLeast).
	tooLong func(prompt, limit int) *apiError
}

// toolChoice is auto, none, required, or function (a named function).
type toolChoice struct {
	mode string
	name string
}

// parseToolChoice reads OpenAI's tool_choice: "none" | "auto" |
// "required" | {"type":"function","function":{"name":...}}; the Responses
// API's flat {"type":"function","name":...} is accepted too.
func parseToolChoice(raw json.RawMessage, tools []chat.Tool) (toolChoice, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return toolChoice{mode: "auto"}, nil
	}
	var mode string
	if err := json.Unmarshal(raw, &mode); err == nil {
		switch mode {
		case "none", "auto", "required":
			if mode == "required" && len(tools) == 0 {
				return toolChoice{}, invalid("tool_choice", `tool_choice "required" needs tools`)
			}
			return toolChoice{mode: mode}, nil
		}
		return toolChoice{}, invalid("tool_choice", `tool_choice %q must be "none", "auto", "required" or a function`, mode)
	}
	var obj struct {
		Type     string `json:"type"`
		Name     string `json:"name"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil || obj.Type != "function" {
		return toolChoice{}, invalid("tool_choice", `tool_choice must be "none", "auto", "required" or {"type":"function","function":{"name":...}}`)
	}
	name := obj.Function.Name
	if name == "" {
		name = obj.Name
	}
	if toolNamed(tools, name) == nil {
		return toolChoice{}, invalid("tool_choice", "tool_choice names the function %q, which is not among the tools", name)
	}
	return toolChoice{mode: "function", name: name}, nil
}

// checkTools validates OpenAI tool definitions.
func checkTools(param string, tools []chat.Tool) error {
	seen := map[string]bool{}
	for i, t := range tools {
		if typ, _ := t["type"].(string); typ != "function" {
			return invalid(fmt.Sprintf("%s[%d].type", param, i), `tool %d: only tools of type "function" are supported`, i)
		}
		fn, _ := t["function"].(map[string]any)
		if fn == nil {
			return invalid(fmt.Sprintf("%s[%d].function", param, i), "tool %d has no function object", i)
		}
		name, _ := fn["name"].(string)
		if !validName(name) {
			return invalid(fmt.Sprintf("%s[%d].function.name", param, i), "tool %d: the function name %q must be 1-64 characters of a-z, A-Z, 0-9, _, . and -", i, name)
		}
		if seen[name] {
			return invalid(fmt.Sprintf("%s[%d].function.name", param, i), "the function %q is declared twice", name)
		}
		seen[name] = true
		if p, ok := fn["parameters"]; ok && p != nil {
			if _, ok := p.(map[string]any); !ok {
				return invalid(fmt.Sprintf("%s[%d].function.parameters", param, i), "tool %q: parameters must be a JSON Schema object", name)
			}
		}
	}
	return nil
}

func toolNamed(tools []chat.Tool, name string) chat.Tool {
	for _, t := range tools {
		if fn, _ := t["function"].(map[string]any); fn != nil && fn["name"] == name {
			return t
		}
	}
	return nil
}

// checkMessages validates chat messages.
func checkMessages(param string, msgs []chat.Message) error {
	if len(msgs) == 0 {
		return invalid(param, "%s must hold at least one message", param)
	}
	for i, m := range msgs {
		switch m.Role {
		case "system", "developer", "user", "assistant", "tool":
		default:
			return invalid(fmt.Sprintf("%s[%d].role", param, i), "message %d has the role %q; expected system, developer, user, assistant or tool", i, m.Role)
		}
		if parts, ok := m.Content.([]chat.ContentPart); ok {
			for j, p := range parts {
				if p.Type != "text" && p.Type != "input_text" && p.Type != "output_text" {
					return invalid(fmt.Sprintf("%s[%d].content[%d].type", param, i, j), "content parts of type %q are not supported: %s reads text only", p.Type, "this model")
				}
			}
		}
	}
	return nil
}

// renderChat renders a chat turn into the prompt and the turn fields that
// depend on it.
func (s *Server) renderChat(in chatInput, t *turn) error {
	if s.eng.Template == nil {
		return invalid("messages", "the model %q has no chat template; use /v1/completions", s.cfg.ModelID)
	}
	// Every message renders to at least one token: more messages than the
	// context holds are refused before any work is done on them.
	ctxLen := s.eng.Scheduler.Config().ContextLength
	if len(in.messages) > ctxLen {
		return tooManyMessages(len(in.messages), ctxLen)
	}
	ctx := in.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	opts := chat.Options{AddGenerationPrompt: true, EnableThinking: in.thinking, Extra: in.extra,
		Limits: s.templateLimits(ctxLen, len(in.messages))}
	if in.choice.mode != "none" {
		opts.Tools = in.tools
	}
	// Roles the template may not know become ones it does.
	msgs := make([]chat.Message, len(in.messages))
	for i, m := range in.messages {
		if m.Role == "developer" {
			m.Role = "system"
		}
		msgs[i] = m
	}
	text, err := s.eng.Template.RenderContext(ctx, msgs, opts)
	if err != nil {
		var le *chat.LimitError
		if errors.As(err, &le) && le.What == "the output" {
			// The text cannot fit the context whatever it tokenizes to.
			return renderedTooLong(le.Max, ctxLen)
		}
		if errors.Is(err, chat.ErrTemplateLimit) {
			return templateLimit(err)
		}
		return invalid("messages", "the chat template refused the messages: %v", err)
	}
	t.chat = true
	t.inThink = chat.PromptOpensThink(text)
	t.tools = opts.Tools
	t.parse = len(opts.Tools) > 0
	if in.constrained || in.choice.mode == "required" || in.choice.mode == "function" {
		if t.inThink {
			// A forced reply starts at once: close the reasoning block.
			text += "</think>"
			t.inThink = false
		}
	}
	switch in.choice.mode {
	case "required":
		t.prefix = toolCallOpen
	case "function":
		t.prefix = toolCallOpen + in.choice.name
	}
	if t.prefix != "" && s.toolVocab.usable() {
		if in.constrained {
			return invalid("tool_choice", "a forced tool_choice cannot be combined with a JSON response format")
		}
		c, err := newToolConstraint(s.toolVocab, opts.Tools, in.choice.name, s.eng.Constraints)
		if err != nil {
			return err
		}
		t.req.Constraint = c
	}
	text += t.prefix
	prompt, ok := s.eng.Tokenizer.EncodeLimit(text, max(ctxLen, in.countTokens))
	if !ok {
		if in.tooLong != nil {
			return in.tooLong(len(prompt), ctxLen)
		}
		return contextExceededAtLeast(len(prompt), ctxLen)
	}
	t.prompt = prompt
	return nil
}

// thinkingFrom resolves reasoning_effort and chat_template_kwargs into
// enable_thinking and extra template variables.
func thinkingFrom(effort string, kwargs map[string]any) (*bool, map[string]any, error) {
	var thinking *bool
	extra := map[string]any{}
	switch effort {
	case "":
	case "none", "minimal":
		thinking = new(false)
	case "low", "medium", "high", "xhigh", "max":
		thinking = new(true)
		extra["reasoning_effort"] = effort
	default:
		return nil, nil, invalid("reasoning_effort", "reasoning_effort %q must be none, minimal, low, medium, high or xhigh", effort)
	}
	for k, v := range kwargs {
		if k == "enable_thinking" {
			b, ok := v.(bool)
			if !ok {
				return nil, nil, invalid("chat_template_kwargs.enable_thinking", "chat_template_kwargs.enable_thinking must be a boolean")
			}
			thinking = &b
			continue
		}
		if strings.HasPrefix(k, "_") {
			continue
		}
		extra[k] = v
	}
	if len(extra) == 0 {
		extra = nil
	}
	return thinking, extra, nil
}

// responseFormat is OpenAI's response_format.
type responseFormat struct {
	Type       string `json:"type"`
	JSONSchema *struct {
		Name   string          `json:"name"`
		Schema json.RawMessage `json:"schema"`
		Strict *bool           `json:"strict"`
	} `json:"json_schema"`
}

// constraint compiles a response format; nil for plain text.
func (s *Server) constraint(param string, f *responseFormat, t *turn) (bool, error) {
	if f == nil || f.Type == "" || f.Type == "text" {
		return false, nil
	}
	var schema json.RawMessage
	switch f.Type {
	case "json_object":
	case "json_schema":
		if f.JSONSchema == nil {
			return false, invalid(param+".json_schema", "%s.json_schema is required with type json_schema", param)
		}
		if !validName(f.JSONSchema.Name) {
			return false, invalid(param+".json_schema.name", "the schema name %q must be 1-64 characters of a-z, A-Z, 0-9, _ and -", f.JSONSchema.Name)
		}
		schema = bytes.TrimSpace(f.JSONSchema.Schema)
		if len(schema) == 0 || schema[0] != '{' {
			return false, invalid(param+".json_schema.schema", "%s.json_schema.schema must be a JSON Schema object", param)
		}
	default:
		return false, invalid(param+".type", "%s type %q must be text, json_object or json_schema", param, f.Type)
	}
	if s.eng.Constraints == nil {
		return false, invalid(param, "%s %s is not available: this server has no constrained decoder", param, f.Type)
	}
	c, err := s.eng.Constraints(schema)
	if err != nil {
		return false, invalid(param, "%s: %v", param, err)
	}
	t.req.Constraint = c
	return true, nil
}
