package ollama

import (
	"bytes"
	"encoding/json"
	"time"

	"github.com/spoolhq/spool/engine/apiwire"
)

// MaxEmbedInputs bounds the inputs of one embedding request.
const MaxEmbedInputs = 2048

// EmbedRequest is the body of /api/embed ("input") and of the legacy
// /api/embeddings ("prompt").
type EmbedRequest struct {
	Model      string          `json:"model"`
	Name       string          `json:"name"`
	Input      json.RawMessage `json:"input"`
	Prompt     *string         `json:"prompt"`
	Truncate   *bool           `json:"truncate"`
	Dimensions *int            `json:"dimensions"`
	Options    json.RawMessage `json:"options"`
	KeepAlive  json.RawMessage `json:"keep_alive"`
}

// ModelName is the model the request names.
func (r *EmbedRequest) ModelName() string { return modelName(r.Model, r.Name) }

// Texts reads /api/embed's "input": a string or an array of strings. Like
// Ollama, a missing or empty input embeds nothing (a load request).
func (r *EmbedRequest) Texts() ([]string, error) {
	raw := bytes.TrimSpace(r.Input)
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
		return nil, apiwire.Invalid("input", "invalid input type: input must be a string or an array of strings")
	}
	if len(texts) > MaxEmbedInputs {
		return nil, apiwire.Invalid("input", "input has %d items, more than the %d one request may embed", len(texts), MaxEmbedInputs)
	}
	return texts, nil
}

// PromptTexts reads the legacy /api/embeddings' "prompt": one text (an
// empty prompt embeds nothing: its vector is empty, as in Ollama).
func (r *EmbedRequest) PromptTexts() []string {
	if r.Prompt != nil && *r.Prompt != "" {
		return []string{*r.Prompt}
	}
	return nil
}

// Limit checks the fields both endpoints share and returns the most tokens
// an input may have (context, or options.num_ctx when smaller) and whether
// a longer one is cut to it (truncate, default true).
func (r *EmbedRequest) Limit(context int) (tokens int, truncate bool, err error) {
	if err := checkKeepAlive(r.KeepAlive); err != nil {
		return 0, false, err
	}
	opts, err := ParseOptions(r.Options)
	if err != nil {
		return 0, false, err
	}
	tokens = context
	if n := opts.NumCtx; n != nil && *n > 0 && *n < tokens {
		tokens = *n
	}
	return tokens, r.Truncate == nil || *r.Truncate, nil
}

// InputTooLong refuses an input named name over a limit of limit tokens,
// in Ollama's words.
func InputTooLong(name string, limit int) *apiwire.Error {
	return apiwire.Invalid("", "the input length exceeds the context length: %s has more than %d tokens (truncate is false)", name, limit)
}

// EmbedResponse is /api/embed's answer.
type EmbedResponse struct {
	Model           string      `json:"model"`
	Embeddings      [][]float32 `json:"embeddings"`
	TotalDuration   int64       `json:"total_duration,omitempty"`
	LoadDuration    int64       `json:"load_duration,omitempty"`
	PromptEvalCount int         `json:"prompt_eval_count,omitempty"`
}

// EmbedReply is /api/embed's answer of vectors, of tokens inputs' tokens,
// whose prefills took prefill of the request's time since start.
func (r *EmbedRequest) EmbedReply(vectors [][]float32, tokens int, prefill time.Duration, start time.Time) EmbedResponse {
	total := max(time.Since(start).Nanoseconds(), 1)
	return EmbedResponse{Model: r.ModelName(), Embeddings: vectors, TotalDuration: total,
		LoadDuration: max(total-prefill.Nanoseconds(), 0), PromptEvalCount: tokens}
}

// EmbeddingsReply is the legacy /api/embeddings' answer: one vector (empty
// for an empty prompt).
func EmbeddingsReply(vectors [][]float32) any {
	vec := []float32{}
	if len(vectors) == 1 {
		vec = vectors[0]
	}
	return struct {
		Embedding []float32 `json:"embedding"`
	}{vec}
}
