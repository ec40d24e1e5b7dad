package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"

	"github.com/spoolhq/spool/engine/apiwire"
	"github.com/spoolhq/spool/engine/turn"
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

// samplingParams are the sampling fields the endpoints share.
type samplingParams struct {
	Temperature      *float64           `json:"temperature"`
	TopP             *float64           `json:"top_p"`
	TopK             *int               `json:"top_k"`
	MinP             *float64           `json:"min_p"`
	Seed             *int64             `json:"seed"`
	PresencePenalty  *float64           `json:"presence_penalty"`
	FrequencyPenalty *float64           `json:"frequency_penalty"`
	LogitBias        map[string]float64 `json:"logit_bias"`
}

// sampling is the turn's sampling of p.
func (p samplingParams) sampling() turn.Sampling {
	return turn.Sampling{Temperature: p.Temperature, TopP: p.TopP, TopK: p.TopK, MinP: p.MinP, Seed: p.Seed,
		PresencePenalty: p.PresencePenalty, FrequencyPenalty: p.FrequencyPenalty, LogitBias: p.LogitBias}
}

// maxStops bounds the stop strings of one request.
const maxStops = 16

// parseStop reads "stop": a string or an array of strings.
func parseStop(param string, raw json.RawMessage) ([]string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, nil
	}
	var list []string
	if raw[0] == '"' {
		var one string
		if err := json.Unmarshal(raw, &one); err != nil {
			return nil, invalid(param, "%s: %v", param, err)
		}
		list = []string{one}
	} else if err := json.Unmarshal(raw, &list); err != nil {
		return nil, invalid(param, "%s must be a string or an array of strings", param)
	}
	return checkStops(param, list)
}

func checkStops(param string, list []string) ([]string, error) {
	if len(list) > maxStops {
		return nil, invalid(param, "%s has %d strings; at most %d are allowed", param, len(list), maxStops)
	}
	for _, s := range list {
		if s == "" {
			return nil, invalid(param, "%s must not contain an empty string", param)
		}
	}
	return list, nil
}

// maxTokens checks a requested output limit (nil: none): at least 1.
func maxTokens(param string, requested *int) (*int, error) {
	if requested != nil && *requested <= 0 {
		return nil, invalid(param, "%s must be at least 1, got %d", param, *requested)
	}
	return requested, nil
}

// newID returns prefix followed by 24 random hex digits.
func newID(prefix string) string { return apiwire.NewID(prefix) }

// validName reports whether a tool or schema name is 1..64 characters of
// [A-Za-z0-9_.-].
func validName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	return strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") == ""
}

// checkParam wraps a message with the parameter it is about.
func checkParam(param string, err error) error {
	if err == nil {
		return nil
	}
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	return invalid(param, "%s: %v", param, err)
}

// logf notes how a request was adjusted to what the model can do.
func (s *Server) logf(format string, args ...any) {
	l := s.cfg.Logger
	if l == nil {
		l = slog.Default()
	}
	l.Info(fmt.Sprintf(format, args...))
}
