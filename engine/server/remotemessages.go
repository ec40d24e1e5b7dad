package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/spoolhq/spool/engine/chat"
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

// anthropicToolChoice reads an Anthropic tool_choice (auto, any, tool with
// its name, none) as the chat tool choice. The local /v1/messages reads
// the same mapping inline; both could share this.
func anthropicToolChoice(typ, name string, tools []chat.Tool) (toolChoice, error) {
	switch typ {
	case "auto", "":
		return toolChoice{mode: "auto"}, nil
	case "none":
		return toolChoice{mode: "none"}, nil
	case "any":
		if len(tools) == 0 {
			return toolChoice{}, invalid("tool_choice", `tool_choice "any" needs tools`)
		}
		return toolChoice{mode: "required"}, nil
	case "tool":
		if toolNamed(tools, name) == nil {
			return toolChoice{}, invalid("tool_choice.name", "tool_choice names the tool %q, which is not among the tools", name)
		}
		return toolChoice{mode: "function", name: name}, nil
	}
	return toolChoice{}, invalid("tool_choice.type", "tool_choice type %q must be auto, any, tool or none", typ)
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

// anthropicRemoteError is the Anthropic answer to a remote failure; a
// prompt over the remote's context is worded as Anthropic does ("prompt is
// too long"), which Claude Code acts on by compacting.
func anthropicRemoteError(err error) *apiError {
	e := remoteAPIError(err)
	if e.Code == "context_length_exceeded" && !strings.HasPrefix(e.Message, "prompt is too long") {
		c := *e
		c.Message = "prompt is too long: " + e.Message
		return &c
	}
	return e
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
	body, err := json.Marshal(oreq)
	if err != nil {
		writeError(w, r, internalError(err))
		return
	}
	endParsing(r.Context())
	call := s.remote.Begin(r.URL.Path, oreq.Model, oreq.Stream)
	resp, err := s.remote.Do(r.Context(), http.MethodPost, "/v1/chat/completions", body)
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

// anthropicBlocks writes the content blocks of an Anthropic message
// stream: one block open at a time, numbered from 0.
type anthropicBlocks struct {
	sse   *sseWriter
	index int    // the open (or last) block's index; -1 before the first
	open  string // the open block's type; "" when none is open
}

func (b *anthropicBlocks) start(kind string, block map[string]any) error {
	if err := b.stop(); err != nil {
		return err
	}
	b.index++
	b.open = kind
	return b.sse.event("content_block_start", map[string]any{"type": "content_block_start", "index": b.index, "content_block": block})
}

func (b *anthropicBlocks) stop() error {
	if b.open == "" {
		return nil
	}
	b.open = ""
	return b.sse.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": b.index})
}

func (b *anthropicBlocks) delta(d map[string]any) error {
	return b.sse.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": b.index, "delta": d})
}

// remoteToolStream is one tool call of a streamed answer: its block
// starts once its name is known, and its arguments stream into it.
type remoteToolStream struct {
	id, name string
	pending  string // arguments not yet written
	block    int    // its block's index, -1 until started
}

// messagesTranslation turns the remote's chat chunks into Anthropic
// events.
type messagesTranslation struct {
	blocks  anthropicBlocks
	tools   map[int]*remoteToolStream
	finish  string
	stopRaw json.RawMessage
	usage   *chatUsage
	calls   bool
}

var errToolOrder = &remote.Error{Kind: remote.KindProtocol,
	Message: "the remote engine interleaved the deltas of two tool calls, which Anthropic content blocks cannot carry"}

// chunk translates one chunk; it reports whether the chunk had output.
func (m *messagesTranslation) chunk(c *remoteCompletion) (bool, error) {
	if c.Usage != nil {
		m.usage = c.Usage
	}
	output := false
	for _, ch := range c.Choices {
		if ch.FinishReason != nil && *ch.FinishReason != "" {
			m.finish, m.stopRaw = *ch.FinishReason, ch.StopReason
		}
		d := ch.Delta
		if d == nil {
			continue
		}
		if th := d.reasoning(); th != "" {
			output = true
			if m.blocks.open != "thinking" {
				if err := m.blocks.start("thinking", map[string]any{"type": "thinking", "thinking": "", "signature": ""}); err != nil {
					return output, err
				}
			}
			if err := m.blocks.delta(map[string]any{"type": "thinking_delta", "thinking": th}); err != nil {
				return output, err
			}
		}
		if text := d.content(); text != "" {
			output = true
			if m.blocks.open != "text" {
				if err := m.blocks.start("text", map[string]any{"type": "text", "text": ""}); err != nil {
					return output, err
				}
			}
			if err := m.blocks.delta(map[string]any{"type": "text_delta", "text": text}); err != nil {
				return output, err
			}
		}
		for _, tc := range d.ToolCalls {
			output, m.calls = true, true
			if err := m.toolDelta(tc); err != nil {
				return output, err
			}
		}
	}
	return output, nil
}

// toolDelta applies one tool-call delta: vLLM sends the id and name first
// and then the arguments in pieces, each with only the call's index.
func (m *messagesTranslation) toolDelta(tc toolCallDelta) error {
	idx := 0
	if tc.Index != nil {
		idx = *tc.Index
	}
	t := m.tools[idx]
	if t == nil {
		t = &remoteToolStream{block: -1}
		m.tools[idx] = t
	}
	if t.id == "" {
		t.id = tc.ID
	}
	if t.name == "" {
		t.name = tc.Function.Name
	}
	t.pending += tc.Function.Arguments
	if t.block < 0 && t.name != "" {
		if err := m.blocks.start("tool_use", map[string]any{"type": "tool_use", "id": callID(t.id), "name": t.name, "input": map[string]any{}}); err != nil {
			return err
		}
		t.block = m.blocks.index
	}
	if t.block < 0 || t.pending == "" {
		return nil
	}
	if m.blocks.open != "tool_use" || m.blocks.index != t.block {
		return errToolOrder
	}
	p := t.pending
	t.pending = ""
	return m.blocks.delta(map[string]any{"type": "input_json_delta", "partial_json": p})
}

// end checks that every tool call got its name.
func (m *messagesTranslation) end() error {
	for _, t := range m.tools {
		if t.block < 0 {
			return &remote.Error{Kind: remote.KindProtocol, Message: "the remote engine streamed a tool call without its name"}
		}
	}
	return nil
}

// streamRemoteMessages translates the remote's chat stream into
// Anthropic's: message_start, content blocks with their deltas, pings
// while the remote is silent, message_delta with the stop reason and
// usage, and message_stop; a failure ends the stream with an error event.
func (s *Server) streamRemoteMessages(w http.ResponseWriter, r *http.Request, resp *http.Response, call *remote.Call, oreq *remoteChatRequest) {
	st := s.remote.Stream(resp)
	defer st.Close()
	sse, err := startSSE(w)
	if err != nil {
		call.End(err)
		return
	}
	fail := func(err error) {
		call.End(err)
		sse.event("error", anthropicRemoteError(err).anthropic())
	}
	start := map[string]any{"type": "message_start", "message": map[string]any{
		"id": newID("msg_"), "type": "message", "role": "assistant", "model": oreq.Model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil, "usage": remoteMessagesUsage{},
	}}
	if sse.event("message_start", start) != nil {
		call.End(context.Canceled)
		return
	}
	m := &messagesTranslation{blocks: anthropicBlocks{sse: sse, index: -1}, tools: map[int]*remoteToolStream{}}
	tick := time.NewTicker(s.cfg.KeepAlive)
	defer tick.Stop()
	last := time.Now()
	for done := false; !done; {
		select {
		case <-r.Context().Done():
			call.End(context.Canceled)
			return
		case <-tick.C:
			if time.Since(last) >= s.cfg.KeepAlive {
				if sse.event("ping", map[string]string{"type": "ping"}) != nil {
					call.End(context.Canceled)
					return
				}
				last = time.Now()
			}
		case ev, ok := <-st.Events():
			if !ok {
				err := st.Err()
				if err == nil {
					err = &remote.Error{Kind: remote.KindProtocol, Message: "the remote engine's stream ended before its end"}
				}
				fail(err)
				return
			}
			if ev.Done() {
				done = true
				break
			}
			d := bytes.TrimSpace(ev.Data)
			if len(d) == 0 || d[0] != '{' {
				continue
			}
			var c remoteCompletion
			if err := json.Unmarshal(d, &c); err != nil {
				fail(&remote.Error{Kind: remote.KindProtocol, Message: fmt.Sprintf("the remote engine sent a chunk that is not JSON: %v", err)})
				return
			}
			if c.Object == "error" || len(c.Error) > 0 {
				fail(remote.ParseError(http.StatusInternalServerError, d))
				return
			}
			output, err := m.chunk(&c)
			if output {
				call.Output()
			}
			if err != nil {
				if r.Context().Err() != nil {
					call.End(context.Canceled)
					return
				}
				fail(err)
				return
			}
			last = time.Now()
		}
	}
	if err := m.end(); err != nil {
		fail(err)
		return
	}
	if m.blocks.index < 0 {
		// An empty reply still has one (empty) text block.
		if m.blocks.start("text", map[string]any{"type": "text", "text": ""}) != nil {
			call.End(context.Canceled)
			return
		}
	}
	if m.blocks.stop() != nil {
		call.End(context.Canceled)
		return
	}
	recordChatUsage(call, m.usage)
	reason, seq := remoteStop(m.finish, m.stopRaw, oreq.Stop, m.calls)
	if sse.event("message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": reason, "stop_sequence": seq}, "usage": messagesUsageOf(m.usage)}) != nil {
		call.End(context.Canceled)
		return
	}
	call.End(nil)
	sse.event("message_stop", map[string]string{"type": "message_stop"})
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
	endParsing(r.Context())
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
