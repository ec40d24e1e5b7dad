package responses

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/spoolhq/spool/engine/api/openai"
	"github.com/spoolhq/spool/engine/apiwire"
	"github.com/spoolhq/spool/engine/chat"
	"github.com/spoolhq/spool/engine/turn"
)

// Request is an OpenAI /v1/responses request.
type Request struct {
	Model              string            `json:"model"`
	Input              json.RawMessage   `json:"input"`
	Instructions       string            `json:"instructions"`
	Tools              []json.RawMessage `json:"tools"`
	ToolChoice         json.RawMessage   `json:"tool_choice"`
	MaxOutputTokens    *int              `json:"max_output_tokens"`
	Temperature        *float64          `json:"temperature"`
	TopP               *float64          `json:"top_p"`
	Stream             bool              `json:"stream"`
	PreviousResponseID string            `json:"previous_response_id"`
	Store              *bool             `json:"store"`
	Reasoning          *struct {
		Effort string `json:"effort"`
	} `json:"reasoning"`
	Text *struct {
		Format *struct {
			Type   string          `json:"type"`
			Name   string          `json:"name"`
			Schema json.RawMessage `json:"schema"`
			Strict *bool           `json:"strict"`
		} `json:"format"`
	} `json:"text"`

	// origins maps the tool names the model sees back to the client's;
	// dropped are the hosted tools left out; history is the conversation
	// the response continues, with its input.
	origins map[string]origin
	dropped []string
	history []chat.Message
}

// Stored reports whether the response is kept for previous_response_id
// beyond its connection (store, true by default).
func (r *Request) Stored() bool { return r.Store == nil || *r.Store }

// Dropped are the hosted tools left out of what the model sees (nothing
// here can run them).
func (r *Request) Dropped() []string { return r.dropped }

// Turn checks the request and translates it into a turn of id; prev is the
// stored response previous_response_id names (nil: none, or not found: a
// 404 when it named one).
func (r *Request) Turn(id string, prev *State) (*turn.Request, error) {
	input, err := inputMessages(r.Input)
	if err != nil {
		return nil, err
	}
	r.history = nil
	if r.PreviousResponseID != "" {
		if prev == nil {
			return nil, apiwire.NotFound("previous_response_not_found", "previous_response_id %q is not known to this server (responses are kept in memory)", r.PreviousResponseID)
		}
		r.history = append(r.history, prev.History...)
	}
	r.history = append(r.history, input...)
	tools, origins, dropped, err := flatTools(r.Tools)
	if err != nil {
		return nil, err
	}
	r.origins, r.dropped = origins, dropped
	if err := turn.CheckTools("tools", tools); err != nil {
		return nil, err
	}
	choice, err := openai.ToolChoice(flatToolChoice(r.ToolChoice), tools)
	if err != nil {
		return nil, err
	}
	effort := ""
	if r.Reasoning != nil {
		effort = r.Reasoning.Effort
	}
	thinking, extra, err := openai.Thinking(effort, nil)
	if err != nil {
		return nil, checkParam("reasoning.effort", err)
	}
	t := &turn.Request{ID: id, Model: r.Model, Tools: tools, ToolChoice: choice, Thinking: thinking, Vars: extra,
		Sampling: turn.Sampling{Temperature: r.Temperature, TopP: r.TopP}, Stream: r.Stream}
	var rf *openai.ResponseFormat
	if r.Text != nil && r.Text.Format != nil {
		f := r.Text.Format
		rf = &openai.ResponseFormat{Type: f.Type}
		if f.Type == turn.JSONSchema {
			rf.JSONSchema = &openai.JSONSchema{Name: f.Name, Schema: f.Schema, Strict: f.Strict}
		}
	}
	if t.Format, err = rf.Format("text.format"); err != nil {
		return nil, err
	}
	t.Messages = r.history
	if r.Instructions != "" {
		t.Messages = append([]chat.Message{{Role: "system", Content: r.Instructions}}, r.history...)
	}
	if err := turn.CheckMessages("input", t.Messages); err != nil {
		return nil, err
	}
	if t.MaxTokens, err = turn.CheckMaxTokens("max_output_tokens", r.MaxOutputTokens); err != nil {
		return nil, err
	}
	return t, nil
}

