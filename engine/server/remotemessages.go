package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

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

// remoteChatRequest is the chat request sent to the remote.
type remoteChatRequest struct {
	Model         string         `json:"model"`
	Messages      []chat.Message `json:"messages"`
	MaxTokens     int            `json:"max_tokens,omitempty"`
	Stream        bool           `json:"stream,omitempty"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options,omitempty"`
	Temperature        *float64        `json:"temperature,omitempty"`
	TopP               *float64        `json:"top_p,omitempty"`
	TopK               *int            `json:"top_k,omitempty"`
	Stop               []string        `json:"stop,omitempty"`
	Tools              []chat.Tool     `json:"tools,omitempty"`
	ToolChoice         any             `json:"tool_choice,omitempty"`
	ChatTemplateKwargs map[string]any  `json:"chat_template_kwargs,omitempty"`
	ResponseFormat     *responseFormat `json:"response_format,omitempty"`
}

// remoteChat translates an Anthropic request for the remote.
func (s *Server) remoteChat(r *http.Request, req *messagesRequest) (*remoteChatRequest, error) {
	if req.MaxTokens == nil {
		return nil, invalid("max_tokens", "max_tokens is required")
	}
	if *req.MaxTokens <= 0 {
		return nil, invalid("max_tokens", "max_tokens must be at least 1, got %d", *req.MaxTokens)
	}
	msgs, tools, err := req.toChat()
	if err != nil {
		return nil, err
	}
	if err := checkTools("tools", tools); err != nil {
		return nil, err
	}
	stops, err := checkStops("stop_sequences", req.StopSequences)
	if err != nil {
		return nil, err
	}
	out := &remoteChatRequest{
		Messages: wireMessages(msgs), MaxTokens: *req.MaxTokens, Stop: stops, Tools: tools,
		Temperature: req.Temperature, TopP: req.TopP, TopK: req.TopK,
	}
	if s.cfg.MaxTokens > 0 {
		out.MaxTokens = min(out.MaxTokens, s.cfg.MaxTokens)
	}
	if tc := req.ToolChoice; tc != nil {
		choice, err := anthropicToolChoice(tc.Type, tc.Name, tools)
		if err != nil {
			return nil, err
		}
		switch choice.mode {
		case "none", "required":
			out.ToolChoice = choice.mode
		case "function":
			out.ToolChoice = map[string]any{"type": "function", "function": map[string]string{"name": choice.name}}
		}
	}
	if th := req.Thinking; th != nil {
		on, err := anthropicThinking(th.Type)
		if err != nil {
			return nil, err
		}
		out.ChatTemplateKwargs = map[string]any{"enable_thinking": on}
	}
	if out.ResponseFormat, _, err = req.responseFormat(); err != nil {
		return nil, err
	}
	if req.Stream {
		out.Stream = true
		out.StreamOptions = &struct {
			IncludeUsage bool `json:"include_usage"`
		}{true}
	}
	if out.Model, err = s.remoteModel(r, req.Model, true); err != nil {
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
	chatMessage
	Reasoning *string `json:"reasoning"`
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

// remoteMessagesResponse is a translated reply: the local shape with the
// remote's usage.
type remoteMessagesResponse struct {
	anthropicResponse
	Usage remoteMessagesUsage `json:"usage"`
}

// remoteStop maps the remote's finish to Anthropic's stop reason.
func remoteStop(finish string, stopRaw json.RawMessage, stops []string, calls bool) (string, *string) {
	o := outcome{finish: "stop"}
	var matched string
	switch {
	case calls || finish == "tool_calls":
		o.finish = "tool_calls"
	case finish == "length":
		o.finish = "length"
	case json.Unmarshal(stopRaw, &matched) == nil && slices.Contains(stops, matched):
		o.stopString = matched
	}
	return stopReason(&o)
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
		return newID("toolu_")
	}
	return toolUseID(id)
}

// sendChat sends the translated request. One whose output limit, not
// its prompt, is over the remote's context goes again with the rest of the
// context as its limit, as the local engine caps max_tokens (Claude Code
// asks for 32k tokens whatever the context left).
func (s *Server) sendChat(r *http.Request, oreq *remoteChatRequest) (*http.Response, error) {
	for retried := false; ; retried = true {
		body, err := json.Marshal(oreq)
		if err != nil {
			return nil, internalError(err)
		}
		resp, err := s.remote.Do(r.Context(), http.MethodPost, "/v1/chat/completions", body)
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

// anthropicRemoteError is the Anthropic answer to a remote failure; a
// prompt over the remote's context is worded as Anthropic does ("prompt is
// too long"), which Claude Code acts on by compacting.
func anthropicRemoteError(err error) *apiError {
	e := remoteAPIError(err)
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

func (s *Server) handleRemoteMessages(w http.ResponseWriter, r *http.Request) {
	var req messagesRequest
	if err := decodeBody(r, &req); err != nil {
		writeError(w, r, err)
		return
	}
	oreq, err := s.remoteChat(r, &req)
	if err != nil {
		writeError(w, r, anthropicRemoteError(err))
		return
	}
	httpguard.EndParsing(r.Context())
	call := s.remote.Begin(r.URL.Path, oreq.Model, oreq.Stream)
	resp, err := s.sendChat(r, oreq)
	if err != nil {
		failCall(w, r, call, err)
		return
	}
	if oreq.Stream && strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		s.streamRemoteMessages(w, r, resp, call, oreq)
		return
	}
	data, err := remote.ReadBody(resp)
	if err != nil {
		failCall(w, r, call, err)
		return
	}
	call.Output()
	var cc remoteCompletion
	if err := json.Unmarshal(data, &cc); err != nil || len(cc.Choices) == 0 || cc.Choices[0].Message == nil {
		failCall(w, r, call, &remote.Error{Kind: remote.KindProtocol, Message: "the remote engine's chat completion has no message"})
		return
	}
	recordChatUsage(call, cc.Usage)
	call.End(nil)
	choice := cc.Choices[0]
	msg := choice.Message
	content := []map[string]any{}
	if th := msg.reasoning(); th != "" {
		content = append(content, map[string]any{"type": "thinking", "thinking": th, "signature": ""})
	}
	if text := msg.content(); text != "" || len(msg.ToolCalls) == 0 {
		content = append(content, map[string]any{"type": "text", "text": text})
	}
	for _, c := range msg.ToolCalls {
		content = append(content, map[string]any{"type": "tool_use", "id": callID(c.ID), "name": c.Function.Name, "input": toolArguments(c.Function.Arguments)})
	}
	var finish string
	if choice.FinishReason != nil {
		finish = *choice.FinishReason
	}
	reason, seq := remoteStop(finish, choice.StopReason, oreq.Stop, len(msg.ToolCalls) > 0)
	model := cc.Model
	if model == "" {
		model = oreq.Model
	}
	writeJSON(w, http.StatusOK, remoteMessagesResponse{
		anthropicResponse: anthropicResponse{ID: newID("msg_"), Type: "message", Role: "assistant", Model: model,
			Content: content, StopReason: &reason, StopSequence: seq},
		Usage: messagesUsageOf(cc.Usage),
	})
}

// handleRemoteCountTokens counts a prompt with the remote's POST /tokenize
// (vLLM's; other servers may have none, which is said plainly).
func (s *Server) handleRemoteCountTokens(w http.ResponseWriter, r *http.Request) {
	var req messagesRequest
	if err := decodeBody(r, &req); err != nil {
		writeError(w, r, err)
		return
	}
	if req.MaxTokens == nil {
		req.MaxTokens = new(1)
	}
	oreq, err := s.remoteChat(r, &req)
	if err != nil {
		writeError(w, r, anthropicRemoteError(err))
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
	resp, err := s.remote.Do(r.Context(), http.MethodPost, "/tokenize", body)
	if err != nil {
		var re *remote.Error
		if errors.As(err, &re) && re.Kind == remote.KindStatus && (re.Status == http.StatusNotFound || re.Status == http.StatusMethodNotAllowed) {
			writeError(w, r, notFound("unsupported", "counting tokens needs the remote engine's POST /tokenize (vLLM serves one); %s has none", s.remote.Endpoint()))
			return
		}
		if r.Context().Err() == nil {
			writeError(w, r, anthropicRemoteError(err))
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
		writeError(w, r, anthropicRemoteError(err))
		return
	}
	writeJSON(w, http.StatusOK, map[string]int{"input_tokens": *out.Count})
}
