package local

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/spoolhq/spool/engine/apiwire"
	"github.com/spoolhq/spool/engine/generate"
	"github.com/spoolhq/spool/engine/scheduler"
)

// Embeddings (OpenAI's /v1/embeddings, Ollama's /api/embed and
// /api/embeddings). An input's vector is the served model's own: its
// plain-text tokens (no chat template) are prefilled through the
// scheduler like any prompt — queued with the chats, within the memory
// plan's sequences — and the final-normed hidden states (lm_head's input)
// are mean-pooled and L2-normalised (see generate.Params.Embed). The same
// input gives the same bits alone, in a batch of inputs or beside a
// decoding chat. Each input is a full prefill of the model: a batch's
// inputs run one after another, so a large batch holds one queue slot,
// never the whole queue.

// EmbedLimits is how an input is fitted to the context.
type EmbedLimits struct {
	// Param names the input field in refusals.
	Param string
	// Tokens is the most tokens an input may have (0: the context).
	Tokens int
	// Truncate cuts a longer input to Tokens; else it is refused with an
	// *InputTooLong.
	Truncate bool
}

// InputTooLong refuses an embedding input over its limit; each API words
// it its way.
type InputTooLong struct {
	// Name is the input ("input", or "input[i]" of several); Tokens its
	// tokens counted (it has more than Limit).
	Name          string
	Tokens, Limit int
}

func (e *InputTooLong) Error() string {
	return fmt.Sprintf("%s has more than %d tokens", e.Name, e.Limit)
}

// EmbedTokens tokenizes text inputs (no chat template) and fits them to
// lim.
func (e *Engine) EmbedTokens(texts []string, lim EmbedLimits) ([][]int, error) {
	if lim.Tokens <= 0 {
		lim.Tokens = e.Context()
	}
	out := make([][]int, len(texts))
	for i, text := range texts {
		if text == "" {
			return nil, apiwire.Invalid(lim.Param, "%s is empty: there is nothing to embed", InputName(lim.Param, i, len(texts)))
		}
		ids, fits := e.tok.EncodeLimit(text, lim.Tokens)
		if !fits || len(ids) > lim.Tokens {
			if !lim.Truncate {
				return nil, &InputTooLong{Name: InputName(lim.Param, i, len(texts)), Tokens: len(ids), Limit: lim.Tokens}
			}
			ids = ids[:lim.Tokens]
		}
		if len(ids) == 0 {
			return nil, apiwire.Invalid(lim.Param, "%s encodes to no tokens: there is nothing to embed", InputName(lim.Param, i, len(texts)))
		}
		out[i] = ids
	}
	return out, nil
}

// InputName names input i of n in refusals: param, or param[i].
func InputName(param string, i, n int) string {
	if n == 1 {
		return param
	}
	return fmt.Sprintf("%s[%d]", param, i)
}

// EmbedDimensions resolves a requested vector size: nil or 0 keeps the
// model's hidden size, else 1..hidden (the vector is cut to it and
// renormalised, as Ollama and OpenAI's text-embedding-3 models do).
func (e *Engine) EmbedDimensions(d *int) (int, error) {
	hidden := e.ModelConfig().HiddenSize
	if d == nil || *d == 0 {
		return hidden, nil
	}
	if *d < 1 || *d > hidden {
		return 0, apiwire.Invalid("dimensions", "dimensions %d is out of range: this model's embeddings have 1..%d dimensions", *d, hidden)
	}
	return *d, nil
}

// Embedded is the answer to an embedding request.
type Embedded struct {
	Vectors [][]float32
	// Tokens counts the inputs' tokens; Prefill is the engine's time on
	// them (their prefills), the rest of the request's time is not.
	Tokens  int
	Prefill time.Duration
}

// Embed computes the vectors of inputs, one after another through the
// scheduler, each cut to dims dimensions. When ctx ends first, its cause
// is the error.
func (e *Engine) Embed(ctx context.Context, inputs [][]int, dims int) (*Embedded, error) {
	out := &Embedded{Vectors: make([][]float32, len(inputs))}
	for i, ids := range inputs {
		id := apiwire.NewID("embd-")
		st, err := e.submit(ctx, id, scheduler.Request{Prompt: ids, Params: generate.Params{Embed: true}})
		if err != nil {
			return nil, err
		}
		res := waitResult(ctx, st)
		if res == nil {
			// ctx's cause: the client left, or the caller's reason (a
			// server that stops ends its requests with an answer).
			e.observe.End(id, nil, scheduler.FinishCancelled)
			return nil, context.Cause(ctx)
		}
		e.observe.End(id, res, res.FinishReason)
		if res.FinishReason == scheduler.FinishCancelled {
			return nil, apiwire.ShuttingDown() // the engine stopped
		}
		if res.Err != nil {
			return nil, schedulerError(res.Err)
		}
		if len(res.Embedding) == 0 {
			return nil, apiwire.Internal(apiwire.Public("embedding %d: the engine returned no vector (%s)", i, res.FinishReason))
		}
		out.Vectors[i] = cutDimensions(res.Embedding, dims)
		out.Tokens += len(ids)
		out.Prefill += res.PrefillTime
	}
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
