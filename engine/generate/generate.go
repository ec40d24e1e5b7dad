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
	// Speculative drafts tokens with the model's MTP layer (when it has one)
	// and verifies them in the same forward. The tokens are exactly those of
	// the plain path: each position is sampled from the main model's logits
	// with the same random stream, and a draft only saves the forward that
	// would have produced the same token.
	Speculative bool
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
	// DecodeTokens counts tokens forwarded after the prefill.
	DecodeTokens int
	// DraftsProposed and DraftsAccepted count MTP speculation.
	DraftsProposed int
	DraftsAccepted int
}

// DecodeTokensPerSecond is the decode throughput: tokens generated after
// the first (which comes from the prefill) per second of decoding.
func (r *Result) DecodeTokensPerSecond() float64 {
	if r.DecodeTime <= 0 || len(r.Tokens) < 2 {
		return 0
	}
	return float64(len(r.Tokens)-1) / r.DecodeTime.Seconds()
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

	g := &run{ctx: ctx, m: m, seq: seq, p: p, res: res, onToken: onToken, sampler: NewSampler(p.Sampling), keep: len(prompt)}
	start := time.Now()
	var logits []float32
	var hidden [][]float32
	for i := common; i < len(prompt); i += PrefillChunk {
		chunk := prompt[i:min(i+PrefillChunk, len(prompt))]
		out, err := m.Forward(ctx, []model.Request{{Seq: seq, Tokens: chunk}}, nil)
		if err != nil {
			return nil, fmt.Errorf("generate: prefill: %w", err)
		}
		logits = out[0].Logits[0]
		if p.Speculative && m.HasMTP() {
			hidden = append(hidden, out[0].Hidden...)
		}
	}
	res.PrefillTime = time.Since(start)

	decodeStart := time.Now()
	var err error
	if p.Speculative && m.HasMTP() {
		seq.TrimMTP(0)
		err = g.speculative(logits, common, hidden)
	} else {
		err = g.plain(logits)
	}
	if res.DecodeTokens > 0 {
		res.DecodeTime = time.Since(decodeStart)
	}
	// Leave the cache as the plain path does: every emitted token but the
	// last is cached (the last too when a stop token ended generation).
	seq.Trim(g.keep)
	return res, err
}

// run is the state of one generation.
type run struct {
	ctx     context.Context
	m       *model.Model
	seq     *kvcache.Sequence
	p       Params
	res     *Result
	onToken func(int) error
	sampler *Sampler
	keep    int // tokens the cache keeps when generation ends

	// Logits and hidden states of the last forward's rows.
	last       [][]float32
	lastHidden [][]float32
}

// emit records a sampled token; done reports that generation has ended.
func (g *run) emit(tok int) (done bool, err error) {
	if slices.Contains(g.p.StopTokens, tok) {
		g.res.StopToken = tok
		g.res.FinishReason = FinishStop
		return true, nil
	}
	g.res.Tokens = append(g.res.Tokens, tok)
	if len(g.res.Tokens) > 1 {
		g.keep++
	}
	if g.onToken != nil {
		if err := g.onToken(tok); err != nil {
			return true, err
		}
	}
	if len(g.res.Tokens) >= g.p.MaxTokens || g.keep >= g.seq.Limit() {
		g.res.FinishReason = FinishLength
		return true, nil
	}
	return false, nil
}

// plain samples one token per forward.
func (g *run) plain(logits []float32) error {
	for {
		tok := g.sampler.Sample(logits)
		if done, err := g.emit(tok); done {
			g.keepStop()
			return err
		}
		if err := g.step([]int{tok}); err != nil {
			return err
		}
		logits = g.last[0]
	}
}

// step forwards tokens at the end of the cache and keeps their logits and
// hidden states.
func (g *run) step(tokens []int) error {
	out, err := g.m.Forward(g.ctx, []model.Request{{Seq: g.seq, Tokens: tokens, AllLogits: true}}, nil)
	if err != nil {
		return fmt.Errorf("generate: decode: %w", err)
	}
	g.last, g.lastHidden = out[0].Logits, out[0].Hidden
	g.res.DecodeTokens += len(tokens)
	return nil
}
