package remotefront

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/spoolhq/spool/engine/apiwire"
	"github.com/spoolhq/spool/engine/chat"
	"github.com/spoolhq/spool/engine/httpguard"
	"github.com/spoolhq/spool/engine/remote"
)

// /v1/messages on a remote server: the Anthropic request is translated to
// the remote's /v1/chat/completions (system prompt, turns, tool_use and
// tool_result, tools and tool_choice, thinking, stop sequences, sampling,
// output_config.format as response_format)
// and its answer back (thinking, text and tool_use blocks, stop reason,
// usage), streamed as Anthropic's events when asked.

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

// remoteChat translates an Anthropic request for the remote: the
// server's translation (Config.Messages), then the front's part: the
// messages in the wire form, the output cap, stream usage and the model.
func (f *Front) remoteChat(r *http.Request, count bool) (*ChatRequest, error) {
	out, err := f.cfg.Messages(r, count)
	if err != nil {
		return nil, err
	}
	out.Messages = wireMessages(out.Messages)
	if f.cfg.MaxTokens > 0 {
		out.MaxTokens = min(out.MaxTokens, f.cfg.MaxTokens)
	}
	if out.Stream {
		out.StreamOptions = &struct {
			IncludeUsage bool `json:"include_usage"`
		}{true}
	}
	if out.Model, err = f.remoteModel(r, out.Model, true); err != nil {
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

// remoteMessagesUsage is the usage of a translated reply: the remote's
// counts in Anthropic's terms (input_tokens excludes cache reads).
type remoteMessagesUsage struct {
	InputTokens          int `json:"input_tokens"`
	OutputTokens         int `json:"output_tokens"`
	CacheReadInputTokens int `json:"cache_read_input_tokens"`
}

func messagesUsageOf(u *chatUsage) remoteMessagesUsage {
	if u == nil {
		return remoteMessagesUsage{}
	}
	cached := min(u.PromptTokensDetails.CachedTokens, u.PromptTokens)
	return remoteMessagesUsage{InputTokens: u.PromptTokens - cached, OutputTokens: u.CompletionTokens, CacheReadInputTokens: cached}
}

func recordChatUsage(call *remote.Call, u *chatUsage) {
	if u != nil {
		call.Usage(u.PromptTokens, u.PromptTokensDetails.CachedTokens, u.CompletionTokens)
	}
}

// remoteFinish is the remote's finish in apiwire.AnthropicStop's terms:
// a reply with tool calls finishes with them, and the stop sequence is
// the stop string the remote says matched (vLLM's stop_reason), when one
// ended a reply that finished neither on its length nor with tool calls.
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

// toolArguments is a call's input: its arguments when they are a JSON
// object, else an empty object (Anthropic's input must be one).
func toolArguments(args string) json.RawMessage {
	a := bytes.TrimSpace([]byte(args))
	if len(a) > 0 && a[0] == '{' && json.Valid(a) {
		return a
	}
	return json.RawMessage("{}")
}

func callID(id string) string {
	if id == "" {
		return apiwire.NewID("toolu_")
	}
	return apiwire.ToolUseID(id)
}

// sendChat sends the translated request. One whose output limit, not
// its prompt, is over the remote's context goes again with the rest of the
// context as its limit, as the local engine caps max_tokens (Claude Code
// asks for 32k tokens whatever the context left).
func (f *Front) sendChat(r *http.Request, oreq *ChatRequest) (*http.Response, error) {
	for retried := false; ; retried = true {
		body, err := json.Marshal(oreq)
		if err != nil {
			return nil, apiwire.Internal(err)
		}
		resp, err := f.rc.Do(r.Context(), http.MethodPost, "/v1/chat/completions", body)
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

// anthropicError is the Anthropic answer to a remote failure; a
// prompt over the remote's context is worded as Anthropic does ("prompt is
// too long"), which Claude Code acts on by compacting.
func (f *Front) anthropicError(err error) *apiwire.Error {
	e := f.apiError(err)
	if e.Code != "context_length_exceeded" || strings.HasPrefix(e.Message, "prompt is too long") {
		return e
	}
	c := *e
	c.Message = "prompt is too long: " + e.Message
	var re *remote.Error
	if errors.As(err, &re) {
		if ov, ok := remote.ContextOverflow(re); ok {
			c.Message = fmt.Sprintf("prompt is too long: %d tokens > %d maximum", ov.Prompt, ov.Limit)
		}
	}
	return &c
}

// Messages answers POST /v1/messages, translated to the remote's chat
// API.
func (f *Front) Messages(w http.ResponseWriter, r *http.Request) {
	oreq, err := f.remoteChat(r, false)
	if err != nil {
		f.writeError(w, r, f.anthropicError(err))
		return
	}
	httpguard.EndParsing(r.Context())
	call := f.rc.Begin(r.URL.Path, oreq.Model, oreq.Stream)
	resp, err := f.sendChat(r, oreq)
	if err != nil {
		f.failCall(w, r, call, err)
		return
	}
	if oreq.Stream && strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		f.streamRemoteMessages(w, r, resp, call, oreq)
		return
	}
	data, err := remote.ReadBody(resp)
	if err != nil {
		f.failCall(w, r, call, err)
		return
	}
	call.Output()
	var cc remoteCompletion
	if err := json.Unmarshal(data, &cc); err != nil || len(cc.Choices) == 0 || cc.Choices[0].Message == nil {
		f.failCall(w, r, call, &remote.Error{Kind: remote.KindProtocol, Message: "the remote engine's chat completion has no message"})
		return
	}
	recordChatUsage(call, cc.Usage)
	call.End(nil)
	choice := cc.Choices[0]
	msg := choice.Message
	calls := make([]apiwire.AnthropicToolUse, len(msg.ToolCalls))
	for i, c := range msg.ToolCalls {
		calls[i] = apiwire.AnthropicToolUse{ID: callID(c.ID), Name: c.Function.Name, Input: toolArguments(c.Function.Arguments)}
	}
	var finish string
	if choice.FinishReason != nil {
		finish = *choice.FinishReason
	}
	finish, seq := remoteFinish(finish, choice.StopReason, oreq.Stop, len(msg.ToolCalls) > 0)
	model := cc.Model
	if model == "" {
		model = oreq.Model
	}
	apiwire.WriteJSON(w, http.StatusOK, apiwire.AnthropicReply{
		ID: apiwire.NewID("msg_"), Model: model, Thinking: msg.reasoning(), Text: msg.content(), Calls: calls,
		Finish: finish, StopSequence: seq, Usage: messagesUsageOf(cc.Usage),
	}.Message())
}

// CountTokens answers POST /v1/messages/count_tokens: it counts a prompt with the remote's POST /tokenize
// (vLLM's; other servers may have none, which is said plainly).
func (f *Front) CountTokens(w http.ResponseWriter, r *http.Request) {
	oreq, err := f.remoteChat(r, true)
	if err != nil {
		f.writeError(w, r, f.anthropicError(err))
		return
	}
	tok := map[string]any{"model": oreq.Model, "messages": oreq.Messages, "add_generation_prompt": true}
	if len(oreq.Tools) > 0 {
		tok["tools"] = oreq.Tools
	}
	if oreq.ChatTemplateKwargs != nil {
		tok["chat_template_kwargs"] = oreq.ChatTemplateKwargs
	}
	body, _ := json.Marshal(tok)
	httpguard.EndParsing(r.Context())
	resp, err := f.rc.Do(r.Context(), http.MethodPost, "/tokenize", body)
	if err != nil {
		var re *remote.Error
		if errors.As(err, &re) && re.Kind == remote.KindStatus && (re.Status == http.StatusNotFound || re.Status == http.StatusMethodNotAllowed) {
			f.writeError(w, r, apiwire.NotFound("unsupported", "counting tokens needs the remote engine's POST /tokenize (vLLM serves one); %s has none", f.rc.Endpoint()))
			return
		}
		if r.Context().Err() == nil {
			f.writeError(w, r, f.anthropicError(err))
		}
		return
	}
	data, err := remote.ReadBody(resp)
	var out struct {
		Count *int `json:"count"`
	}
	if err == nil && (json.Unmarshal(data, &out) != nil || out.Count == nil) {
		err = &remote.Error{Kind: remote.KindProtocol, Message: "the remote engine's /tokenize answer has no count"}
	}
	if err != nil {
		f.writeError(w, r, f.anthropicError(err))
		return
	}
	apiwire.WriteJSON(w, http.StatusOK, map[string]int{"input_tokens": *out.Count})
}
