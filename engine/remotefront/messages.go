package remotefront

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"

	"github.com/spoolhq/spool/engine/apiwire"
	"github.com/spoolhq/spool/engine/chat"
	"github.com/spoolhq/spool/engine/remote"
	"github.com/spoolhq/spool/engine/turn"
)

// Turns on a remote server: a turn (an API translated it: Anthropic's
// Messages) is sent to the remote's /v1/chat/completions (turns.go) and
// its answer read back as pieces: reasoning, text, tool calls (streamed in
// parts as the remote sends them), the finish and usage.

// ChatRequest is the chat request sent to the remote.
type ChatRequest struct {
	Model         string         `json:"model"`
	Messages      []chat.Message `json:"messages"`
	MaxTokens     int            `json:"max_tokens,omitempty"`
	Stream        bool           `json:"stream,omitempty"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options,omitempty"`
	Temperature        *float64       `json:"temperature,omitempty"`
	TopP               *float64       `json:"top_p,omitempty"`
	TopK               *int           `json:"top_k,omitempty"`
	Stop               []string       `json:"stop,omitempty"`
	Tools              []chat.Tool    `json:"tools,omitempty"`
	ToolChoice         any            `json:"tool_choice,omitempty"`
	ChatTemplateKwargs map[string]any `json:"chat_template_kwargs,omitempty"`
	// ResponseFormat is OpenAI's response_format, nil for none.
	ResponseFormat any `json:"response_format,omitempty"`
}

// chatRequest translates a turn into the remote's chat request: the
// messages in the wire form, the tools and tool choice, thinking, stops,
// sampling, a JSON format, the output cap, stream usage and the model the
// remote serves.
func (f *Front) chatRequest(ctx context.Context, t *turn.Request) (*ChatRequest, error) {
	switch {
	case t.Prompt != nil || len(t.Prefix) > 0:
		return nil, apiwire.Invalid("prompt", "a remote engine runs conversations, not raw prompts")
	case len(t.Continue) > 0:
		return nil, apiwire.Invalid("continue", "a remote engine cannot continue a reply from its tokens")
	}
	out := &ChatRequest{Messages: wireMessages(t.Messages), Stream: t.Stream, Stop: t.Stops, Tools: t.Tools,
		Temperature: t.Sampling.Temperature, TopP: t.Sampling.TopP, TopK: t.Sampling.TopK}
	if t.MaxTokens != nil {
		out.MaxTokens = *t.MaxTokens
	}
	if f.cfg.MaxTokens > 0 {
		out.MaxTokens = min(out.MaxTokens, f.cfg.MaxTokens)
	}
	switch t.ToolChoice.Mode {
	case turn.ToolsNone, turn.ToolsRequired:
		out.ToolChoice = t.ToolChoice.Mode
	case turn.ToolsFunction:
		out.ToolChoice = map[string]any{"type": "function", "function": map[string]string{"name": t.ToolChoice.Name}}
	}
	if t.Thinking != nil {
		out.ChatTemplateKwargs = map[string]any{"enable_thinking": *t.Thinking}
	}
	if fm := t.Format; fm != nil {
		rf := map[string]any{"type": fm.Type}
		if fm.Type == turn.JSONSchema {
			rf["json_schema"] = map[string]any{"name": fm.Name, "schema": fm.Schema, "strict": nil}
		}
		out.ResponseFormat = rf
	}
	if out.Stream {
		out.StreamOptions = &struct {
			IncludeUsage bool `json:"include_usage"`
		}{true}
	}
	var err error
	if out.Model, err = f.remoteModel(ctx, t.Model, t.AnyModel); err != nil {
		return nil, err
	}
	return out, nil
}

// wireMessages puts tool-call arguments in the OpenAI wire form (a JSON
// text, not an object).
func wireMessages(msgs []chat.Message) []chat.Message {
	out := slices.Clone(msgs)
	for i := range out {
		if len(out[i].ToolCalls) == 0 {
			continue
		}
		calls := slices.Clone(out[i].ToolCalls)
		for j, c := range calls {
			switch a := c.Function.Arguments.(type) {
			case json.RawMessage:
				calls[j].Function.Arguments = string(a)
			case nil:
				calls[j].Function.Arguments = "{}"
			}
		}
		out[i].ToolCalls = calls
	}
	return out
}

