package scheduler

import (
	"context"
	"fmt"

	"github.com/spoolhq/spool/engine/generate"
	"github.com/spoolhq/spool/engine/model"
)

// speculate advances a lone request with one MTP draft, the way
// generate.Generate's speculative path does: the MTP layer absorbs the
// pending hidden states and drafts the token after a.next; the main model
// verifies [a.next, draft] in one two-row forward. The position after
// a.next is sampled from the main logits exactly as the plain path would,
// and the draft is kept only when it equals that sample. It returns the
// number of tokens generated.
func (s *Scheduler) speculate(ctx context.Context, a *active) int {
	a.res.PeakBatch = max(a.res.PeakBatch, 1)
	fctx, stop := s.forwardContext(ctx, []*active{a})
	defer stop()
	pos := a.seq.Len() // position of a.next
	tokens := a.seq.Tokens()
	next := make([]int, len(a.pending))
	for j := range a.pending {
		if p := a.mtpFrom + j + 1; p < len(tokens) {
			next[j] = tokens[p]
		} else {
			next[j] = a.next
		}
	}
	draft := -1
	if len(a.pending) > 0 {
		draftLogits, _, err := s.m.MTPForward(fctx, a.seq, a.mtpFrom, a.pending, next, true)
		if err != nil {
			s.failStep(ctx, []*active{a}, fmt.Errorf("MTP draft: %w", err))
			return 0
		}
		draft = generate.Argmax(draftLogits[0])
		a.res.DraftsProposed++
	}
	a.pending = nil
	a.mtpFrom = pos
	row := []int{a.next}
	if draft >= 0 {
		row = append(row, draft)
	}
	outs, err := s.m.Forward(fctx, []model.Request{{Seq: a.seq, Tokens: row, AllLogits: true}}, nil)
	if err != nil {
		s.failStep(ctx, []*active{a}, err)
		return 0
	}
	out := outs[0]
	if !s.sampleAndEmit(a, out.Logits[0]) {
		return 0
	}
	if a.done {
		return 1
	}
	if draft < 0 || a.next != draft {
		a.seq.Trim(pos + 1)
		a.pending = out.Hidden[:1]
		return 1
	}
	a.res.DraftsAccepted++
	a.pending = out.Hidden
	if !s.sampleAndEmit(a, out.Logits[1]) {
		return 1
	}
	return 2
}
