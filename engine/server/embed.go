package server

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"net/http"

	"github.com/spoolhq/spool/engine/httpguard"
	"github.com/spoolhq/spool/engine/local"
)

// Embeddings (/v1/embeddings, Ollama's /api/embed and /api/embeddings):
// the vectors are the local engine's (local.Engine.Embed); this file reads
// the requests and answers them.

// maxEmbedInputs bounds the inputs of one request (OpenAI's bound).
const maxEmbedInputs = 2048

// embedLimits is how an input is fitted to the context.
type embedLimits struct {
	local.EmbedLimits
	// ollama words the refusal as Ollama does.
	ollama bool
}

// embedTokens tokenizes text inputs (no chat template) and fits them to
// the context.
func (s *Server) embedTokens(texts []string, lim embedLimits) ([][]int, error) {
	ids, err := s.local.EmbedTokens(texts, lim.EmbedLimits)
	var tl *local.InputTooLong
	if errors.As(err, &tl) {
		return nil, embedTooLong(lim, tl.Name, tl.Tokens)
	}
	return ids, err
}

// embedTooLong refuses an input over the context.
func embedTooLong(lim embedLimits, name string, tokens int) error {
	if lim.ollama {
		return invalid("", "the input length exceeds the context length: %s has more than %d tokens (truncate is false)", name, lim.Tokens)
	}
	e := contextLength(lim.Tokens, "%s has more than %d tokens", name, max(tokens-1, lim.Tokens))
	e.Param = lim.Param
	return e
}

// embedRequest decodes an embedding request into req, prepares its
// inputs and their dimensions with prepare and embeds them; ok is false
// when it has answered an error (or the client left).
func embedRequest[R any](s *Server, w http.ResponseWriter, r *http.Request, req *R, prepare func(*R) ([][]int, int, error)) (*local.Embedded, bool) {
	if err := decodeBody(r, req); err != nil {
		writeError(w, r, err)
		return nil, false
	}
	inputs, dims, err := prepare(req)
	if err != nil {
		writeError(w, r, err)
		return nil, false
	}
	httpguard.EndParsing(r.Context())
	e, err := s.local.Embed(r.Context(), inputs, dims)
	if err != nil {
		if r.Context().Err() == nil {
			writeError(w, r, err)
		}
		return nil, false
	}
	return e, true
}

// embeddingsRequest is an OpenAI /v1/embeddings request.
type embeddingsRequest struct {
	Model          string          `json:"model"`
	Input          json.RawMessage `json:"input"`
	EncodingFormat string          `json:"encoding_format"`
	Dimensions     *int            `json:"dimensions"`
	User           string          `json:"user"`
}

// openAIEmbedInputs reads OpenAI's "input": a string, an array of strings,
// an array of token ids, or an array of arrays of token ids. OpenAI does
// not truncate: an input over the context is refused.
func (s *Server) openAIEmbedInputs(raw json.RawMessage) ([][]int, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, invalid("input", "input is required: a string, an array of strings, or an array of token ids")
	}
	lim := embedLimits{EmbedLimits: local.EmbedLimits{Param: "input", Tokens: s.local.Context()}}
	var text string
	if json.Unmarshal(raw, &text) == nil {
		return s.embedTokens([]string{text}, lim)
	}
	var texts []string
	if json.Unmarshal(raw, &texts) == nil {
		if err := embedCount(len(texts)); err != nil {
			return nil, err
		}
		return s.embedTokens(texts, lim)
	}
	var batch [][]int
	var ids []int
	switch {
	case json.Unmarshal(raw, &ids) == nil:
		batch = [][]int{ids}
	case json.Unmarshal(raw, &batch) == nil:
		if err := embedCount(len(batch)); err != nil {
			return nil, err
		}
	default:
		return nil, invalid("input", "input must be a string, an array of strings, an array of token ids, or an array of arrays of token ids")
	}
	vocab := s.local.ModelConfig().VocabSize
	for i, ids := range batch {
		name := local.InputName("input", i, len(batch))
		if len(ids) == 0 {
			return nil, invalid("input", "%s is empty: there is nothing to embed", name)
		}
		if len(ids) > lim.Tokens {
			return nil, embedTooLong(lim, name, len(ids))
		}
		for _, id := range ids {
			if id < 0 || id >= vocab {
				return nil, invalid("input", "%s: token id %d is outside the vocabulary (0..%d)", name, id, vocab-1)
			}
		}
	}
	return batch, nil
}

// embedCount checks the number of inputs of a batch.
func embedCount(n int) error {
	if n == 0 {
		return invalid("input", "input is an empty array: there is nothing to embed")
	}
	return embedMost(n)
}

// embedMost refuses more inputs than one request may embed.
func embedMost(n int) error {
	if n > maxEmbedInputs {
		return invalid("input", "input has %d items, more than the %d one request may embed", n, maxEmbedInputs)
	}
	return nil
}

type embeddingsResponse struct {
	Object string           `json:"object"`
	Data   []embeddingDatum `json:"data"`
	Model  string           `json:"model"`
	Usage  embeddingsUsage  `json:"usage"`
}

type embeddingDatum struct {
	Object    string `json:"object"`
	Index     int    `json:"index"`
	Embedding any    `json:"embedding"` // []float32, or a base64 string
}

type embeddingsUsage struct {
	PromptTokens int `json:"prompt_tokens"`
	TotalTokens  int `json:"total_tokens"`
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

// embeddingsInputs validates an /v1/embeddings request and tokenizes its
// inputs; it returns them and the vectors' dimensions.
func (s *Server) embeddingsInputs(req *embeddingsRequest) ([][]int, int, error) {
	if err := s.checkModel(req.Model, false); err != nil {
		return nil, 0, err
	}
	if req.EncodingFormat != "" && req.EncodingFormat != "float" && req.EncodingFormat != "base64" {
		return nil, 0, invalid("encoding_format", `encoding_format must be "float" or "base64", got %q`, req.EncodingFormat)
	}
	dims, err := s.local.EmbedDimensions(req.Dimensions)
	if err != nil {
		return nil, 0, err
	}
	inputs, err := s.openAIEmbedInputs(req.Input)
	return inputs, dims, err
}

func (s *Server) handleEmbeddings(w http.ResponseWriter, r *http.Request) {
	var req embeddingsRequest
	e, ok := embedRequest(s, w, r, &req, s.embeddingsInputs)
	if !ok {
		return
	}
	model := req.Model
	if model == "" {
		model = s.cfg.ModelID
	}
	resp := embeddingsResponse{Object: "list", Model: model, Data: make([]embeddingDatum, len(e.Vectors)),
		Usage: embeddingsUsage{PromptTokens: e.Tokens, TotalTokens: e.Tokens}}
	for i, v := range e.Vectors {
		resp.Data[i] = embeddingDatum{Object: "embedding", Index: i, Embedding: v}
		if req.EncodingFormat == "base64" {
			resp.Data[i].Embedding = base64Floats(v)
		}
	}
	writeJSON(w, http.StatusOK, resp)
}
