package scheduler

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/spoolhq/spool/engine/generate"
	"github.com/spoolhq/spool/engine/kvcache"
	"github.com/spoolhq/spool/engine/model"
)

// maxPendingMTP bounds the hidden states a batched request keeps for its
// MTP layer to absorb once it is alone again; older ones are dropped (the
// drafts get a shorter memory, the tokens do not change).
const maxPendingMTP = 1024

// active is a request holding a sequence.
type active struct {
	*entry
	seq     *kvcache.Sequence
	sampler *generate.Sampler
	res     Result
	done    bool

	prefilled int // prompt tokens in seq
	// next is the sampled token not yet forwarded (-1 while prefilling).
	next    int
	emitted []int
	counts  map[int]int // occurrences of generated tokens (penalties)

	// MTP: hidden states of positions mtpFrom.. not yet absorbed.
	mtp     bool
	mtpFrom int
	pending [][]float32

	admittedAt, firstAt time.Time
}

// start assigns a sequence to a queued request.
func (s *Scheduler) start(e *entry) *active {
	now := time.Now()
	seq, cached := s.sequenceFor(e.req.Prompt)
	a := &active{
		entry:      e,
		seq:        seq,
		sampler:    generate.NewSampler(e.req.Sampling),
		prefilled:  cached,
		next:       -1,
		mtp:        e.req.Speculative && s.m.HasMTP(),
		mtpFrom:    cached,
		admittedAt: now,
		res: Result{
			StopToken:    -1,
			PromptTokens: len(e.req.Prompt),
			CachedTokens: cached,
			Lane:         LaneSingle,
			QueueWait:    now.Sub(e.submitted),
		},
	}
	if e.req.FrequencyPenalty != 0 || e.req.PresencePenalty != 0 {
		a.counts = map[int]int{}
	}
	a.reportPrefill()
	return a
}

// reportPrefill tells the request's OnPrefill how much of the prompt is read.
func (a *active) reportPrefill() {
	if f := a.req.OnPrefill; f != nil {
		f(Progress{PromptTokens: len(a.req.Prompt), CachedTokens: a.res.CachedTokens, Done: a.prefilled})
	}
}

// step runs one forward over the active requests: a decode row for each
// request with a sampled token, and the next prompt chunk of the first
// request still prefilling.
func (s *Scheduler) step(ctx context.Context) {
	var decoders []*active
	var pre *active
	for _, a := range s.active {
		switch {
		case a.next >= 0:
			decoders = append(decoders, a)
		case pre == nil:
			pre = a
		}
	}
	start := time.Now()
	if pre == nil && len(decoders) == 1 && decoders[0].mtp && decoders[0].seq.Len()+2 <= decoders[0].seq.Limit() {
		s.setState(1)
		n := s.speculate(ctx, decoders[0])
		s.recordStep(n, time.Since(start))
		s.compact()
		return
	}

	reqs := make([]model.Request, 0, len(decoders)+1)
	for _, a := range decoders {
		reqs = append(reqs, model.Request{Seq: a.seq, Tokens: []int{a.next}, AllLogits: true})
	}
	var chunk []int
	if pre != nil {
		chunk = pre.req.Prompt[pre.prefilled:min(pre.prefilled+s.cfg.PrefillChunk, len(pre.req.Prompt))]
		reqs = append(reqs, model.Request{Seq: pre.seq, Tokens: chunk})
	}
	members := decoders
	if pre != nil {
		members = append(slices.Clip(decoders), pre)
	}
	s.setState(len(members))
	for _, a := range members {
		a.res.PeakBatch = max(a.res.PeakBatch, len(members))
		if len(members) > 1 {
			a.res.Lane = LaneBatched
		}
	}

	fctx, stop := s.forwardContext(ctx, members)
	outs, err := s.m.Forward(fctx, reqs, nil)
	stop()
	if err != nil {
		s.failStep(ctx, members, err)
		return
	}
	tokens := 0
	for i, a := range decoders {
		a.absorb(outs[i].Hidden, s.cfg.PrefillChunk)
		if s.sampleAndEmit(a, outs[i].Logits[0]) {
			tokens++
		}
	}
	if pre != nil {
		out := outs[len(decoders)]
		pre.prefilled += len(chunk)
		pre.reportPrefill()
		pre.absorb(out.Hidden, s.cfg.PrefillChunk)
		if pre.prefilled == len(pre.req.Prompt) {
			pre.firstAt = time.Now()
			pre.res.PrefillTime = pre.firstAt.Sub(pre.admittedAt)
			if s.sampleAndEmit(pre, out.Logits[0]) {
				tokens++
			}
		}
	}
	s.recordStep(tokens, time.Since(start))
	s.compact()
}

