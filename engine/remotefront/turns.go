package remotefront

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/spoolhq/spool/engine/apiwire"
	"github.com/spoolhq/spool/engine/remote"
	"github.com/spoolhq/spool/engine/turn"
)

// chatPath is where the front sends turns.
const chatPath = "/v1/chat/completions"

// Submit sends a turn to the remote's chat API (turn.Engine). The remote's
// failures before an answer are the front's errors (Error words them for
// the client, as the gateway's); a prompt over the remote's context is a
// *turn.ContextError when the remote says by how much.
func (f *Front) Submit(ctx context.Context, t *turn.Request) (turn.Stream, error) {
	oreq, err := f.chatRequest(ctx, t)
	if err != nil {
		return nil, f.turnError(err)
	}
	call := f.rc.Begin(chatPath, oreq.Model, oreq.Stream)
	resp, err := f.sendChat(ctx, oreq)
	if err != nil {
		call.End(err)
		return nil, f.turnError(err)
	}
	id := t.ID
	if id == "" {
		id = apiwire.NewID("turn-")
	}
	s := &stream{f: f, id: id, model: oreq.Model, stops: oreq.Stop, call: call, calls: map[int]bool{}}
	if oreq.Stream && strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		s.events = f.rc.Stream(resp)
		s.last = time.Now()
		return s, nil
	}
	// A whole answer: one piece, and the end.
	data, err := remote.ReadBody(resp)
	if err != nil {
		call.End(err)
		return nil, f.turnError(err)
	}
	call.Output()
	var cc remoteCompletion
	if err := json.Unmarshal(data, &cc); err != nil || len(cc.Choices) == 0 || cc.Choices[0].Message == nil {
		err := &remote.Error{Kind: remote.KindProtocol, Message: "the remote engine's chat completion has no message"}
		call.End(err)
		return nil, f.turnError(err)
	}
	recordChatUsage(call, cc.Usage)
	call.End(nil)
	choice := cc.Choices[0]
	msg := choice.Message
	p := turn.Piece{Reasoning: msg.reasoning(), Text: msg.content()}
	for i, c := range msg.ToolCalls {
		p.Calls = append(p.Calls, turn.Call{Index: i, ID: c.ID, Name: c.Function.Name, Arguments: c.Function.Arguments})
	}
	var finish string
	if choice.FinishReason != nil {
		finish = *choice.FinishReason
	}
	end := &turn.End{Model: oreq.Model, Usage: usageOf(cc.Usage)}
	if cc.Model != "" {
		end.Model = cc.Model
	}
	end.Finish, end.StopSequence = remoteFinish(finish, choice.StopReason, oreq.Stop, len(msg.ToolCalls) > 0)
	p.End = end
	s.whole = &p
	return s, nil
}

// Context is the context of the remote's model, when it says
// (turn.Sizer).
func (f *Front) Context() int {
	if st := f.rc.Status(); len(st.Models) > 0 {
		return st.Models[0].ContextLength
	}
	return 0
}

// turnError is a remote failure as the turn's error: the gateway's
// (apiError), or a *turn.ContextError where the remote said how long the
// prompt is.
func (f *Front) turnError(err error) error {
	var re *remote.Error
	if errors.As(err, &re) {
		if ov, ok := remote.ContextOverflow(re); ok {
			return &turn.ContextError{Prompt: ov.Prompt, Limit: ov.Limit}
		}
	}
	return f.apiError(err)
}

// stream is a turn on the remote: its answer read as pieces.
type stream struct {
	f     *Front
	id    string
	model string
	stops []string
	call  *remote.Call
	// whole is the last piece of an answer that was not streamed.
	whole *turn.Piece
	// events is the remote's stream; last when it last sent something.
	events *remote.Stream
	last   time.Time

	finish  string
	stopRaw json.RawMessage
	usage   *chatUsage
	calls   map[int]bool // the tool calls' indexes
	done    bool         // the last piece was given, or the turn failed
}

func (s *stream) ID() string        { return s.id }
func (s *stream) Model() string     { return s.model }
func (s *stream) PromptTokens() int { return -1 }

