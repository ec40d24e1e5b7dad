package generate

import (
	"errors"
	"fmt"
	"math"

	"github.com/spoolhq/spool/engine/draftgate"
	"github.com/spoolhq/spool/engine/promptcache"
)

// Finish reasons.
const (
	FinishStop   = "stop"   // a stop token was sampled, or the constraint completed
	FinishLength = "length" // MaxTokens reached, or the context is full
)

// DefaultPrefillChunk is the prompt tokens one forward takes when Params
// leave it unset; a memory plan sizes it instead (plan.Plan.PrefillChunk).
const DefaultPrefillChunk = 512

// Params controls one generation.
type Params struct {
	// MaxTokens is the most tokens to generate (must be positive).
	MaxTokens int
	Sampling
	// StopTokens end generation when sampled; the stop token is reported in
	// Result.StopToken and not counted as output. Nil means never stop early.
	StopTokens []int
	// Speculative drafts tokens with the model's MTP layer (when it has one)
	// and verifies them in the same forward, in the decode steps the
	// sequence is forwarded alone (a batched step never drafts), those
	// Gate lets draft. The tokens are exactly those of the plain path:
	// each position is sampled from the main model's logits with the same
	// random stream, and a draft only saves the forward that would have
	// produced the same token.
	Speculative bool
	// Gate, when set, decides which of those steps draft: it measures what
	// an emitted token costs each way and drafts only while drafting is
	// cheaper (see engine/draftgate). A driver keeps one per sequence, so
	// that what it measured carries over the sequence's turns. Nil drafts
	// in every lone step.
	Gate *draftgate.Gate

	// PresencePenalty and FrequencyPenalty (-2..2) lower the logits of
	// tokens already generated: by PresencePenalty once and by
	// FrequencyPenalty per occurrence, as OpenAI defines them.
	PresencePenalty, FrequencyPenalty float64
	// LogitBias is added to the logits of the given token ids (-100..100).
	LogitBias map[int]float64
	// Logprobs reports each token's log probability and the TopLogprobs
	// (0..20) most likely alternatives, taken from the log-softmax of the
	// logits after logit bias and penalties, before temperature and the
	// constraint's mask.
	Logprobs    bool
	TopLogprobs int
	// Constraint, when set, masks the logits before every sample.
	Constraint Constraint

	// PrefillChunk bounds the prompt tokens one forward takes (default
	// DefaultPrefillChunk). Every routed expert a chunk routes to is read
	// once for the whole chunk, so larger chunks read the model fewer
	// times; the memory plan sizes it.
	PrefillChunk int
	// OnPrefill, when set, is called with the prompt tokens whose state is
	// in the cache (reused and restored ones included) and the prompt
	// length: once when the generation starts (after Restore), then after
	// every decoder layer of every prompt chunk. It runs on the generating
	// goroutine and must not block.
	OnPrefill func(done, total int)

	// PromptCache, when set, is the prompt cache the generation restores
	// the longest cached prefix of its prompt from (Decoder.Restore) and
	// stores its sequence's blocks into, after every prompt chunk and at
	// the end. Restored state gives exactly the tokens computed state
	// gives.
	PromptCache *promptcache.Cache

	// Embed makes the generation an embedding: the whole prompt is
	// forwarded from an empty sequence (no reused prefix, no prompt cache,
	// no MTP layer), nothing is sampled or generated (MaxTokens and the
	// sampling parameters are ignored), and Result.Embedding is the mean of
	// the prompt tokens' final-normed hidden states (lm_head's input),
	// L2-normalised. It depends only on the prompt and the model: not on
	// the requests sharing its forwards.
	Embed bool
}

// processed reports whether the logits change before sampling.
func (p *Params) processed() bool {
	return p.PresencePenalty != 0 || p.FrequencyPenalty != 0 || len(p.LogitBias) > 0 || p.Logprobs || p.Constraint != nil
}

// Validate checks a prompt and the parameters against a vocabulary of
// vocab ids; the messages name the offending parameter.
func (p *Params) Validate(prompt []int, vocab int) error {
	if len(prompt) == 0 {
		return errors.New("empty prompt")
	}
	for _, t := range prompt {
		if t < 0 || t >= vocab {
			return fmt.Errorf("prompt token id %d is outside the vocabulary (%d)", t, vocab)
		}
	}
	if p.MaxTokens <= 0 && !p.Embed {
		return fmt.Errorf("max tokens %d must be positive", p.MaxTokens)
	}
	if err := p.ValidateSampling(vocab); err != nil {
		return err
	}
	if p.TopLogprobs < 0 || p.TopLogprobs > 20 {
		return fmt.Errorf("top_logprobs %d is out of range (0..20)", p.TopLogprobs)
	}
	if p.PrefillChunk < 0 {
		return fmt.Errorf("prefill chunk %d must not be negative", p.PrefillChunk)
	}
	return nil
}

// ValidateSampling checks what shapes the draw (the sampler's parameters,
// the penalties and the logit bias) against their ranges, the one set the
// CLI and every API use; errors are *ParamError naming the parameter.
func (p *Params) ValidateSampling(vocab int) error {
	if err := p.Sampling.Validate(); err != nil {
		return err
	}
	for _, pen := range []struct {
		name string
		v    float64
	}{{"presence_penalty", p.PresencePenalty}, {"frequency_penalty", p.FrequencyPenalty}} {
		if pen.v < -2 || pen.v > 2 || math.IsNaN(pen.v) {
			return &ParamError{Param: pen.name, Msg: fmt.Sprintf("%s %g is out of range (-2..2)", pen.name, pen.v)}
		}
	}
	for t, b := range p.LogitBias {
		if t < 0 || t >= vocab {
			return &ParamError{Param: "logit_bias", Msg: fmt.Sprintf("logit_bias key %d is not a token id of this model (0..%d)", t, vocab-1)}
		}
		if b < -100 || b > 100 || math.IsNaN(b) {
			return &ParamError{Param: "logit_bias", Msg: fmt.Sprintf("logit_bias %g for token %d is out of range (-100..100)", b, t)}
		}
	}
	return nil
}
