package remotefront

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/spoolhq/spool/engine/anthropicsse"
	"github.com/spoolhq/spool/engine/apiwire"
	"github.com/spoolhq/spool/engine/remote"
)

// The streamed half of /v1/messages on a remote server: the remote's chat
// chunks become Anthropic's events.

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
	blocks  *anthropicsse.Message
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
			if err := m.blocks.Thinking(th); err != nil {
				return output, err
			}
		}
		if text := d.content(); text != "" {
			output = true
			if err := m.blocks.Text(text); err != nil {
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
		if err := m.blocks.StartToolUse(callID(t.id), t.name); err != nil {
			return err
		}
		t.block = m.blocks.Index()
	}
	if t.block < 0 || t.pending == "" {
		return nil
	}
	if m.blocks.Open() != "tool_use" || m.blocks.Index() != t.block {
		return errToolOrder
	}
	p := t.pending
	t.pending = ""
	return m.blocks.InputJSON(p)
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
func (f *Front) streamRemoteMessages(w http.ResponseWriter, r *http.Request, resp *http.Response, call *remote.Call, oreq *ChatRequest) {
	st := f.rc.Stream(resp)
	defer st.Close()
	sse, err := apiwire.StartSSE(w)
	if err != nil {
		call.End(err)
		return
	}
	msg, err := anthropicsse.Start(sse, apiwire.NewID("msg_"), oreq.Model, remoteMessagesUsage{})
	if err != nil {
		call.End(context.Canceled)
		return
	}
	fail := func(err error) {
		call.End(err)
		msg.Error(f.failed(r, f.anthropicError(err)).Anthropic())
	}
	m := &messagesTranslation{blocks: msg, tools: map[int]*remoteToolStream{}}
	tick := time.NewTicker(f.cfg.KeepAlive)
	defer tick.Stop()
	last := time.Now()
	for done := false; !done; {
		select {
		case <-r.Context().Done():
			if stop := stopCause(r); stop != nil {
				msg.Error(f.failed(r, stop).Anthropic())
			}
			call.End(context.Canceled)
			return
		case <-tick.C:
			if time.Since(last) >= f.cfg.KeepAlive {
				if msg.Ping() != nil {
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
				if r.Context().Err() != nil && stopCause(r) == nil {
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
	recordChatUsage(call, m.usage)
	reason, seq := apiwire.AnthropicStop(remoteFinish(m.finish, m.stopRaw, oreq.Stop, m.calls))
	if msg.Finish(reason, seq, messagesUsageOf(m.usage)) != nil {
		call.End(context.Canceled)
		return
	}
	call.End(nil)
	msg.End()
}
