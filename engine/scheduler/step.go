package scheduler

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/spoolhq/spool/engine/generate"
	"github.com/spoolhq/spool/engine/kvcache"
)

// active is a request holding a sequence.
type active struct {
	*entry
	dec  *generate.Decoder
	res  Result // the scheduler's part of the result
	done bool
}

// start assigns a sequence to a queued request, starts its decoder and
// restores what the prompt cache holds of its prompt (bounded by the
// request's context). A request the decoder refuses, or whose restore
// fails, is finished (a.done).
func (s *Scheduler) start(e *entry) *active {
	now := time.Now()
	seq := s.sequenceFor(e.req.Prompt, e.req.Embed)
	a := &active{entry: e, res: Result{Lane: LaneSingle, QueueWait: now.Sub(e.submitted)}}
	p := e.req.Params
	if p.Speculative && p.Gate == nil && !e.req.Embed {
		p.Gate = s.gateFor(seq)
	}
	p.PrefillChunk = s.cfg.PrefillChunk
	p.PromptCache = s.cfg.PromptCache
	p.OnPrefill = nil
	if on := e.req.OnPrefill; on != nil {
		p.OnPrefill = func(done, total int) {
			on(Progress{PromptTokens: total, CachedTokens: a.dec.Result().CachedTokens, Done: done})
		}
	}
	dec, err := generate.NewDecoder(s.r, seq, e.req.Prompt, p, func(t Token) error {
		e.stream.push(t)
		return nil
	})
	if err != nil {
		s.release(seq, e.req.Embed)
		a.done = true
		r := a.res
		r.FinishReason, r.StopToken, r.PromptTokens, r.Err = FinishError, -1, len(e.req.Prompt), fmt.Errorf("scheduler: %w", err)
		e.stream.finish(&r)
		return a
	}
	a.dec = dec
	if err := dec.Restore(e.stream.ctx); err != nil {
		if e.stream.ctx.Err() != nil {
			s.end(a, FinishCancelled, e.stream.ctx.Err())
		} else {
			s.end(a, FinishError, fmt.Errorf("scheduler: %w", err))
		}
	}
	return a
}

// step runs one forward over the active requests: a decode row for each
// request with a sampled token (and its MTP draft when it is alone,
// speculative and its gate drafts), and the next prompt chunk of the first
// request still prefilling.
func (s *Scheduler) step(ctx context.Context) {
	var members []*active
	var pre *active
	for _, a := range s.active {
		switch {
		case a.done:
		case !a.dec.Prefilling():
			members = append(members, a)
		case pre == nil:
			pre = a
		}
	}
	if pre != nil && pre.req.Embed && len(members) > 0 && s.m.Accelerated() {
		// Whether a forward runs on the backend depends on its rows: an
		// embedding's chunks are forwarded alone, so that its vector never
		// depends on the requests beside it (on the CPU the rows do not
		// matter). Its steps alternate with the decoders' so that neither
		// starves.
		s.embedAlone = !s.embedAlone
		if s.embedAlone {
			members = members[:0]
		} else {
			pre = nil
		}
	}
	if pre != nil {
		members = append(members, pre)
	}
	// A decode row forwarded alone may draft (its gate decides); a batched
	// one never does.
	alone := len(members) == 1 && pre == nil
	s.setBatch(len(members))
	for _, a := range members {
		a.res.PeakBatch = max(a.res.PeakBatch, len(members))
		if len(members) > 1 {
			a.res.Lane = LaneBatched
		}
	}

	fctx, stop := s.forwardContext(ctx, members)
	defer stop()
	// The step's forwards (the batch's, and the MTP passes its members
	// run as they consume it) all run in s.r, which records their cost.
	costBefore := s.r.TotalCost()
	emitted := 0
	for _, a := range members {
		emitted -= len(a.dec.Result().Tokens)
	}
	reqs := s.reqs[:0]
	for _, a := range members {
		req, err := a.dec.Next(fctx, alone)
		if err != nil {
			s.failStep(ctx, members, err)
			return
		}
		reqs = append(reqs, req)
	}
	s.reqs = reqs
	outs, cost, err := generate.Forward(fctx, s.r, reqs)
	clear(s.reqs)
	if err != nil {
		s.failStep(ctx, members, err)
		return
	}
	// Requests that ended are finished once every member has consumed
	// its output: finishing runs the MTP layer in the same runner.
	type ending struct {
		a   *active
		err error
	}
	var ended []ending
	for i, a := range members {
		if err := a.dec.Consume(fctx, outs[i], cost); err != nil || a.dec.Done() {
			ended = append(ended, ending{a, err})
		}
	}
	for _, e := range ended {
		switch {
		case e.err == nil:
			s.finish(e.a)
		case e.a.stream.ctx.Err() != nil || ctx.Err() != nil:
			s.fail(ctx, e.a, e.err)
		default:
			s.end(e.a, FinishError, fmt.Errorf("scheduler: %w", e.err))
		}
	}
	for _, a := range members {
		emitted += len(a.dec.Result().Tokens)
	}
	s.recordStep(emitted, pre != nil, s.r.TotalCost().Bytes-costBefore.Bytes)
	if pre != nil && !pre.dec.Prefilling() {
		s.recordPrefill(pre.dec.Result())
	}
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

// failStep finishes the members of a failed forward.
func (s *Scheduler) failStep(ctx context.Context, members []*active, err error) {
	for _, a := range members {
		s.fail(ctx, a, err)
	}
	s.compact()
}

// fail finishes a request whose forward failed: cancelled when its own
// context or the scheduler's ended, out of context when the cache is full,
// else with the error.
func (s *Scheduler) fail(ctx context.Context, a *active, err error) {
	var ce *kvcache.ContextError
	switch {
	case a.stream.ctx.Err() != nil:
		s.end(a, FinishCancelled, a.stream.ctx.Err())
	case ctx.Err() != nil:
		s.end(a, FinishCancelled, ErrClosed)
	case errors.As(err, &ce):
		s.end(a, FinishLength, nil)
	default:
		s.end(a, FinishError, fmt.Errorf("scheduler: forward: %w", err))
	}
}

// end finishes a request for a reason of the scheduler's (cancelled,
// error) or the context being full.
func (s *Scheduler) end(a *active, reason string, err error) {
	a.res.FinishReason, a.res.Err = reason, err
	s.finish(a)
}

// finish completes a request and frees its sequence.
func (s *Scheduler) finish(a *active) {
	if a.done {
		return
	}
	a.done = true
	a.dec.Finish(a.stream.ctx)
	r := a.res
	r.Result = *a.dec.Result()
	r.Tokens = slices.Clip(r.Tokens)
	if a.res.FinishReason != "" {
		r.FinishReason = a.res.FinishReason
	}
	r.CompletionTokens = len(r.Tokens)
	s.release(a.dec.Seq(), a.req.Embed)
	// The figures count the request as ended before its caller hears so:
	// a client reading Stats after its result never sees itself active.
	live := 0
	for _, o := range s.active {
		if !o.done {
			live++
		}
	}
	s.mu.Lock()
	s.stats.Requests++
	s.stats.LastRequest = &r
	s.recordDrafting(r.Drafting)
	s.stats.Active, s.stats.Sequences = live, s.sequences
	s.mu.Unlock()
	a.stream.finish(&r)
}
