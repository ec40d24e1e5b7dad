package anthropic

import (
	"errors"
	"net/http"

	"github.com/spoolhq/spool/engine/apiwire"
	"github.com/spoolhq/spool/engine/turn"
)

// Stream writes a Messages event stream as its turn runs (a turn.Writer):
// message_start, a block per run of reasoning (thinking) and text, a
// tool_use block per call, its input streamed as it comes (a remote
// engine's call may come in parts), a ping for each keep-alive, and
// message_delta with the stop reason and usage and message_stop; a
// failure ends the stream with an error event.
type Stream struct {
	m     *Message
	calls map[int]*callBlock
}

// callBlock is one tool call of the reply: its block starts once its name
// is known, and its arguments stream into it.
type callBlock struct {
	id, name string
	pending  string // arguments not yet written
	block    int    // its block's index, -1 until started
}

// A reply whose tool calls' parts interleave cannot be carried by
// Anthropic's content blocks (one open at a time), nor a call without a
// name: the engine (a remote one: the local engine gives whole calls)
// broke the protocol.
var (
	errCallOrder = errors.New("the remote engine interleaved the deltas of two tool calls, which Anthropic content blocks cannot carry")
	errNoName    = errors.New("the remote engine streamed a tool call without its name")
)

// failed ends the stream with the error event of a reply the stream cannot
// carry, and returns err.
func (s *Stream) failed(err error) error {
	s.m.Error((&apiwire.Error{Status: http.StatusBadGateway, Type: "server_error", Code: "remote_protocol_error", Message: err.Error()}).Anthropic())
	return err
}

// StartStream writes message_start for the message of turn st to w (the
// server's SSE stream).
func StartStream(w EventWriter, st turn.Stream) (*Stream, error) {
	var usage any = Usage{}
	if n := st.PromptTokens(); n >= 0 {
		// The local engine knows the prompt's length at the start.
		usage = map[string]int{"input_tokens": n, "output_tokens": 0}
	}
	m, err := startMessage(w, st.ID(), st.Model(), usage)
	if err != nil {
		return nil, err
	}
	return &Stream{m: m, calls: map[int]*callBlock{}}, nil
}

// Piece writes what a piece of the turn adds.
func (s *Stream) Piece(p turn.Piece) error {
	if p.Idle {
		return s.m.Ping()
	}
	if p.Reasoning != "" {
		if err := s.m.Thinking(p.Reasoning); err != nil {
			return err
		}
	}
	if p.Text != "" {
		if err := s.m.Text(p.Text); err != nil {
			return err
		}
	}
	for _, c := range p.Calls {
		if err := s.call(c); err != nil {
			return s.failed(err)
		}
	}
	if p.End == nil {
		return nil
	}
	for _, c := range s.calls {
		if c.block < 0 {
			return s.failed(errNoName)
		}
	}
	reason, seq := Stop(p.End.Finish, p.End.StopSequence)
	if err := s.m.Finish(reason, seq, UsageOf(p.End.Usage)); err != nil {
		return err
	}
	return s.m.End()
}

// call writes a part of a tool call: a call's first part with a name
// starts its block, and its arguments stream into it.
func (s *Stream) call(part turn.Call) error {
	c := s.calls[part.Index]
	if c == nil {
		c = &callBlock{block: -1}
		s.calls[part.Index] = c
	}
	if c.id == "" {
		c.id = part.ID
	}
	if c.name == "" {
		c.name = part.Name
	}
	c.pending += part.Arguments
	if c.block < 0 && c.name != "" {
		if err := s.m.StartToolUse(ToolUseID(c.id), c.name); err != nil {
			return err
		}
		c.block = s.m.Index()
	}
	if c.block < 0 || c.pending == "" {
		return nil
	}
	if s.m.Open() != "tool_use" || s.m.Index() != c.block {
		return errCallOrder
	}
	args := c.pending
	c.pending = ""
	return s.m.InputJSON(args)
}

// Fail ends the stream with the error's event, in Anthropic's words.
func (s *Stream) Fail(err error) error { return s.m.Error(Error(err).Anthropic()) }
