package ollama

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/spoolhq/spool/engine/apiwire"
	"github.com/spoolhq/spool/engine/chat"
	"github.com/spoolhq/spool/engine/turn"
)

// ChatRequest is an /api/chat request.
type ChatRequest struct {
	Model     string          `json:"model"`
	Messages  []Message       `json:"messages"`
	Stream    *bool           `json:"stream"`
	Format    json.RawMessage `json:"format"`
	Options   json.RawMessage `json:"options"`
	Tools     []chat.Tool     `json:"tools"`
	Think     json.RawMessage `json:"think"`
	KeepAlive json.RawMessage `json:"keep_alive"`
}

// GenerateRequest is an /api/generate request.
type GenerateRequest struct {
	Model     string          `json:"model"`
	Prompt    string          `json:"prompt"`
	Suffix    string          `json:"suffix"`
	System    string          `json:"system"`
	Template  string          `json:"template"`
	Context   []int           `json:"context"`
	Stream    *bool           `json:"stream"`
	Raw       bool            `json:"raw"`
	Format    json.RawMessage `json:"format"`
	Images    []string        `json:"images"`
	Options   json.RawMessage `json:"options"`
	Think     json.RawMessage `json:"think"`
	KeepAlive json.RawMessage `json:"keep_alive"`
}

// Message is one message of /api/chat, in and out.
type Message struct {
	Role       string     `json:"role"`
	Content    string     `json:"content"`
	Thinking   string     `json:"thinking,omitempty"`
	Images     []string   `json:"images,omitempty"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolName   string     `json:"tool_name,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
}

