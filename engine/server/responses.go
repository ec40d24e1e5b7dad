package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/spoolhq/spool/engine/apiwire"
	"github.com/spoolhq/spool/engine/chat"
	"github.com/spoolhq/spool/engine/generate"
	"github.com/spoolhq/spool/engine/turn"
)

// responsesRequest is an OpenAI /v1/responses request.
type responsesRequest struct {
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

	// origins maps the tool names the model sees back to the client's.
	origins map[string]toolOrigin
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
		return nil, invalid("input", "input is required")
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, invalid("input", "input: %v", err)
		}
		return []chat.Message{{Role: "user", Content: s}}, nil
	}
	var items []inputItem
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, invalid("input", "input must be a string or an array of input items")
	}
	var msgs []chat.Message
	for i, it := range items {
		param := fmt.Sprintf("input[%d]", i)
		switch it.Type {
		case "", "message":
			text, err := responsesText(param+".content", it.Content)
			if err != nil {
				return nil, err
			}
			switch it.Role {
			case "user", "system", "developer", "assistant":
			default:
				return nil, invalid(param+".role", "input item %d has the role %q; expected user, system, developer or assistant", i, it.Role)
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
			text, err := responsesText(param+".output", it.Output)
			if err != nil {
				return nil, err
			}
			msgs = append(msgs, chat.Message{Role: "tool", Content: text, ToolCallID: it.CallID})
		case "reasoning":
		default:
			if hostedCallItem(it.Type) {
				continue
			}
			return nil, invalid(param+".type", "input items of type %q are not supported", it.Type)
		}
	}
	if len(msgs) == 0 {
		return nil, invalid("input", "input holds no message")
	}
	return msgs, nil
}

// responsesText reads content that is a string or an array of text parts.
func responsesText(param string, raw json.RawMessage) (string, error) {
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
		return "", invalid(param, "%s must be a string or an array of text parts", param)
	}
	var out string
	for j, p := range parts {
		switch p.Type {
		case "input_text", "output_text", "text":
			out += p.Text
		default:
			return "", invalid(fmt.Sprintf("%s[%d].type", param, j), "content parts of type %q are not supported: this model reads text only", p.Type)
		}
	}
	return out, nil
}

// responseState is what the server keeps of a response for
// previous_response_id and GET /v1/responses/{id}.
type responseState struct {
	history  []chat.Message // the conversation including this reply
	response *responseObject
}

// responsesTurn validates a Responses request and translates it into a
// turn; history is the conversation it continues, with its input.
func (s *Server) responsesTurn(ctx context.Context, req *responsesRequest) (*turn.Request, []chat.Message, error) {
	if err := s.checkModel(req.Model, false); err != nil {
		return nil, nil, err
	}
	input, err := inputMessages(req.Input)
	if err != nil {
		return nil, nil, err
	}
	var history []chat.Message
	if req.PreviousResponseID != "" {
		prev, ok := s.responses.get(req.PreviousResponseID)
		if !ok {
			prev, ok = socketResponses(ctx).get(req.PreviousResponseID)
		}
		if !ok {
			return nil, nil, notFound("previous_response_not_found", "previous_response_id %q is not known to this server (responses are kept in memory)", req.PreviousResponseID)
		}
		history = append(history, prev.history...)
	}
	history = append(history, input...)
	tools, origins, dropped, err := responsesTools(req.Tools)
	if err != nil {
		return nil, nil, err
	}
	req.origins = origins
	if len(dropped) > 0 {
		s.logf("/v1/responses: left out hosted tools the model cannot run: %s", strings.Join(dropped, ", "))
	}
	if err := checkTools("tools", tools); err != nil {
		return nil, nil, err
	}
	choice, err := parseToolChoice(flatToolChoice(req.ToolChoice), tools)
	if err != nil {
		return nil, nil, err
	}
	effort := ""
	if req.Reasoning != nil {
		effort = req.Reasoning.Effort
	}
	thinking, extra, err := thinkingFrom(effort, nil)
	if err != nil {
		return nil, nil, checkParam("reasoning.effort", err)
	}
	t := &turn.Request{ID: newID("resp_"), Model: req.Model, Tools: tools, ToolChoice: choice, Thinking: thinking, Vars: extra,
		Sampling: turn.Sampling{Temperature: req.Temperature, TopP: req.TopP}, Stream: req.Stream}
	var rf *responseFormat
	if req.Text != nil && req.Text.Format != nil {
		f := req.Text.Format
		rf = &responseFormat{Type: f.Type}
		if f.Type == "json_schema" {
			rf.JSONSchema = &struct {
				Name   string          `json:"name"`
				Schema json.RawMessage `json:"schema"`
				Strict *bool           `json:"strict"`
			}{Name: f.Name, Schema: f.Schema, Strict: f.Strict}
		}
	}
	if t.Format, err = format("text.format", rf); err != nil {
		return nil, nil, err
	}
	t.Messages = history
	if req.Instructions != "" {
		t.Messages = append([]chat.Message{{Role: "system", Content: req.Instructions}}, history...)
	}
	if err := checkMessages("input", t.Messages); err != nil {
		return nil, nil, err
	}
	if t.MaxTokens, err = maxTokens("max_output_tokens", req.MaxOutputTokens); err != nil {
		return nil, nil, err
	}
	return t, history, nil
}