// forwardContext is the context of a forward: a lone request's own context
// (so cancelling it interrupts the forward), else the scheduler's.
func (s *Scheduler) forwardContext(ctx context.Context, members []*active) (context.Context, func()) {
	if len(members) != 1 {
		return ctx, func() {}
	}
	fctx, cancel := context.WithCancel(members[0].stream.ctx)
	stop := context.AfterFunc(ctx, cancel)
	return fctx, func() { stop(); cancel() }
}

// failStep finishes the members of a failed forward: cancelled when their
// own context ended, else with the error.
func (s *Scheduler) failStep(ctx context.Context, members []*active, err error) {
	for _, a := range members {
		switch {
		case a.stream.ctx.Err() != nil:
			a.res.FinishReason, a.res.Err = FinishCancelled, a.stream.ctx.Err()
		case ctx.Err() != nil:
			a.res.FinishReason, a.res.Err = FinishCancelled, ErrClosed
		default:
			var ce *kvcache.ContextError
			if errors.As(err, &ce) {
				a.res.FinishReason = FinishLength
			} else {
				a.res.FinishReason, a.res.Err = FinishError, fmt.Errorf("scheduler: forward: %w", err)
			}
		}
		s.finish(a)
	}
	s.compact()
}

// absorb keeps the hidden states of forwarded positions for the MTP layer.
func (a *active) absorb(hidden [][]float32, chunk int) {
	if !a.mtp {
		return
	}
	a.pending = append(a.pending, hidden...)
	if drop := len(a.pending) - max(maxPendingMTP, chunk); drop > 0 {
		a.pending = slices.Delete(a.pending, 0, drop)
		a.mtpFrom += drop
	}
}

// sampleAndEmit samples the next token from logits and records it. It
// reports whether a token was generated (not a stop).
func (s *Scheduler) sampleAndEmit(a *active, logits []float32) bool {
	tok, tl, stop := s.pick(a, logits)
	if stop {
		a.res.FinishReason = FinishStop
		s.finish(a)
		return false
	}
	return s.emit(a, tok, tl)
}

// emit records a sampled token: a stop token finishes the request, others
// are streamed; MaxTokens and the context limit finish it too. It reports
// whether tok was generated.
func (s *Scheduler) emit(a *active, tok int, tl *Token) bool {
	if slices.Contains(a.req.StopTokens, tok) {
		a.res.FinishReason, a.res.StopToken = FinishStop, tok
		s.finish(a)
		return false
	}
	if c := a.req.Constraint; c != nil {
		if err := c.Accept(tok); err != nil {
			a.res.FinishReason, a.res.Err = FinishError, fmt.Errorf("scheduler: constraint refused token %d: %w", tok, err)
			s.finish(a)
			return false
		}
	}
	a.emitted = append(a.emitted, tok)
	if a.counts != nil {
		a.counts[tok]++
	}
	t := Token{ID: tok}
	if tl != nil {
		t = *tl
	}
	a.stream.push(t)
	a.next = tok
	// As generate does: the context is full when every emitted token but
	// the newest is cached and the cache is at its limit.
	if len(a.emitted) >= a.req.MaxTokens || len(a.req.Prompt)+len(a.emitted)-1 >= a.seq.Limit() {
		a.res.FinishReason = FinishLength
		s.finish(a)
	}
	return true
}

// finish completes a request and frees its sequence.
func (s *Scheduler) finish(a *active) {
	if a.done {
		return
	}
	a.done = true
	// Keep only the cached tokens that belong to prompt + output.
	want := append(slices.Clip(a.req.Prompt), a.emitted...)
	a.seq.Trim(commonPrefix(a.seq.Tokens(), want))
	s.release(a.seq)
	a.seq, a.pending = nil, nil

	r := a.res
	r.CompletionTokens = len(a.emitted)
	if !a.firstAt.IsZero() {
		r.DecodeTime = time.Since(a.firstAt)
	} else if !a.admittedAt.IsZero() {
		r.PrefillTime = time.Since(a.admittedAt)
	}
	s.mu.Lock()
	s.stats.Requests++
	s.stats.LastRequest = &r
	s.mu.Unlock()
	a.stream.finish(&r)
}
