package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/spoolhq/spool/engine/chat"
	"github.com/spoolhq/spool/engine/turn"
)

// parseToolChoice reads OpenAI's tool_choice: "none" | "auto" |
// "required" | {"type":"function","function":{"name":...}}; the Responses
// API's flat {"type":"function","name":...} is accepted too.
func parseToolChoice(raw json.RawMessage, tools []chat.Tool) (turn.ToolChoice, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return turn.ToolChoice{Mode: turn.ToolsAuto}, nil
	}
	var mode string
	if err := json.Unmarshal(raw, &mode); err == nil {
		switch mode {
		case "none", "auto", "required":
			if mode == "required" && len(tools) == 0 {
				return turn.ToolChoice{}, invalid("tool_choice", `tool_choice "required" needs tools`)
			}
			return turn.ToolChoice{Mode: mode}, nil
		}
		return turn.ToolChoice{}, invalid("tool_choice", `tool_choice %q must be "none", "auto", "required" or a function`, mode)
	}
	var obj struct {
		Type     string `json:"type"`
		Name     string `json:"name"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil || obj.Type != "function" {
		return turn.ToolChoice{}, invalid("tool_choice", `tool_choice must be "none", "auto", "required" or {"type":"function","function":{"name":...}}`)
	}
	name := obj.Function.Name
	if name == "" {
		name = obj.Name
	}
	if toolNamed(tools, name) == nil {
		return turn.ToolChoice{}, invalid("tool_choice", "tool_choice names the function %q, which is not among the tools", name)
	}
	return turn.ToolChoice{Mode: turn.ToolsFunction, Name: name}, nil
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

// format checks a response format and returns the turn's JSON format;
// nil for plain text.
func format(param string, f *responseFormat) (*turn.Format, error) {
	if f == nil || f.Type == "" || f.Type == "text" {
		return nil, nil
	}
	out := &turn.Format{Param: param, Type: f.Type}
	switch f.Type {
	case turn.JSONObject:
	case turn.JSONSchema:
		if f.JSONSchema == nil {
			return nil, invalid(param+".json_schema", "%s.json_schema is required with type json_schema", param)
		}
		if !validName(f.JSONSchema.Name) {
			return nil, invalid(param+".json_schema.name", "the schema name %q must be 1-64 characters of a-z, A-Z, 0-9, _ and -", f.JSONSchema.Name)
		}
		out.Schema = bytes.TrimSpace(f.JSONSchema.Schema)
		if len(out.Schema) == 0 || out.Schema[0] != '{' {
			return nil, invalid(param+".json_schema.schema", "%s.json_schema.schema must be a JSON Schema object", param)
		}
	default:
		return nil, invalid(param+".type", "%s type %q must be text, json_object or json_schema", param, f.Type)
	}
	return out, nil
}