// checkParam wraps a message with the parameter it is about.
func checkParam(param string, err error) error {
	if err == nil {
		return nil
	}
	if ae, ok := err.(*apiwire.Error); ok {
		return ae
	}
	return apiwire.Invalid(param, "%s: %v", param, err)
}

// inputItem is one element of a Responses input array.
type inputItem struct {
	Type      string          `json:"type"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Namespace string          `json:"namespace"`
	Arguments string          `json:"arguments"`
	Input     string          `json:"input"`
	Output    json.RawMessage `json:"output"`
}

// inputMessages translates Responses input into chat messages.
func inputMessages(raw json.RawMessage) ([]chat.Message, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, apiwire.Invalid("input", "input is required")
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, apiwire.Invalid("input", "input: %v", err)
		}
		return []chat.Message{{Role: "user", Content: s}}, nil
	}
	var items []inputItem
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, apiwire.Invalid("input", "input must be a string or an array of input items")
	}
	var msgs []chat.Message
	for i, it := range items {
		param := fmt.Sprintf("input[%d]", i)
		switch it.Type {
		case "", "message":
			text, err := contentText(param+".content", it.Content)
			if err != nil {
				return nil, err
			}
			switch it.Role {
			case "user", "system", "developer", "assistant":
			default:
				return nil, apiwire.Invalid(param+".role", "input item %d has the role %q; expected user, system, developer or assistant", i, it.Role)
			}
			msgs = append(msgs, chat.Message{Role: it.Role, Content: text})
		case "function_call", "custom_tool_call":
			args := it.Arguments
			if it.Type == "custom_tool_call" {
				b, _ := json.Marshal(map[string]string{"input": it.Input})
				args = string(b)
			}
			if args == "" {
				args = "{}"
			}
			call := chat.ToolCall{ID: it.CallID, Type: "function", Function: chat.FunctionCall{Name: flatName(it.Namespace, it.Name), Arguments: args}}
			if n := len(msgs); n > 0 && msgs[n-1].Role == "assistant" && msgs[n-1].ToolCalls != nil {
				msgs[n-1].ToolCalls = append(msgs[n-1].ToolCalls, call)
			} else {
				msgs = append(msgs, chat.Message{Role: "assistant", Content: "", ToolCalls: []chat.ToolCall{call}})
			}
		case "function_call_output", "custom_tool_call_output":
			text, err := contentText(param+".output", it.Output)
			if err != nil {
				return nil, err
			}
			msgs = append(msgs, chat.Message{Role: "tool", Content: text, ToolCallID: it.CallID})
		case "reasoning":
		default:
			if hostedCallItem(it.Type) {
				continue
			}
			return nil, apiwire.Invalid(param+".type", "input items of type %q are not supported", it.Type)
		}
	}
	if len(msgs) == 0 {
		return nil, apiwire.Invalid("input", "input holds no message")
	}
	return msgs, nil
}

// contentText reads content that is a string or an array of text parts.
func contentText(param string, raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return "", nil
	}
	if raw[0] == '"' {
		var s string
		err := json.Unmarshal(raw, &s)
		return s, checkParam(param, err)
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", apiwire.Invalid(param, "%s must be a string or an array of text parts", param)
	}
	var out string
	for j, p := range parts {
		switch p.Type {
		case "input_text", "output_text", "text":
			out += p.Text
		default:
			return "", apiwire.Invalid(fmt.Sprintf("%s[%d].type", param, j), "content parts of type %q are not supported: this model reads text only", p.Type)
		}
	}
	return out, nil
}
