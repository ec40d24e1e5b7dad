package responses

import (
	"encoding/json"

	"github.com/spoolhq/spool/engine/apiwire"
	"github.com/spoolhq/spool/engine/chat"
	"github.com/spoolhq/spool/engine/turn"
)

// Response is a Responses API response.
type Response struct {
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
	Usage              *Usage            `json:"usage"`
}

// Usage is a response's usage: the counts, and Spool's report of the turn.
type Usage struct {
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

// Answer is a response being written as its turn runs (a turn.Writer):
// its output items built from the pieces and, streamed, the events that
// describe them.
type Answer struct {
	resp    *Response
	history []chat.Message
	emit    func(name string, ev map[string]any) error
	seq     int

	open      map[string]any // the output item being written
	openKind  string
	text      string // all output text
	itemText  string // text of the open item
	reasoning string
	calls     []chat.ToolCall
	origins   map[string]origin
}

// Answer starts the response of id to r by model at created, sampled at
// temperature and top_p; sse, when set, streams its events.
func (r *Request) Answer(id, model string, created int64, temperature, topP float64, sse *apiwire.SSE) *Answer {
	resp := &Response{
		ID: id, Object: "response", CreatedAt: created, Status: "in_progress", Model: model,
		Output: []map[string]any{}, ParallelToolCalls: true, Tools: r.Tools, ToolChoice: "auto",
		Temperature: temperature, TopP: topP, Store: r.Stored(), Metadata: map[string]any{},
	}
	if resp.Tools == nil {
		resp.Tools = []json.RawMessage{}
	}
	if r.Instructions != "" {
		resp.Instructions = &r.Instructions
	}
	if r.PreviousResponseID != "" {
		resp.PreviousResponseID = &r.PreviousResponseID
	}
	a := &Answer{resp: resp, history: r.history, origins: r.origins}
	if sse != nil {
		a.emit = func(name string, ev map[string]any) error {
			ev["type"] = name
			ev["sequence_number"] = a.seq
			a.seq++
			return sse.Event(name, ev)
		}
	}
	return a
}

// Response is the response as written so far.
func (a *Answer) Response() *Response { return a.resp }

// State is what the store keeps of the response once it ended: the
// conversation with its reply.
func (a *Answer) State() *State {
	reply := chat.Message{Role: "assistant", Content: a.text, ReasoningContent: a.reasoning, ToolCalls: a.calls}
	return &State{History: append(a.history, reply), Response: a.resp}
}

func (a *Answer) send(name string, ev map[string]any) error {
	if a.emit == nil {
		return nil
	}
	return a.emit(name, ev)
}

// Start sends response.created and response.in_progress.
func (a *Answer) Start() error {
	if err := a.send("response.created", map[string]any{"response": a.resp}); err != nil {
		return err
	}
	return a.send("response.in_progress", map[string]any{"response": a.resp})
}

// Piece takes a piece of the turn. A keep-alive is an event, not a
// comment: clients such as Codex time out a stream that sends no event
// for minutes, which a long prefill on this machine can take. The last
// piece closes the output and sets the status and usage; Complete sends
// the terminal event.
func (a *Answer) Piece(p turn.Piece) error {
	if p.Idle {
		return a.send("response.in_progress", map[string]any{"response": a.resp})
	}
	if err := a.add(p); err != nil {
		return err
	}
	if p.End == nil {
		return nil
	}
	if err := a.finish(); err != nil {
		return err
	}
	a.resp.Status = "completed"
	if p.End.Finish == turn.FinishLength {
		a.resp.Status = "incomplete"
		a.resp.IncompleteDetails = map[string]string{"reason": "max_output_tokens"}
	}
	u := p.End.Usage
	usage := &Usage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens, EngineUsage: u.Engine}
	usage.TotalTokens = usage.InputTokens + usage.OutputTokens
	usage.InputTokensDetails.CachedTokens = u.CachedTokens
	a.resp.Usage = usage
	a.resp.OutputText = a.text
	return nil
}

// Complete sends the terminal event: response.completed, or
// response.incomplete when the reply ran out of tokens.
func (a *Answer) Complete() error {
	name := "response.completed"
	if a.resp.Status == "incomplete" {
		name = "response.incomplete"
	}
	return a.send(name, map[string]any{"response": a.resp})
}

