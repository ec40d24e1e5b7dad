// Package scheduler owns admission and continuous batching for one loaded
// model: a bounded FIFO queue of generation requests, a fixed number of
// active sequences, and one loop that forwards the rows of every active
// request together (one decode row per request plus at most one prefill
// chunk per step, so the model takes one expert union across rows). Each
// request keeps its own sampler, penalties, logit bias, stop tokens and
// constraint (constrained decoding), and requests join and leave between
// steps. A request alone in the batch takes the single-row path of
// engine/generate, with MTP speculation when allowed, so its tokens are
// exactly those generate.Generate gives.
//
// It does not tokenize, detokenize, match stop strings or speak HTTP: the
// caller reads tokens from a Stream and cancels it when its text says stop.
package scheduler

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/spoolhq/spool/engine/generate"
)

// Errors returned by Submit.
var (
	// ErrQueueFull means every sequence is busy and the admission queue
	// is at its bound; retry later.
	ErrQueueFull = errors.New("scheduler: the admission queue is full")
	// ErrClosed means the scheduler has stopped.
	ErrClosed = errors.New("scheduler: stopped")
)

// Finish reasons reported in Result.FinishReason.
const (
	FinishStop      = generate.FinishStop   // a stop token was sampled, or the constraint completed
	FinishLength    = generate.FinishLength // MaxTokens reached, or the context is full
	FinishCancelled = "cancelled"           // the stream was cancelled or its context ended
	FinishError     = "error"               // the forward failed; see Result.Err
)

// Lanes reported in Result.Lane.
const (
	// LaneSingle: every forward of the request carried only its own rows.
	LaneSingle = "single"
	// LaneBatched: at least one forward was shared with other requests.
	LaneBatched = "batched"
)

// Constraint restricts which tokens a request may generate (constrained
// decoding, for example a JSON schema). Before each sample the scheduler
// calls Mask; every sampled token that is not a stop token goes to Accept.
// Stop tokens are allowed exactly when Done reports true; when Done and no
// other token is allowed, the request finishes with FinishStop.
type Constraint interface {
	// Mask sets bit t (allowed[t/64] & 1<<(t%64)) of every token t that
	// may come next. allowed is zeroed and covers the model's vocabulary.
	Mask(allowed []uint64)
	// Accept advances the constraint past token.
	Accept(token int) error
	// Done reports whether the constrained text is complete.
	Done() bool
}

// Request is one generation.
type Request struct {
	// Prompt is the token ids to continue (not empty).
	Prompt []int
	// MaxTokens is the most tokens to generate (positive).
	MaxTokens int
	generate.Sampling
	// StopTokens end generation when sampled (not reported as output).
	StopTokens []int
	// Speculative lets the request draft with the model's MTP layer while
	// it is alone in the batch. Tokens are the same either way.
	Speculative bool

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
	// OnPrefill, when set, is called on the scheduler's goroutine as the
	// prompt is read: once at admission and after every prompt chunk. It
	// must return quickly and must not call into the scheduler.
	OnPrefill func(Progress)
}

// Progress is how far a request's prompt has been read.
type Progress struct {
	// PromptTokens is the prompt's length; CachedTokens the prefix reused
	// from an earlier request's cache.
	PromptTokens, CachedTokens int
	// Done counts prompt tokens whose state is in the cache, cached ones
	// included (PromptTokens when the prompt is read).
	Done int
}

// processed reports whether the request changes logits before sampling.
func (r *Request) processed() bool {
	return r.PresencePenalty != 0 || r.FrequencyPenalty != 0 || len(r.LogitBias) > 0 || r.Logprobs || r.Constraint != nil
}

// validate checks the request against the vocabulary and context length.
func (r *Request) validate(vocab, contextLen int) error {
	if len(r.Prompt) == 0 {
		return errors.New("scheduler: empty prompt")
	}
	if r.MaxTokens <= 0 {
		return fmt.Errorf("scheduler: max tokens %d must be positive", r.MaxTokens)
	}
	if err := r.Sampling.Validate(); err != nil {
		return fmt.Errorf("scheduler: %w", err)
	}
	for _, t := range r.Prompt {
		if t < 0 || t >= vocab {
			return fmt.Errorf("scheduler: prompt token id %d is outside the vocabulary (%d)", t, vocab)
		}
	}
	for _, p := range []struct {
		name string
		v    float64
	}{{"presence_penalty", r.PresencePenalty}, {"frequency_penalty", r.FrequencyPenalty}} {
		if p.v < -2 || p.v > 2 || math.IsNaN(p.v) {
			return fmt.Errorf("scheduler: %s %g is out of range (-2..2)", p.name, p.v)
		}
	}
	for t, b := range r.LogitBias {
		if t < 0 || t >= vocab {
			return fmt.Errorf("scheduler: logit_bias token id %d is outside the vocabulary (%d)", t, vocab)
		}
		if b < -100 || b > 100 || math.IsNaN(b) {
			return fmt.Errorf("scheduler: logit_bias %g for token %d is out of range (-100..100)", b, t)
		}
	}
	if r.TopLogprobs < 0 || r.TopLogprobs > 20 {
		return fmt.Errorf("scheduler: top_logprobs %d is out of range (0..20)", r.TopLogprobs)
	}
	return nil
}

// Token is one generated token.
type Token struct {
	ID int
	// Logprob and Top are set when the request asked for logprobs.
	Logprob float64
	Top     []TokenLogprob
}

// TokenLogprob is one alternative with its log probability.
type TokenLogprob struct {
	ID      int
	Logprob float64
}

// Result describes a finished request.
type Result struct {
	FinishReason string
	// StopToken is the stop token sampled, or -1.
	StopToken int
	// Err is set with FinishError (and FinishCancelled: the context error).
	Err error

	PromptTokens int
	// CachedTokens counts prompt tokens reused from an earlier request's
	// cache (prefix reuse).
	CachedTokens     int
	CompletionTokens int

	// Lane is LaneSingle or LaneBatched; PeakBatch is the most requests
	// that shared one of its forwards.
	Lane      string
	PeakBatch int

	QueueWait   time.Duration // submit to admission
	PrefillTime time.Duration // admission to the first token
	DecodeTime  time.Duration // first token to the end

	// DraftsProposed and DraftsAccepted count MTP speculation.
	DraftsProposed int
	DraftsAccepted int
}
