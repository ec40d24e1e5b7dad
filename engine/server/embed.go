package server

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"time"

	"github.com/spoolhq/spool/engine/apiwire"
	"github.com/spoolhq/spool/engine/generate"
	"github.com/spoolhq/spool/engine/httpguard"
	"github.com/spoolhq/spool/engine/scheduler"
)

// Embeddings (/v1/embeddings, Ollama's /api/embed and /api/embeddings).
// An input's vector is the served model's own: its plain-text tokens (no
// chat template) are prefilled through the scheduler like any prompt —
// queued with the chats, within the memory plan's sequences — and the
// final-normed hidden states (lm_head's input) are mean-pooled and
// L2-normalised (see generate.Params.Embed). The same input gives the
// same bits alone, in a batch of inputs or beside a decoding chat. Each
// input is a full prefill of the model: a batch's inputs run one after
// another, so a large batch holds one queue slot, never the whole queue.

// maxEmbedInputs bounds the inputs of one request (OpenAI's bound).
const maxEmbedInputs = 2048

// embedLimits is how an input is fitted to the context.
type embedLimits struct {
	// param names the input field in errors.
	param string
	// tokens is the most tokens an input may have.
	tokens int
	// truncate cuts a longer input to tokens; else it is refused.
	truncate bool
	// ollama words the refusal as Ollama does.
	ollama bool
}

// embedTokens tokenizes text inputs (no chat template) and fits them to
// the context.
func (s *Server) embedTokens(texts []string, lim embedLimits) ([][]int, error) {
	out := make([][]int, len(texts))
	for i, text := range texts {
		if text == "" {
			return nil, invalid(lim.param, "%s is empty: there is nothing to embed", embedInputName(lim.param, i, len(texts)))
		}
		ids, fits := s.eng.Tokenizer.EncodeLimit(text, lim.tokens)
		if !fits || len(ids) > lim.tokens {
			if !lim.truncate {
				return nil, s.embedTooLong(lim, i, len(texts), len(ids))
			}
			ids = ids[:lim.tokens]
		}
		if len(ids) == 0 {
			return nil, invalid(lim.param, "%s encodes to no tokens: there is nothing to embed", embedInputName(lim.param, i, len(texts)))
		}
		out[i] = ids
	}
	return out, nil
}

// embedTooLong refuses an input over the context.
func (s *Server) embedTooLong(lim embedLimits, i, n, tokens int) error {
	name := embedInputName(lim.param, i, n)
	if lim.ollama {
		return invalid("", "the input length exceeds the context length: %s has more than %d tokens (truncate is false)", name, lim.tokens)
	}
	e := contextLength(lim.tokens, "%s has more than %d tokens", name, max(tokens-1, lim.tokens))
	e.Param = lim.param
	return e
}

// embedInputName names input i of n in errors: "input", or "input[i]".
func embedInputName(param string, i, n int) string {
	if n == 1 {
		return param
	}
	return fmt.Sprintf("%s[%d]", param, i)
}

// embedDimensions reads "dimensions": nil or 0 keeps the model's hidden
// size, else 1..hidden (the vector is cut to it and renormalised, as
// Ollama and OpenAI's text-embedding-3 models do).
func (s *Server) embedDimensions(d *int) (int, error) {
	hidden := s.eng.Scheduler.Model().Config().HiddenSize
	if d == nil || *d == 0 {
		return hidden, nil
	}
	if *d < 1 || *d > hidden {
		return 0, invalid("dimensions", "dimensions %d is out of range: this model's embeddings have 1..%d dimensions", *d, hidden)
	}
	return *d, nil
}

// embedRequest decodes an embedding request into req, prepares its
// inputs and their dimensions with prepare and embeds them; ok is false
// when it has answered an error (or the client left).
func embedRequest[R any](s *Server, w http.ResponseWriter, r *http.Request, req *R, prepare func(*R) ([][]int, int, error)) (*embedded, bool) {
	if err := decodeBody(r, req); err != nil {
		writeError(w, r, err)
		return nil, false
	}
	inputs, dims, err := prepare(req)
	if err != nil {
		writeError(w, r, err)
		return nil, false
	}
	e, err := s.embed(r.Context(), inputs, dims)
	if err != nil {
		if r.Context().Err() == nil {
			writeError(w, r, err)
		}
		return nil, false
	}
	return e, true
}

