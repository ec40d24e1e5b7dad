package scheduler

import (
	"errors"
	"fmt"
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

// The decode core's types, as requests and streams carry them.
type (
	// Constraint restricts which tokens a request may generate; see
	// generate.Constraint.
	Constraint = generate.Constraint
	// Token is one generated token.
	Token = generate.Token
	// TokenLogprob is one alternative with its log probability.
	TokenLogprob = generate.TokenLogprob
)

// Request is one generation: a prompt and the decode core's parameters.
// With Params.Embed it is an embedding instead: its prompt is prefilled
// like any other (queued, chunked and batched with the chats) and its
// Result carries the pooled vector (generate.Result.Embedding) and no
// tokens.
// Speculative lets the request draft with the model's MTP layer while it is
// alone in the batch; the tokens are the same either way. The scheduler
// sets Params.PrefillChunk from its Config and Params.OnPrefill from
// OnPrefill.
type Request struct {
	// Prompt is the token ids to continue (not empty).
	Prompt []int
	generate.Params
	// OnPrefill, when set, reports the prefill's progress: once at
	// admission, then after every decoder layer of every prompt chunk. It
	// is called on the scheduler's goroutine and must not block.
	OnPrefill func(Progress)
}

// Progress is where a request's prefill stands.
type Progress struct {
	// PromptTokens is the prompt's length; CachedTokens the prompt tokens
	// reused from an earlier request's cache; Done the prompt tokens whose
	// state is in the cache, the reused ones included.
	PromptTokens, CachedTokens, Done int
}

// validate checks the request against the vocabulary.
func (r *Request) validate(vocab int) error {
	if err := r.Params.Validate(r.Prompt, vocab); err != nil {
		return fmt.Errorf("scheduler: %w", err)
	}
	return nil
}

// Result describes a finished request: the decode core's result and how
// the scheduler ran it.
type Result struct {
	generate.Result
	// Err is set with FinishError (and FinishCancelled: the context error).
	Err error

	CompletionTokens int

	// Lane is LaneSingle or LaneBatched; PeakBatch is the most requests
	// that shared one of its forwards.
	Lane      string
	PeakBatch int

	QueueWait time.Duration // submit to admission
}