// Next returns the answer's next piece: the remote's chunks, translated;
// an Idle piece while the remote is silent past the keep-alive.
func (s *stream) Next(ctx context.Context) (turn.Piece, error) {
	if s.done {
		return turn.Piece{}, turn.ErrEnded
	}
	if s.whole != nil {
		p := *s.whole
		s.whole, s.done = nil, true
		return p, nil
	}
	wait := time.NewTimer(max(s.f.cfg.KeepAlive-time.Since(s.last), 0))
	defer wait.Stop()
	for {
		select {
		case <-ctx.Done():
			return turn.Piece{}, context.Cause(ctx)
		case <-wait.C:
			s.last = time.Now()
			return turn.Piece{Idle: true}, nil
		case ev, ok := <-s.events.Events():
			if !ok {
				err := s.events.Err()
				if err == nil {
					err = &remote.Error{Kind: remote.KindProtocol, Message: "the remote engine's stream ended before its end"}
				}
				return turn.Piece{}, s.fail(err)
			}
			if ev.Done() {
				return s.end(), nil
			}
			d := bytes.TrimSpace(ev.Data)
			if len(d) == 0 || d[0] != '{' {
				continue
			}
			var c remoteCompletion
			if err := json.Unmarshal(d, &c); err != nil {
				return turn.Piece{}, s.fail(&remote.Error{Kind: remote.KindProtocol, Message: fmt.Sprintf("the remote engine sent a chunk that is not JSON: %v", err)})
			}
			if c.Object == "error" || len(c.Error) > 0 {
				return turn.Piece{}, s.fail(remote.ParseError(http.StatusInternalServerError, d))
			}
			s.last = time.Now()
			if p, ok := s.chunk(&c); ok {
				s.call.Output()
				return p, nil
			}
		}
	}
}

// chunk translates one chunk into a piece; ok reports output.
func (s *stream) chunk(c *remoteCompletion) (p turn.Piece, ok bool) {
	if c.Usage != nil {
		s.usage = c.Usage
	}
	for _, ch := range c.Choices {
		if ch.FinishReason != nil && *ch.FinishReason != "" {
			s.finish, s.stopRaw = *ch.FinishReason, ch.StopReason
		}
		d := ch.Delta
		if d == nil {
			continue
		}
		p.Reasoning += d.reasoning()
		p.Text += d.content()
		// vLLM sends a call's id and name first and then its arguments
		// in parts, each with only the call's index.
		for _, tc := range d.ToolCalls {
			idx := 0
			if tc.Index != nil {
				idx = *tc.Index
			}
			s.calls[idx] = true
			p.Calls = append(p.Calls, turn.Call{Index: idx, ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
		}
	}
	return p, p.Reasoning != "" || p.Text != "" || len(p.Calls) > 0
}

// end is the last piece of a streamed answer: the finish and the usage.
func (s *stream) end() turn.Piece {
	s.done = true
	recordChatUsage(s.call, s.usage)
	s.call.End(nil)
	s.events.Close()
	end := &turn.End{Model: s.model, Usage: usageOf(s.usage)}
	end.Finish, end.StopSequence = remoteFinish(s.finish, s.stopRaw, s.stops, len(s.calls) > 0)
	return turn.Piece{End: end}
}

// fail ends the turn with err, the remote's failure.
func (s *stream) fail(err error) error {
	s.done = true
	s.call.End(err)
	s.events.Close()
	return s.f.turnError(err)
}

// Close ends the turn: a stream still open is closed, which ends the
// generation on the remote.
func (s *stream) Close() {
	if s.done {
		return
	}
	s.done = true
	s.call.End(context.Canceled)
	if s.events != nil {
		s.events.Close()
	}
}

// CountTokens counts a turn's prompt with the remote's POST /tokenize
// (vLLM's; other servers may have none, which is said plainly)
// (turn.Counter).
func (f *Front) CountTokens(ctx context.Context, t *turn.Request) (int, error) {
	oreq, err := f.chatRequest(ctx, t)
	if err != nil {
		return 0, f.turnError(err)
	}
	tok := map[string]any{"model": oreq.Model, "messages": oreq.Messages, "add_generation_prompt": true}
	if len(oreq.Tools) > 0 {
		tok["tools"] = oreq.Tools
	}
	if oreq.ChatTemplateKwargs != nil {
		tok["chat_template_kwargs"] = oreq.ChatTemplateKwargs
	}
	body, _ := json.Marshal(tok)
	resp, err := f.rc.Do(ctx, http.MethodPost, "/tokenize", body)
	if err != nil {
		var re *remote.Error
		if errors.As(err, &re) && re.Kind == remote.KindStatus && (re.Status == http.StatusNotFound || re.Status == http.StatusMethodNotAllowed) {
			return 0, apiwire.NotFound("unsupported", "counting tokens needs the remote engine's POST /tokenize (vLLM serves one); %s has none", f.rc.Endpoint())
		}
		return 0, f.turnError(err)
	}
	data, err := remote.ReadBody(resp)
	var out struct {
		Count *int `json:"count"`
	}
	if err == nil && (json.Unmarshal(data, &out) != nil || out.Count == nil) {
		err = &remote.Error{Kind: remote.KindProtocol, Message: "the remote engine's /tokenize answer has no count"}
	}
	if err != nil {
		return 0, f.turnError(err)
	}
	return *out.Count, nil
}