// ToolCall is a tool call: arguments are a JSON object (Ollama's form); a
// string holding one is accepted too.
type ToolCall struct {
	ID       string `json:"id,omitempty"`
	Function struct {
		Index     int             `json:"index"`
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

// Call is what chat and generate share of a request: when it started (for
// the timings), its options and whether it streams.
type Call struct {
	Start   time.Time
	Options Options
	Stream  bool
}

// begin reads the fields chat and generate share into c and returns the
// thinking switch and template variables of "think".
func (c *Call) begin(stream *bool, options, think, keepAlive json.RawMessage) (*bool, map[string]any, error) {
	if err := checkKeepAlive(keepAlive); err != nil {
		return nil, nil, err
	}
	opts, err := ParseOptions(options)
	if err != nil {
		return nil, nil, err
	}
	c.Options, c.Stream = opts, stream == nil || *stream
	return thinkOf(think)
}

// limits applies the options that bound a turn: its sampling, stop
// strings, num_predict and num_ctx.
func (c *Call) limits(t *turn.Request) {
	t.Sampling = c.Options.Sampling
	t.Stops = c.Options.Stop
	if n := c.Options.NumPredict; n != nil && *n > 0 {
		t.MaxTokens = n
	}
	if n := c.Options.NumCtx; n != nil {
		t.Context = *n
	}
	t.Stream = c.Stream
}

// Turn checks an /api/chat request and translates it into a turn of id;
// nil without an error is a load request (no messages).
func (r *ChatRequest) Turn(id string, c *Call) (*turn.Request, error) {
	thinking, extra, err := c.begin(r.Stream, r.Options, r.Think, r.KeepAlive)
	if err != nil {
		return nil, err
	}
	if len(r.Messages) == 0 {
		return nil, nil
	}
	// Roles are not checked: Ollama hands every message to the model's
	// template, which renders a role it does not know as it will (GLM's:
	// as nothing), and clients depend on it (mods sends its last answer
	// back with an empty role).
	msgs, err := messages(r.Messages)
	if err != nil {
		return nil, err
	}
	if err := turn.CheckTools("tools", r.Tools); err != nil {
		return nil, err
	}
	t := &turn.Request{ID: id, Model: r.Model, Messages: msgs, Tools: r.Tools, ToolChoice: turn.ToolChoice{Mode: turn.ToolsAuto},
		Thinking: thinking, Vars: extra}
	if t.Format, err = format(r.Format); err != nil {
		return nil, err
	}
	c.limits(t)
	return t, nil
}

// Turn checks an /api/generate request and translates it into a turn of
// id: the prompt (with system) through the chat template, or as it is
// with raw, after the context tokens of an earlier answer (each below
// vocab); nil without an error is a load request (no prompt).
func (r *GenerateRequest) Turn(id string, vocab int, c *Call) (*turn.Request, error) {
	thinking, extra, err := c.begin(r.Stream, r.Options, r.Think, r.KeepAlive)
	if err != nil {
		return nil, err
	}
	switch {
	case r.Suffix != "":
		return nil, apiwire.Invalid("suffix", "suffix (fill-in-the-middle) is not supported by this model")
	case r.Template != "":
		return nil, apiwire.Invalid("template", "a template override is not supported: Spool renders the model's own chat template (or use raw)")
	case len(r.Images) > 0:
		return nil, apiwire.Invalid("images", "images are not supported: this model reads text only")
	}
	if r.Prompt == "" && len(r.Context) == 0 {
		return nil, nil
	}
	for _, id := range r.Context {
		if id < 0 || id >= vocab {
			return nil, apiwire.Invalid("context", "context token id %d is outside the vocabulary (0..%d)", id, vocab-1)
		}
	}
	t := &turn.Request{ID: id, Model: r.Model, Prefix: r.Context}
	if t.Format, err = format(r.Format); err != nil {
		return nil, err
	}
	if r.Raw {
		t.Prompt = &turn.Prompt{Text: r.Prompt}
	} else {
		if r.System != "" {
			t.Messages = append(t.Messages, chat.Message{Role: "system", Content: r.System})
		}
		t.Messages = append(t.Messages, chat.Message{Role: "user", Content: r.Prompt})
		t.ToolChoice, t.Thinking, t.Vars = turn.ToolChoice{Mode: turn.ToolsNone}, thinking, extra
	}
	c.limits(t)
	return t, nil
}

// Error words a refusal as Ollama's API does: a prompt over num_ctx names
// the option.
func Error(err error) error {
	var ce *turn.ContextError
	if errors.As(err, &ce) && ce.Requested {
		e := apiwire.ContextLength(ce.Limit, "the prompt has %d tokens (options.num_ctx)", ce.Prompt)
		e.Param = "options.num_ctx"
		return e
	}
	return err
}

// messages translates the conversation into chat messages.
func messages(msgs []Message) ([]chat.Message, error) {
	out := make([]chat.Message, len(msgs))
	for i, m := range msgs {
		if len(m.Images) > 0 {
			return nil, apiwire.Invalid(fmt.Sprintf("messages[%d].images", i), "message %d has images: this model reads text only", i)
		}
		cm := chat.Message{Role: m.Role, Content: m.Content, ReasoningContent: m.Thinking, ToolCallID: m.ToolCallID, Name: m.ToolName}
		for j, c := range m.ToolCalls {
			param := fmt.Sprintf("messages[%d].tool_calls[%d].function", i, j)
			if c.Function.Name == "" {
				return nil, apiwire.Invalid(param+".name", "tool call %d of message %d has no function name", j, i)
			}
			args, err := arguments(param+".arguments", c.Function.Arguments)
			if err != nil {
				return nil, err
			}
			cm.ToolCalls = append(cm.ToolCalls, chat.ToolCall{ID: c.ID, Type: "function", Function: chat.FunctionCall{Name: c.Function.Name, Arguments: args}})
		}
		out[i] = cm
	}
	return out, nil
}

// arguments reads a tool call's arguments: an object, a string holding
// one, or nothing (no arguments).
func arguments(param string, raw json.RawMessage) (any, error) {
	raw = bytes.TrimSpace(raw)
	switch {
	case len(raw) == 0 || bytes.Equal(raw, []byte("null")):
		return json.RawMessage("{}"), nil
	case raw[0] == '{':
		return json.RawMessage(raw), nil
	case raw[0] == '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil || !json.Valid([]byte(s)) {
			return nil, apiwire.Invalid(param, "%s must be a JSON object", param)
		}
		return s, nil
	}
	return nil, apiwire.Invalid(param, "%s must be a JSON object", param)
}

// thinkOf reads "think": true, false, or "low", "medium", "high".
func thinkOf(raw json.RawMessage) (*bool, map[string]any, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, nil, nil
	}
	var b bool
	if err := json.Unmarshal(raw, &b); err == nil {
		return &b, nil, nil
	}
	var level string
	if err := json.Unmarshal(raw, &level); err == nil {
		switch level {
		case "low", "medium", "high":
			return new(true), map[string]any{"reasoning_effort": level}, nil
		}
	}
	return nil, nil, apiwire.Invalid("think", `think must be true, false, "low", "medium" or "high"`)
}

// checkKeepAlive validates keep_alive (a duration such as "5m", a number
// of seconds, negative for ever); Spool's model is pinned, so it changes
// nothing.
func checkKeepAlive(raw json.RawMessage) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil
	}
	var secs float64
	if err := json.Unmarshal(raw, &secs); err == nil {
		return nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		if _, err := time.ParseDuration(s); err == nil {
			return nil
		}
		var n float64
		if _, err := fmt.Sscanf(s, "%g", &n); err == nil && fmt.Sprint(n) == s {
			return nil
		}
	}
	return apiwire.Invalid("keep_alive", `keep_alive must be a duration such as "5m" or a number of seconds, got %s`, raw)
}

// format reads "format": "json" (any JSON object) or a JSON Schema object.
func format(raw json.RawMessage) (*turn.Format, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) || bytes.Equal(raw, []byte(`""`)) {
		return nil, nil
	}
	switch {
	case bytes.Equal(raw, []byte(`"json"`)):
		return &turn.Format{Param: "format", Type: turn.JSONObject}, nil
	case raw[0] == '{':
		return &turn.Format{Param: "format", Type: turn.JSONSchema, Name: "format", Schema: raw}, nil
	}
	return nil, apiwire.Invalid("format", `format must be "json" or a JSON Schema object, got %s`, raw)
}