// remoteMessage is a chat message or delta of the remote's answer; vLLM
// names reasoning "reasoning", SGLang and Spool "reasoning_content".
type remoteMessage struct {
	Content          *string         `json:"content"`
	ReasoningContent *string         `json:"reasoning_content"`
	Reasoning        *string         `json:"reasoning"`
	ToolCalls        []toolCallDelta `json:"tool_calls"`
}

// toolCallDelta is a tool call of the remote's answer, or a piece of one.
type toolCallDelta struct {
	Index    *int   `json:"index"`
	ID       string `json:"id"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// chatUsage is the usage of the remote's chat completion.
type chatUsage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	PromptTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

func (m *remoteMessage) reasoning() string {
	if m.Reasoning != nil && *m.Reasoning != "" {
		return *m.Reasoning
	}
	if m.ReasoningContent != nil {
		return *m.ReasoningContent
	}
	return ""
}

func (m *remoteMessage) content() string {
	if m.Content != nil {
		return *m.Content
	}
	return ""
}

// remoteCompletion is the remote's chat completion or one of its chunks.
type remoteCompletion struct {
	Object  string `json:"object"`
	Model   string `json:"model"`
	Choices []struct {
		Message      *remoteMessage `json:"message"`
		Delta        *remoteMessage `json:"delta"`
		FinishReason *string        `json:"finish_reason"`
		// StopReason is vLLM's: the stop string that matched (or a
		// token id).
		StopReason json.RawMessage `json:"stop_reason"`
	} `json:"choices"`
	Usage *chatUsage      `json:"usage"`
	Error json.RawMessage `json:"error"`
}

// usageOf is the turn's usage of the remote's usage report.
func usageOf(u *chatUsage) turn.Usage {
	if u == nil {
		return turn.Usage{}
	}
	return turn.Usage{PromptTokens: u.PromptTokens, CachedTokens: min(u.PromptTokens, u.PromptTokensDetails.CachedTokens), CompletionTokens: u.CompletionTokens}
}

func recordChatUsage(call *remote.Call, u *chatUsage) {
	if u != nil {
		call.Usage(u.PromptTokens, u.PromptTokensDetails.CachedTokens, u.CompletionTokens)
	}
}

// remoteFinish is the remote's finish in the turn's terms: a reply with
// tool calls finishes with them, and the stop sequence is the stop string
// the remote says matched (vLLM's stop_reason), when one ended a reply
// that finished neither on its length nor with tool calls.
func remoteFinish(finish string, stopRaw json.RawMessage, stops []string, calls bool) (string, string) {
	if calls {
		finish = "tool_calls"
	}
	var matched string
	if finish == "tool_calls" || finish == "length" || json.Unmarshal(stopRaw, &matched) != nil || !slices.Contains(stops, matched) {
		return finish, ""
	}
	return finish, matched
}

// sendChat sends the translated request. One whose output limit, not
// its prompt, is over the remote's context goes again with the rest of the
// context as its limit, as the local engine caps max_tokens (Claude Code
// asks for 32k tokens whatever the context left).
func (f *Front) sendChat(ctx context.Context, oreq *ChatRequest) (*http.Response, error) {
	for retried := false; ; retried = true {
		body, err := json.Marshal(oreq)
		if err != nil {
			return nil, apiwire.Internal(err)
		}
		resp, err := f.rc.Do(ctx, http.MethodPost, "/v1/chat/completions", body)
		var re *remote.Error
		if err == nil || retried || !errors.As(err, &re) {
			return resp, err
		}
		ov, ok := remote.ContextOverflow(re)
		if !ok || ov.Prompt >= ov.Limit || ov.Limit-ov.Prompt >= oreq.MaxTokens {
			return nil, err
		}
		oreq.MaxTokens = ov.Limit - ov.Prompt
	}
}
