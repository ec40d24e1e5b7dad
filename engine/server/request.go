package server

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"

	"github.com/spoolhq/spool/engine/apiwire"
)

// decodeBody decodes a JSON object request body into v, answering clear
// 400s (naming the field) and 413 for an oversized body.
func decodeBody(r *http.Request, v any) error {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return apiwire.BodyError(err)
	}
	return decodeJSON(body, v)
}

// decodeJSON decodes one JSON object (apiwire.DecodeJSON).
func decodeJSON(body []byte, v any) error { return apiwire.DecodeJSON(body, v) }

// newID returns prefix followed by 24 random hex digits.
func newID(prefix string) string { return apiwire.NewID(prefix) }

// logf notes how a request was adjusted to what the model can do.
func (s *Server) logf(format string, args ...any) {
	l := s.cfg.Logger
	if l == nil {
		l = slog.Default()
	}
	l.Info(fmt.Sprintf(format, args...))
}