// responseObject is a Responses API response.
type responseObject struct {
	ID                 string            `json:"id"`
	Object             string            `json:"object"`
	CreatedAt          int64             `json:"created_at"`
	Status             string            `json:"status"`
	Error              any               `json:"error"`
	IncompleteDetails  any               `json:"incomplete_details"`
	Instructions       *string           `json:"instructions"`
	Model              string            `json:"model"`
	Output             []map[string]any  `json:"output"`
	OutputText         string            `json:"output_text"`
	PreviousResponseID *string           `json:"previous_response_id"`
	ParallelToolCalls  bool              `json:"parallel_tool_calls"`
	Tools              []json.RawMessage `json:"tools"`
	ToolChoice         any               `json:"tool_choice"`
	Temperature        float64           `json:"temperature"`
	TopP               float64           `json:"top_p"`
	Store              bool              `json:"store"`
	Metadata           map[string]any    `json:"metadata"`
	Usage              *responsesUsage   `json:"usage"`
}

type responsesUsage struct {
	InputTokens        int `json:"input_tokens"`
	InputTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	OutputTokens        int `json:"output_tokens"`
	OutputTokensDetails struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
	TotalTokens int `json:"total_tokens"`
	*turn.EngineUsage
}

func (s *Server) handleGetResponse(w http.ResponseWriter, r *http.Request) {
	st, ok := s.responses.get(r.PathValue("id"))
	if !ok {
		writeError(w, r, notFound("response_not_found", "the response %q is not known to this server", r.PathValue("id")))
		return
	}
	writeJSON(w, http.StatusOK, st.response)
}

