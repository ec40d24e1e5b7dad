package server

import (
	"context"
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

// noteDropped notes, in the log, a request's tools (or options) that
// were left out because the model cannot use them: what names the
// endpoint, and names are the client's (attribute values, quoted by the
// log's handler; never part of the message).
func (s *Server) noteDropped(ctx context.Context, what string, names []string) {
	s.log.LogAttrs(ctx, slog.LevelInfo, "left out what the model cannot use", slog.String("what", what), slog.Any("names", names))
}
