package server

import (
	"bytes"
	"encoding/json"
	"net/http"
	"time"

	"github.com/spoolhq/spool/engine/local"
)

// ollamaEmbedRequest is the body of /api/embed ("input") and of the legacy
// /api/embeddings ("prompt").
type ollamaEmbedRequest struct {
	Model      string          `json:"model"`
	Name       string          `json:"name"`
	Input      json.RawMessage `json:"input"`
	Prompt     *string         `json:"prompt"`
	Truncate   *bool           `json:"truncate"`
	Dimensions *int            `json:"dimensions"`
	Options    json.RawMessage `json:"options"`
	KeepAlive  json.RawMessage `json:"keep_alive"`
}

func (req *ollamaEmbedRequest) model() string { return ollamaModel(req.Model, req.Name) }

// ollamaEmbedResponse is /api/embed's answer.
type ollamaEmbedResponse struct {
	Model           string      `json:"model"`
	Embeddings      [][]float32 `json:"embeddings"`
	TotalDuration   int64       `json:"total_duration,omitempty"`
	LoadDuration    int64       `json:"load_duration,omitempty"`
	PromptEvalCount int         `json:"prompt_eval_count,omitempty"`
}

// ollamaEmbedTexts reads /api/embed's "input": a string or an array of
// strings. Like Ollama, a missing or empty input embeds nothing (a load
// request).
func ollamaEmbedTexts(raw json.RawMessage) ([]string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, nil
	}
	var text string
	if json.Unmarshal(raw, &text) == nil {
		if text == "" {
			return nil, nil
		}
		return []string{text}, nil
	}
	var texts []string
	if json.Unmarshal(raw, &texts) != nil {
		return nil, invalid("input", "invalid input type: input must be a string or an array of strings")
	}
	if err := embedMost(len(texts)); err != nil {
		return nil, err
	}
	return texts, nil
}

// ollamaEmbedPrepare validates the fields both endpoints share and
// tokenizes texts: truncate (default true) cuts an input to the context,
// or to options.num_ctx when smaller.
func (s *Server) ollamaEmbedPrepare(req *ollamaEmbedRequest, texts []string) ([][]int, int, error) {
	if err := s.ollamaModelName(req.model()); err != nil {
		return nil, 0, err
	}
	if err := ollamaKeepAlive(req.KeepAlive); err != nil {
		return nil, 0, err
	}
	opts, err := parseOllamaOptions(req.Options)
	if err != nil {
		return nil, 0, err
	}
	dims, err := s.local.EmbedDimensions(req.Dimensions)
	if err != nil {
		return nil, 0, err
	}
	lim := embedLimits{EmbedLimits: local.EmbedLimits{Param: "input", Tokens: s.local.Context(), Truncate: req.Truncate == nil || *req.Truncate}, ollama: true}
	if n := opts.numCtx; n != nil && *n > 0 && *n < lim.Tokens {
		lim.Tokens = *n
	}
	if len(texts) == 0 {
		return nil, dims, nil
	}
	inputs, err := s.embedTokens(texts, lim)
	return inputs, dims, err
}

func (s *Server) handleOllamaEmbed(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	var req ollamaEmbedRequest
	e, ok := embedRequest(s, w, r, &req, func(req *ollamaEmbedRequest) ([][]int, int, error) {
		texts, err := ollamaEmbedTexts(req.Input)
		if err != nil {
			return nil, 0, err
		}
		return s.ollamaEmbedPrepare(req, texts)
	})
	if !ok {
		return
	}
	total := max(time.Since(start).Nanoseconds(), 1)
	writeJSON(w, http.StatusOK, ollamaEmbedResponse{
		Model: req.model(), Embeddings: e.Vectors, TotalDuration: total,
		LoadDuration: max(total-e.Prefill.Nanoseconds(), 0), PromptEvalCount: e.Tokens,
	})
}

// handleOllamaEmbeddings answers the legacy /api/embeddings: one "prompt",
// one vector (an empty prompt gives an empty vector, as in Ollama).
func (s *Server) handleOllamaEmbeddings(w http.ResponseWriter, r *http.Request) {
	var req ollamaEmbedRequest
	e, ok := embedRequest(s, w, r, &req, func(req *ollamaEmbedRequest) ([][]int, int, error) {
		var texts []string
		if req.Prompt != nil && *req.Prompt != "" {
			texts = []string{*req.Prompt}
		}
		return s.ollamaEmbedPrepare(req, texts)
	})
	if !ok {
		return
	}
	vec := []float32{}
	if len(e.Vectors) == 1 {
		vec = e.Vectors[0]
	}
	writeJSON(w, http.StatusOK, struct {
		Embedding []float32 `json:"embedding"`
	}{vec})
}
