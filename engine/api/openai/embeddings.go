package openai

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"

	"github.com/spoolhq/spool/engine/apiwire"
)

// MaxEmbedInputs bounds the inputs of one embedding request (OpenAI's
// bound).
const MaxEmbedInputs = 2048

// EmbeddingsRequest is a /v1/embeddings request.
type EmbeddingsRequest struct {
	Model          string          `json:"model"`
	Input          json.RawMessage `json:"input"`
	EncodingFormat string          `json:"encoding_format"`
	Dimensions     *int            `json:"dimensions"`
	User           string          `json:"user"`
}

// Check checks the request's fields besides its input.
func (r *EmbeddingsRequest) Check() error {
	if r.EncodingFormat != "" && r.EncodingFormat != "float" && r.EncodingFormat != "base64" {
		return apiwire.Invalid("encoding_format", `encoding_format must be "float" or "base64", got %q`, r.EncodingFormat)
	}
	return nil
}

// Inputs reads "input": a string or an array of strings (texts), or an
// array of token ids or an array of arrays of them (ids, each checked
// against the vocabulary and the limit of tokens: OpenAI does not
// truncate).
func (r *EmbeddingsRequest) Inputs(vocab, limit int) (texts []string, ids [][]int, err error) {
	raw := bytes.TrimSpace(r.Input)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, nil, apiwire.Invalid("input", "input is required: a string, an array of strings, or an array of token ids")
	}
	var text string
	if json.Unmarshal(raw, &text) == nil {
		return []string{text}, nil, nil
	}
	if json.Unmarshal(raw, &texts) == nil {
		return texts, nil, EmbedCount(len(texts))
	}
	var batch [][]int
	var one []int
	switch {
	case json.Unmarshal(raw, &one) == nil:
		batch = [][]int{one}
	case json.Unmarshal(raw, &batch) == nil:
		if err := EmbedCount(len(batch)); err != nil {
			return nil, nil, err
		}
	default:
		return nil, nil, apiwire.Invalid("input", "input must be a string, an array of strings, an array of token ids, or an array of arrays of token ids")
	}
	for i, ids := range batch {
		name := InputName("input", i, len(batch))
		if len(ids) == 0 {
			return nil, nil, apiwire.Invalid("input", "%s is empty: there is nothing to embed", name)
		}
		if len(ids) > limit {
			return nil, nil, InputTooLong("input", name, len(ids), limit)
		}
		for _, id := range ids {
			if id < 0 || id >= vocab {
				return nil, nil, apiwire.Invalid("input", "%s: token id %d is outside the vocabulary (0..%d)", name, id, vocab-1)
			}
		}
	}
	return nil, batch, nil
}

// EmbedCount checks the number of inputs of a batch.
func EmbedCount(n int) error {
	if n == 0 {
		return apiwire.Invalid("input", "input is an empty array: there is nothing to embed")
	}
	return EmbedMost(n)
}

// EmbedMost refuses more inputs than one request may embed.
func EmbedMost(n int) error {
	if n > MaxEmbedInputs {
		return apiwire.Invalid("input", "input has %d items, more than the %d one request may embed", n, MaxEmbedInputs)
	}
	return nil
}

// InputName names input i of n in refusals: param, or param[i].
func InputName(param string, i, n int) string {
	if n == 1 {
		return param
	}
	return fmt.Sprintf("%s[%d]", param, i)
}

// InputTooLong refuses an input named name of tokens (or more) over a
// limit of limit tokens, in OpenAI's words.
func InputTooLong(param, name string, tokens, limit int) *apiwire.Error {
	e := apiwire.ContextLength(limit, "%s has more than %d tokens", name, max(tokens-1, limit))
	e.Param = param
	return e
}

// Embeddings is the answer to an embeddings request.
type Embeddings struct {
	Object string          `json:"object"`
	Data   []Embedding     `json:"data"`
	Model  string          `json:"model"`
	Usage  EmbeddingsUsage `json:"usage"`
}

// Embedding is one input's vector.
type Embedding struct {
	Object    string `json:"object"`
	Index     int    `json:"index"`
	Embedding any    `json:"embedding"` // []float32, or a base64 string
}

// EmbeddingsUsage counts the inputs' tokens.
type EmbeddingsUsage struct {
	PromptTokens int `json:"prompt_tokens"`
	TotalTokens  int `json:"total_tokens"`
}

// EmbeddingsReply is the answer of vectors of tokens inputs' tokens, in
// the encoding the request asked for.
func (r *EmbeddingsRequest) Reply(model string, vectors [][]float32, tokens int) Embeddings {
	if r.Model != "" {
		model = r.Model
	}
	out := Embeddings{Object: "list", Model: model, Data: make([]Embedding, len(vectors)),
		Usage: EmbeddingsUsage{PromptTokens: tokens, TotalTokens: tokens}}
	for i, v := range vectors {
		out.Data[i] = Embedding{Object: "embedding", Index: i, Embedding: v}
		if r.EncodingFormat == "base64" {
			out.Data[i].Embedding = base64Floats(v)
		}
	}
	return out
}

// base64Floats is OpenAI's base64 encoding of a vector: its float32
// values, little-endian.
func base64Floats(v []float32) string {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return base64.StdEncoding.EncodeToString(b)
}
