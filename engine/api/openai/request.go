package openai

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/spoolhq/spool/engine/apiwire"
	"github.com/spoolhq/spool/engine/chat"
	"github.com/spoolhq/spool/engine/turn"
)

// Sampling are the sampling fields of a request.
type Sampling struct {
	Temperature      *float64           `json:"temperature"`
	TopP             *float64           `json:"top_p"`
	TopK             *int               `json:"top_k"`
	MinP             *float64           `json:"min_p"`
	Seed             *int64             `json:"seed"`
	PresencePenalty  *float64           `json:"presence_penalty"`
	FrequencyPenalty *float64           `json:"frequency_penalty"`
	LogitBias        map[string]float64 `json:"logit_bias"`
}

// Turn is the turn's sampling of s.
func (s Sampling) Turn() turn.Sampling {
	return turn.Sampling{Temperature: s.Temperature, TopP: s.TopP, TopK: s.TopK, MinP: s.MinP, Seed: s.Seed,
		PresencePenalty: s.PresencePenalty, FrequencyPenalty: s.FrequencyPenalty, LogitBias: s.LogitBias}
}

// ResponseFormat is response_format.
type ResponseFormat struct {
	Type       string      `json:"type"`
	JSONSchema *JSONSchema `json:"json_schema"`
}

// JSONSchema is a json_schema response format's schema.
type JSONSchema struct {
	Name   string          `json:"name"`
	Schema json.RawMessage `json:"schema"`
	Strict *bool           `json:"strict"`
}

// Format checks a response format and returns the turn's JSON format,
// nil for plain text; param names the field in refusals.
func (f *ResponseFormat) Format(param string) (*turn.Format, error) {
	if f == nil || f.Type == "" || f.Type == "text" {
		return nil, nil
	}
	out := &turn.Format{Param: param, Type: f.Type}
	switch f.Type {
	case turn.JSONObject:
	case turn.JSONSchema:
		if f.JSONSchema == nil {
			return nil, apiwire.Invalid(param+".json_schema", "%s.json_schema is required with type json_schema", param)
		}
		if !turn.ValidName(f.JSONSchema.Name) {
			return nil, apiwire.Invalid(param+".json_schema.name", "the schema name %q must be 1-64 characters of a-z, A-Z, 0-9, _ and -", f.JSONSchema.Name)
		}
		out.Name, out.Schema = f.JSONSchema.Name, bytes.TrimSpace(f.JSONSchema.Schema)
		if len(out.Schema) == 0 || out.Schema[0] != '{' {
			return nil, apiwire.Invalid(param+".json_schema.schema", "%s.json_schema.schema must be a JSON Schema object", param)
		}
	default:
		return nil, apiwire.Invalid(param+".type", "%s type %q must be text, json_object or json_schema", param, f.Type)
	}
	return out, nil
}

// ToolChoice reads tool_choice: "none" | "auto" | "required" |
// {"type":"function","function":{"name":...}}; the Responses API's flat
// {"type":"function","name":...} is accepted too.
func ToolChoice(raw json.RawMessage, tools []chat.Tool) (turn.ToolChoice, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return turn.ToolChoice{Mode: turn.ToolsAuto}, nil
	}
	var mode string
	if err := json.Unmarshal(raw, &mode); err == nil {
		switch mode {
		case turn.ToolsNone, turn.ToolsAuto, turn.ToolsRequired:
			if mode == turn.ToolsRequired && len(tools) == 0 {
				return turn.ToolChoice{}, apiwire.Invalid("tool_choice", `tool_choice "required" needs tools`)
			}
			return turn.ToolChoice{Mode: mode}, nil
		}
		return turn.ToolChoice{}, apiwire.Invalid("tool_choice", `tool_choice %q must be "none", "auto", "required" or a function`, mode)
	}
	var obj struct {
		Type     string `json:"type"`
		Name     string `json:"name"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil || obj.Type != "function" {
		return turn.ToolChoice{}, apiwire.Invalid("tool_choice", `tool_choice must be "none", "auto", "required" or {"type":"function","function":{"name":...}}`)
	}
	name := obj.Function.Name
	if name == "" {
		name = obj.Name
	}
	if turn.ToolNamed(tools, name) == nil {
		return turn.ToolChoice{}, apiwire.Invalid("tool_choice", "tool_choice names the function %q, which is not among the tools", name)
	}
	return turn.ToolChoice{Mode: turn.ToolsFunction, Name: name}, nil
}

// Thinking resolves reasoning_effort and chat_template_kwargs into the
// template's thinking switch and its other variables.
func Thinking(effort string, kwargs map[string]any) (*bool, map[string]any, error) {
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
		return nil, nil, apiwire.Invalid("reasoning_effort", "reasoning_effort %q must be none, minimal, low, medium, high or xhigh", effort)
	}
	for k, v := range kwargs {
		if k == "enable_thinking" {
			b, ok := v.(bool)
			if !ok {
				return nil, nil, apiwire.Invalid("chat_template_kwargs.enable_thinking", "chat_template_kwargs.enable_thinking must be a boolean")
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

// Stop reads "stop": a string or an array of strings.
func Stop(param string, raw json.RawMessage) ([]string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, nil
	}
	var list []string
	if raw[0] == '"' {
		var one string
		if err := json.Unmarshal(raw, &one); err != nil {
			return nil, apiwire.Invalid(param, "%s: %v", param, err)
		}
		list = []string{one}
	} else if err := json.Unmarshal(raw, &list); err != nil {
		return nil, apiwire.Invalid(param, "%s must be a string or an array of strings", param)
	}
	return turn.CheckStops(param, list)
}

// Usage is the usage object of chat completions and completions: the
// counts, and Spool's report of the turn (turn.EngineUsage).
type Usage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	TotalTokens         int `json:"total_tokens"`
	PromptTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	*turn.EngineUsage
}

// UsageOf is the usage object of u.
func UsageOf(u turn.Usage) *Usage {
	out := &Usage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, EngineUsage: u.Engine}
	out.TotalTokens = out.PromptTokens + out.CompletionTokens
	out.PromptTokensDetails.CachedTokens = u.CachedTokens
	return out
}

// Answer names an answer: its id, the model answering, when it was made.
type Answer struct {
	ID      string
	Model   string
	Created int64
}

// hasOutput reports whether a piece carries output or tokens.
func hasOutput(p turn.Piece) bool {
	return p.Reasoning != "" || p.Text != "" || len(p.Calls) > 0 || len(p.Tokens) > 0
}
