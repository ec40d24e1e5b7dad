package apiwire

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// SSEWriteTimeout bounds one write to a streaming client.
const SSEWriteTimeout = time.Minute

// SSE writes a server-sent event stream. It is used by one goroutine.
type SSE struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

// StartSSE commits a 200 event-stream response and flushes its headers,
// so that clients see the answer begin before the prompt is prefilled.
// The body starts with the first event: OpenAI's streams do, and a client
// that dispatches an event on every blank line (openai-go v1.x) fails on
// anything else.
func StartSSE(w http.ResponseWriter) (*SSE, error) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	s := &SSE{w: w, rc: http.NewResponseController(w)}
	return s, s.rc.Flush()
}

// Comment writes an SSE comment line, a keep-alive while the stream waits
// (queue, prefill). No blank line follows it: a blank line after a
// comment dispatches nothing to a spec parser, but clients that dispatch
// every blank line read it as an empty event and end the stream. Alone,
// the line is ignored by every parser, and the next event's blank line
// ends it with that event. text must be one line.
func (s *SSE) Comment(text string) error {
	return s.Write([]byte(": " + text + "\n"))
}

// Data writes a "data:" event with v as JSON.
func (s *SSE) Data(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("apiwire: encoding an event: %w", err)
	}
	return s.Write(append(append([]byte("data: "), b...), '\n', '\n'))
}

// Event writes a named event with v as JSON (the Anthropic and Responses
// stream form; anthropic.EventWriter).
func (s *SSE) Event(name string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("apiwire: encoding a %s event: %w", name, err)
	}
	out := make([]byte, 0, len(b)+len(name)+16)
	out = append(out, "event: "...)
	out = append(out, name...)
	out = append(out, "\ndata: "...)
	out = append(out, b...)
	out = append(out, '\n', '\n')
	return s.Write(out)
}

// Done writes the OpenAI end marker.
func (s *SSE) Done() error { return s.Write([]byte("data: [DONE]\n\n")) }

// Write writes b, a whole event, and flushes it.
func (s *SSE) Write(b []byte) error {
	s.rc.SetWriteDeadline(time.Now().Add(SSEWriteTimeout))
	if _, err := s.w.Write(b); err != nil {
		return err
	}
	return s.rc.Flush()
}
