package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// sseWriteTimeout bounds one write to a streaming client.
const sseWriteTimeout = time.Minute

// sseWriter writes a server-sent event stream. It is used by one goroutine.
type sseWriter struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

// startSSE commits a 200 event-stream response and flushes a first
// comment, so that clients see headers before the prompt is prefilled.
func startSSE(w http.ResponseWriter) (*sseWriter, error) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	s := &sseWriter{w: w, rc: http.NewResponseController(w)}
	return s, s.comment("spool")
}

// comment writes an SSE comment (clients ignore it; it keeps the
// connection alive).
func (s *sseWriter) comment(text string) error {
	return s.write([]byte(": " + text + "\n\n"))
}

// data writes a "data:" event with v as JSON.
func (s *sseWriter) data(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("server: encoding an event: %w", err)
	}
	return s.write(append(append([]byte("data: "), b...), '\n', '\n'))
}

// event writes a named event with v as JSON (the Anthropic and Responses
// stream form).
func (s *sseWriter) event(name string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("server: encoding a %s event: %w", name, err)
	}
	out := make([]byte, 0, len(b)+len(name)+16)
	out = append(out, "event: "...)
	out = append(out, name...)
	out = append(out, "\ndata: "...)
	out = append(out, b...)
	out = append(out, '\n', '\n')
	return s.write(out)
}

// Event is event, for the framers outside the package
// (anthropicsse.EventWriter).
func (s *sseWriter) Event(name string, v any) error { return s.event(name, v) }

// done writes the OpenAI end marker.
func (s *sseWriter) done() error { return s.write([]byte("data: [DONE]\n\n")) }

func (s *sseWriter) write(b []byte) error {
	s.rc.SetWriteDeadline(time.Now().Add(sseWriteTimeout))
	if _, err := s.w.Write(b); err != nil {
		return err
	}
	return s.rc.Flush()
}
