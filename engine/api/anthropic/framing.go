package anthropic

// EventWriter writes one named server-sent event whose data is v as JSON.
type EventWriter interface {
	Event(name string, v any) error
}

// The framing of a Messages event stream: message_start, content blocks
// (thinking, text, tool_use) opened one at a time and numbered from 0 with
// their deltas and stops, ping, error, message_delta and message_stop.

// Message frames one streamed message.
type Message struct {
	w     EventWriter
	index int    // the open (or last) block's index; -1 before the first
	open  string // the open block's type; "" when none is open
}

// startMessage writes message_start for message id of model with the
// given usage (input tokens known so far) and returns the message's framer.
func startMessage(w EventWriter, id, model string, usage any) (*Message, error) {
	m := &Message{w: w, index: -1}
	err := w.Event("message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": id, "type": "message", "role": "assistant", "model": model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil, "usage": usage,
	}})
	return m, err
}

// Index is the open (or last) block's index, -1 before the first.
func (m *Message) Index() int { return m.index }

// Open is the open block's type ("thinking", "text", "tool_use"), "" when
// none is open.
func (m *Message) Open() string { return m.open }

func (m *Message) start(kind string, block map[string]any) error {
	if err := m.Stop(); err != nil {
		return err
	}
	m.index++
	m.open = kind
	return m.w.Event("content_block_start", map[string]any{"type": "content_block_start", "index": m.index, "content_block": block})
}

// Stop stops the open block, if any.
func (m *Message) Stop() error {
	if m.open == "" {
		return nil
	}
	m.open = ""
	return m.w.Event("content_block_stop", map[string]any{"type": "content_block_stop", "index": m.index})
}

func (m *Message) delta(d map[string]any) error {
	return m.w.Event("content_block_delta", map[string]any{"type": "content_block_delta", "index": m.index, "delta": d})
}

// Thinking streams reasoning into a thinking block, starting one unless
// one is open.
func (m *Message) Thinking(s string) error {
	if m.open != "thinking" {
		if err := m.start("thinking", map[string]any{"type": "thinking", "thinking": "", "signature": ""}); err != nil {
			return err
		}
	}
	return m.delta(map[string]any{"type": "thinking_delta", "thinking": s})
}

// Text streams visible text into a text block, starting one unless one is
// open.
func (m *Message) Text(s string) error {
	if m.open != "text" {
		if err := m.start("text", map[string]any{"type": "text", "text": ""}); err != nil {
			return err
		}
	}
	return m.delta(map[string]any{"type": "text_delta", "text": s})
}

// StartToolUse starts the tool_use block of a call; its input streams
// through InputJSON.
func (m *Message) StartToolUse(id, name string) error {
	return m.start("tool_use", map[string]any{"type": "tool_use", "id": id, "name": name, "input": map[string]any{}})
}

// InputJSON streams a piece of the open tool_use block's input.
func (m *Message) InputJSON(partial string) error {
	return m.delta(map[string]any{"type": "input_json_delta", "partial_json": partial})
}

// Ping writes a keep-alive ping.
func (m *Message) Ping() error { return m.w.Event("ping", map[string]string{"type": "ping"}) }

// Error ends the stream with an error event whose data is body (the
// Anthropic error object).
func (m *Message) Error(body any) error { return m.w.Event("error", body) }

// Finish stops the open block and writes message_delta with the stop
// reason, the stop sequence (nil unless a stop sequence matched) and the
// usage. An empty reply still gets one (empty) text block.
func (m *Message) Finish(stopReason string, stopSequence, usage any) error {
	if m.index < 0 {
		if err := m.start("text", map[string]any{"type": "text", "text": ""}); err != nil {
			return err
		}
	}
	if err := m.Stop(); err != nil {
		return err
	}
	return m.w.Event("message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": stopReason, "stop_sequence": stopSequence}, "usage": usage})
}

// End writes message_stop, the stream's last event.
func (m *Message) End() error {
	return m.w.Event("message_stop", map[string]string{"type": "message_stop"})
}