func (s *Server) handleResponses(w http.ResponseWriter, r *http.Request) {
	var req responsesRequest
	var history []chat.Message
	var sampling generate.Sampling
	st, ok := startTurn(s, w, r, &req, func(req *responsesRequest) (t *turn.Request, err error) {
		t, history, err = s.responsesTurn(r.Context(), req)
		if t != nil {
			sampling = s.local.Sampling(t.Sampling)
		}
		return t, err
	})
	if !ok {
		return
	}
	resp := &responseObject{
		ID: st.ID(), Object: "response", CreatedAt: time.Now().Unix(), Status: "in_progress", Model: s.cfg.ModelID,
		Output: []map[string]any{}, ParallelToolCalls: true, Tools: req.Tools, ToolChoice: "auto",
		Temperature: sampling.Temperature, TopP: sampling.TopP, Store: req.Store == nil || *req.Store, Metadata: map[string]any{},
	}
	if resp.Tools == nil {
		resp.Tools = []json.RawMessage{}
	}
	if req.Instructions != "" {
		resp.Instructions = &req.Instructions
	}
	if req.PreviousResponseID != "" {
		resp.PreviousResponseID = &req.PreviousResponseID
	}
	b := &responsesBuilder{resp: resp, origins: req.origins}
	var sse *apiwire.SSE
	if req.Stream {
		var err error
		if sse, err = apiwire.StartSSE(w); err != nil {
			st.Close()
			return
		}
		b.emit = func(name string, ev map[string]any) error {
			ev["type"] = name
			ev["sequence_number"] = b.seq
			b.seq++
			return sse.Event(name, ev)
		}
	}
	if err := b.send("response.created", map[string]any{"response": resp}); err != nil {
		st.Close()
		return
	}
	if err := b.send("response.in_progress", map[string]any{"response": resp}); err != nil {
		st.Close()
		return
	}
	var idle func() error
	if sse != nil {
		// An event, not a comment: clients such as Codex time out a
		// stream that sends no event for minutes, which a long prefill on
		// this machine can take.
		idle = func() error { return b.send("response.in_progress", map[string]any{"response": resp}) }
	}
	end, err := s.generate(r.Context(), st, b.add, idle)
	if err != nil {
		if r.Context().Err() != nil {
			return
		}
		if sse != nil {
			e := asAPIError(err)
			b.send("error", map[string]any{"code": e.Code, "message": e.Message, "param": nil})
			return
		}
		writeError(w, r, err)
		return
	}
	if err := b.finish(); err != nil {
		return
	}
	resp.Status = "completed"
	if end.Finish == turn.FinishLength {
		resp.Status = "incomplete"
		resp.IncompleteDetails = map[string]string{"reason": "max_output_tokens"}
	}
	u := &responsesUsage{InputTokens: end.Usage.PromptTokens, OutputTokens: end.Usage.CompletionTokens, EngineUsage: end.Usage.Engine}
	u.TotalTokens = u.InputTokens + u.OutputTokens
	u.InputTokensDetails.CachedTokens = end.Usage.CachedTokens
	resp.Usage = u
	resp.OutputText = b.text
	reply := chat.Message{Role: "assistant", Content: b.text, ReasoningContent: b.reasoning, ToolCalls: b.calls}
	if resp.Store {
		s.responses.put(st.ID(), &responseState{history: append(history, reply), response: resp})
	} else {
		socketResponses(r.Context()).put(st.ID(), &responseState{history: append(history, reply), response: resp})
	}
	if sse == nil {
		writeJSON(w, http.StatusOK, resp)
		return
	}
	name := "response.completed"
	if resp.Status == "incomplete" {
		name = "response.incomplete"
	}
	b.send(name, map[string]any{"response": resp})
}

// responsesBuilder assembles output items and, when streaming, sends the
// events that describe them.
type responsesBuilder struct {
	resp *responseObject
	emit func(name string, ev map[string]any) error
	seq  int

	open      map[string]any // the output item being written
	openKind  string
	text      string // all output text
	itemText  string // text of the open item
	reasoning string
	calls     []chat.ToolCall
	origins   map[string]toolOrigin
}

func (b *responsesBuilder) send(name string, ev map[string]any) error {
	if b.emit == nil {
		return nil
	}
	return b.emit(name, ev)
}

func (b *responsesBuilder) index() int { return len(b.resp.Output) - 1 }

func (b *responsesBuilder) startItem(kind string, item map[string]any) error {
	if err := b.closeItem(); err != nil {
		return err
	}
	b.resp.Output = append(b.resp.Output, item)
	b.open, b.openKind, b.itemText = item, kind, ""
	if err := b.send("response.output_item.added", map[string]any{"output_index": b.index(), "item": item}); err != nil {
		return err
	}
	if kind == "message" {
		return b.send("response.content_part.added", map[string]any{"item_id": item["id"], "output_index": b.index(), "content_index": 0,
			"part": map[string]any{"type": "output_text", "text": "", "annotations": []any{}}})
	}
	return nil
}