// embedded is the answer to an embedding request.
type embedded struct {
	vectors [][]float32
	// tokens counts the inputs' tokens; prefill is the engine's time on
	// them (their prefills), the rest of the request's time is not.
	tokens  int
	prefill time.Duration
}

// embed computes the vectors of inputs, one after another through the
// scheduler, each cut to dims dimensions.
func (s *Server) embed(ctx context.Context, inputs [][]int, dims int) (*embedded, error) {
	httpguard.EndParsing(ctx)
	out := &embedded{vectors: make([][]float32, len(inputs))}
	for i, ids := range inputs {
		t := &turn{id: newID("embd-"), prompt: ids, req: scheduler.Request{Prompt: ids, Params: generate.Params{Embed: true}}}
		st, err := s.submit(ctx, t)
		if err != nil {
			return nil, err
		}
		res := waitResult(ctx, st)
		s.stop.done(st)
		if res == nil {
			s.endRequest(t.id, nil, scheduler.FinishCancelled)
			return nil, ctx.Err()
		}
		s.endRequest(t.id, res, res.FinishReason)
		if res.FinishReason == scheduler.FinishCancelled {
			return nil, s.cancelled(ctx)
		}
		if res.Err != nil {
			return nil, asAPIError(res.Err)
		}
		if len(res.Embedding) == 0 {
			return nil, internalError(apiwire.Public("embedding %d: the engine returned no vector (%s)", i, res.FinishReason))
		}
		out.vectors[i] = cutDimensions(res.Embedding, dims)
		out.tokens += len(ids)
		out.prefill += res.PrefillTime
	}
	recordOf(ctx).setTokens(s.cfg.ModelID, out.tokens, 0, "")
	return out, nil
}

// waitResult reads a stream that emits no tokens to its result; nil when
// ctx ended first (the stream is then cancelled).
func waitResult(ctx context.Context, st *scheduler.Stream) *scheduler.Result {
	for {
		_, res, err := st.Next(ctx)
		if err != nil {
			st.Cancel()
			return nil
		}
		if res != nil {
			return res
		}
	}
}

// cutDimensions keeps a unit vector's first dims values, renormalised.
func cutDimensions(v []float32, dims int) []float32 {
	if dims >= len(v) {
		return v
	}
	var sq float64
	for _, x := range v[:dims] {
		sq += float64(x) * float64(x)
	}
	out := make([]float32, dims)
	norm := math.Sqrt(sq)
	for i, x := range v[:dims] {
		if norm > 0 {
			out[i] = float32(float64(x) / norm)
		}
	}
	return out
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
	lim := embedLimits{param: "input", tokens: s.eng.Scheduler.Config().ContextLength}
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
	vocab := s.eng.Scheduler.Model().Config().VocabSize
	for i, ids := range batch {
		name := embedInputName("input", i, len(batch))
		if len(ids) == 0 {
			return nil, invalid("input", "%s is empty: there is nothing to embed", name)
		}
		if len(ids) > lim.tokens {
			return nil, s.embedTooLong(lim, i, len(batch), len(ids))
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
	dims, err := s.embedDimensions(req.Dimensions)
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
	resp := embeddingsResponse{Object: "list", Model: model, Data: make([]embeddingDatum, len(e.vectors)),
		Usage: embeddingsUsage{PromptTokens: e.tokens, TotalTokens: e.tokens}}
	for i, v := range e.vectors {
		resp.Data[i] = embeddingDatum{Object: "embedding", Index: i, Embedding: v}
		if req.EncodingFormat == "base64" {
			resp.Data[i].Embedding = base64Floats(v)
		}
	}
	writeJSON(w, http.StatusOK, resp)
}