// Fail sends the error event that ends a stream.
func (a *Answer) Fail(err error) error {
	e := turn.Error(err)
	return a.send("error", map[string]any{"code": e.Code, "message": e.Message, "param": nil})
}

func (a *Answer) index() int { return len(a.resp.Output) - 1 }

func (a *Answer) startItem(kind string, item map[string]any) error {
	if err := a.closeItem(); err != nil {
		return err
	}
	a.resp.Output = append(a.resp.Output, item)
	a.open, a.openKind, a.itemText = item, kind, ""
	if err := a.send("response.output_item.added", map[string]any{"output_index": a.index(), "item": item}); err != nil {
		return err
	}
	if kind == "message" {
		return a.send("response.content_part.added", map[string]any{"item_id": item["id"], "output_index": a.index(), "content_index": 0,
			"part": map[string]any{"type": "output_text", "text": "", "annotations": []any{}}})
	}
	return nil
}

func (a *Answer) closeItem() error {
	item := a.open
	if item == nil {
		return nil
	}
	a.open = nil
	idx := a.index()
	switch a.openKind {
	case "message":
		part := map[string]any{"type": "output_text", "text": a.itemText, "annotations": []any{}}
		item["content"] = []any{part}
		item["status"] = "completed"
		if err := a.send("response.output_text.done", map[string]any{"item_id": item["id"], "output_index": idx, "content_index": 0, "text": a.itemText}); err != nil {
			return err
		}
		if err := a.send("response.content_part.done", map[string]any{"item_id": item["id"], "output_index": idx, "content_index": 0, "part": part}); err != nil {
			return err
		}
	case "reasoning":
		item["content"] = []any{map[string]any{"type": "reasoning_text", "text": a.itemText}}
		if err := a.send("response.reasoning_text.done", map[string]any{"item_id": item["id"], "output_index": idx, "content_index": 0, "text": a.itemText}); err != nil {
			return err
		}
	}
	return a.send("response.output_item.done", map[string]any{"output_index": idx, "item": item})
}

// add takes one piece of generated output.
func (a *Answer) add(p turn.Piece) error {
	if p.Reasoning != "" {
		if a.openKind != "reasoning" || a.open == nil {
			if err := a.startItem("reasoning", map[string]any{"type": "reasoning", "id": apiwire.NewID("rs_"), "summary": []any{}}); err != nil {
				return err
			}
		}
		a.itemText += p.Reasoning
		a.reasoning += p.Reasoning
		if err := a.send("response.reasoning_text.delta", map[string]any{"item_id": a.open["id"], "output_index": a.index(), "content_index": 0, "delta": p.Reasoning}); err != nil {
			return err
		}
	}
	if p.Text != "" {
		if a.openKind != "message" || a.open == nil {
			if err := a.startItem("message", map[string]any{"type": "message", "id": apiwire.NewID("msg_"), "status": "in_progress", "role": "assistant", "content": []any{}}); err != nil {
				return err
			}
		}
		a.itemText += p.Text
		a.text += p.Text
		if err := a.send("response.output_text.delta", map[string]any{"item_id": a.open["id"], "output_index": a.index(), "content_index": 0, "delta": p.Text, "logprobs": []any{}}); err != nil {
			return err
		}
	}
	for _, tc := range p.Calls {
		c := chat.ToolCall{ID: tc.ID, Type: "function", Function: chat.FunctionCall{Name: tc.Name, Arguments: tc.Arguments}}
		done := callItem(c, a.origins)
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
		if err := a.startItem("function_call", item); err != nil {
			return err
		}
		if err := a.send(event+".delta", map[string]any{"item_id": item["id"], "output_index": a.index(), "delta": text}); err != nil {
			return err
		}
		item[field], item["status"] = text, "completed"
		if err := a.send(event+".done", map[string]any{"item_id": item["id"], "output_index": a.index(), field: text}); err != nil {
			return err
		}
		a.calls = append(a.calls, c)
	}
	return nil
}

// finish closes the open item; an empty reply gets an empty message.
func (a *Answer) finish() error {
	if len(a.resp.Output) == 0 {
		if err := a.startItem("message", map[string]any{"type": "message", "id": apiwire.NewID("msg_"), "status": "in_progress", "role": "assistant", "content": []any{}}); err != nil {
			return err
		}
	}
	return a.closeItem()
}