func (b *responsesBuilder) closeItem() error {
	item := b.open
	if item == nil {
		return nil
	}
	b.open = nil
	idx := b.index()
	switch b.openKind {
	case "message":
		part := map[string]any{"type": "output_text", "text": b.itemText, "annotations": []any{}}
		item["content"] = []any{part}
		item["status"] = "completed"
		if err := b.send("response.output_text.done", map[string]any{"item_id": item["id"], "output_index": idx, "content_index": 0, "text": b.itemText}); err != nil {
			return err
		}
		if err := b.send("response.content_part.done", map[string]any{"item_id": item["id"], "output_index": idx, "content_index": 0, "part": part}); err != nil {
			return err
		}
	case "reasoning":
		item["content"] = []any{map[string]any{"type": "reasoning_text", "text": b.itemText}}
		if err := b.send("response.reasoning_text.done", map[string]any{"item_id": item["id"], "output_index": idx, "content_index": 0, "text": b.itemText}); err != nil {
			return err
		}
	}
	return b.send("response.output_item.done", map[string]any{"output_index": idx, "item": item})
}

// add takes one piece of generated output.
func (b *responsesBuilder) add(p turn.Piece) error {
	if p.Reasoning != "" {
		if b.openKind != "reasoning" || b.open == nil {
			if err := b.startItem("reasoning", map[string]any{"type": "reasoning", "id": newID("rs_"), "summary": []any{}}); err != nil {
				return err
			}
		}
		b.itemText += p.Reasoning
		b.reasoning += p.Reasoning
		if err := b.send("response.reasoning_text.delta", map[string]any{"item_id": b.open["id"], "output_index": b.index(), "content_index": 0, "delta": p.Reasoning}); err != nil {
			return err
		}
	}
	if p.Text != "" {
		if b.openKind != "message" || b.open == nil {
			if err := b.startItem("message", map[string]any{"type": "message", "id": newID("msg_"), "status": "in_progress", "role": "assistant", "content": []any{}}); err != nil {
				return err
			}
		}
		b.itemText += p.Text
		b.text += p.Text
		if err := b.send("response.output_text.delta", map[string]any{"item_id": b.open["id"], "output_index": b.index(), "content_index": 0, "delta": p.Text, "logprobs": []any{}}); err != nil {
			return err
		}
	}
	for _, tc := range p.Calls {
		c := chat.ToolCall{ID: tc.ID, Type: "function", Function: chat.FunctionCall{Name: tc.Name, Arguments: tc.Arguments}}
		done := callItem(c, b.origins)
		// The item is announced in progress, its text streamed, then done.
		item := map[string]any{}
		for k, v := range done {
			item[k] = v
		}
		field, event := "arguments", "response.function_call_arguments"
		if item["type"] == "custom_tool_call" {
			field, event = "input", "response.custom_tool_call_input"
		}
		text := done[field]
		item[field], item["status"] = "", "in_progress"
		if err := b.startItem("function_call", item); err != nil {
			return err
		}
		if err := b.send(event+".delta", map[string]any{"item_id": item["id"], "output_index": b.index(), "delta": text}); err != nil {
			return err
		}
		item[field], item["status"] = text, "completed"
		if err := b.send(event+".done", map[string]any{"item_id": item["id"], "output_index": b.index(), field: text}); err != nil {
			return err
		}
		b.calls = append(b.calls, c)
	}
	return nil
}

// finish closes the open item; an empty reply gets an empty message.
func (b *responsesBuilder) finish() error {
	if len(b.resp.Output) == 0 {
		if err := b.startItem("message", map[string]any{"type": "message", "id": newID("msg_"), "status": "in_progress", "role": "assistant", "content": []any{}}); err != nil {
			return err
		}
	}
	return b.closeItem()
}
