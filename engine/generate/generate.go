// Package generate owns the decode loop: prefill of the prompt, sampling,
// stop tokens, token limits and context limits, and the timing of each
// phase. It drives a model.Model over one kvcache.Sequence; it does not
// render prompts or detokenize.
package generate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/spoolhq/spool/engine/kvcache"
	"github.com/spoolhq/spool/engine/model"
)

// Finish reasons.
const (
	FinishStop   = "stop"   // a stop token was sampled
	FinishLength = "length" // MaxTokens reached, or the context is full
)

// PrefillChunk bounds how many prompt tokens one forward takes.
const PrefillChunk = 512

// Params controls one generation.
type Params struct {
	// MaxTokens is the most tokens to generate (must be positive).
	MaxTokens int
	Sampling
	// StopTokens end generation when sampled; the stop token is reported in
	// Result.StopToken and not counted as output. Nil means never stop early.
	StopTokens []int
}

// Result describes a finished generation.
type Result struct {
	Tokens       []int
	StopToken    int // -1 unless FinishReason is FinishStop
	FinishReason string
	PromptTokens int
	// CachedTokens is how many prompt tokens were already in the sequence.
	CachedTokens int
	PrefillTime  time.Duration
	DecodeTime   time.Duration
	// DecodeTokens counts tokens produced by decode forwards (all but the
	// first, which comes from the prefill).
	DecodeTokens int
}

// DecodeTokensPerSecond is the decode throughput.
func (r *Result) DecodeTokensPerSecond() float64 {
	if r.DecodeTime <= 0 {
		return 0
	}
	return float64(r.DecodeTokens) / r.DecodeTime.Seconds()
}

// Generate continues seq with prompt and samples up to p.MaxTokens tokens,
// calling onToken (may be nil) for each one; an error from onToken stops
// generation and is returned. Tokens of prompt already cached in seq (a
// common prefix) are reused; the rest of seq is trimmed.
func Generate(ctx context.Context, m *model.Model, seq *kvcache.Sequence, prompt []int, p Params, onToken func(id int) error) (*Result, error) {
	if len(prompt) == 0 {
		return nil, errors.New("generate: empty prompt")
	}
	if p.MaxTokens <= 0 {
		return nil, fmt.Errorf("generate: max tokens %d must be positive", p.MaxTokens)
	}
	if err := p.Sampling.Validate(); err != nil {
		return nil, fmt.Errorf("generate: %w", err)
	}
	if len(prompt) > seq.Limit() {
		return nil, &kvcache.ContextError{Have: 0, Add: len(prompt), Limit: seq.Limit()}
	}
	res := &Result{StopToken: -1, PromptTokens: len(prompt)}

	// Reuse the longest cached prefix, but always forward at least one
	// token so there are logits to sample from.
	common := 0
	for common < seq.Len() && common < len(prompt)-1 && seq.Tokens()[common] == prompt[common] {
		common++
	}
	seq.Trim(common)
	res.CachedTokens = common

	start := time.Now()
	var logits []float32
	for i := common; i < len(prompt); i += PrefillChunk {
		chunk := prompt[i:min(i+PrefillChunk, len(prompt))]
		out, err := m.Forward(ctx, []model.Request{{Seq: seq, Tokens: chunk}}, nil)
		if err != nil {
			return nil, fmt.Errorf("generate: prefill: %w", err)
		}
		logits = out[0].Logits[0]
	}
	res.PrefillTime = time.Since(start)

	sampler := NewSampler(p.Sampling)
	decodeStart := time.Now()
	for {
		tok := sampler.Sample(logits)
		if slices.Contains(p.StopTokens, tok) {
			res.StopToken = tok
			res.FinishReason = FinishStop
			break
		}
		res.Tokens = append(res.Tokens, tok)
		if onToken != nil {
			if err := onToken(tok); err != nil {
				return res, err
			}
		}
		if len(res.Tokens) >= p.MaxTokens || seq.Len() >= seq.Limit() {
			res.FinishReason = FinishLength
			break
		}
		out, err := m.Forward(ctx, []model.Request{{Seq: seq, Tokens: []int{tok}}}, nil)
		if err != nil {
			return res, fmt.Errorf("generate: decode: %w", err)
		}
		logits = out[0].Logits[0]
		res.DecodeTokens++
	}
	if res.DecodeTokens > 0 {
		res.DecodeTime = time.Since(decodeStart)
	}
	return res, nil
}
